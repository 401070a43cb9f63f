"""``honesteval check``: validate a project and probe its adapter before spending on it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from honesteval.adapters import Adapter
from honesteval.adapters.context import TrialInfo, current_info
from honesteval.evaluation.plan import adapter_for
from honesteval.evaluation.trial import TrialSpec, attempt_target, score_rollout
from honesteval.models import Candidate, Rollout, Score, Task
from honesteval.project.loader import Project, load_project
from honesteval.project.split import SPLIT_NAMES

FICTION = "every variance number here is fiction"
SEED_PROBE_TASKS = 3  # tasks the seed probe may try
SEED_PROBE_SEEDS = (8, 4, 4)  # seeds per probed task; it stops at the first rollout that differs
# The seed warning's likelihood: a target whose rollout changed with its seed even one time in
# three would have shown a difference among this many chances with this probability.
_CHANGE_RATE = 1 / 3


@dataclass(frozen=True)
class CheckResult:
    name: str
    level: Literal["ok", "warn", "fail"]
    detail: str


def _canonical(output: object) -> str:
    return json.dumps(output, sort_keys=True, default=repr)


def _probe_score(
    adapter: Adapter, proj: Project, cand: Candidate, task: Task, rollout: Rollout, seed: int
) -> Score:
    """Score a probe rollout as a trial would be (the steps scorer copies the candidate into
    its workspace) in throw-away folders the scorer removes."""
    info = TrialInfo(str(proj.root), "train", cand, seed, 0, probe=True)
    token = current_info.set(info)
    try:
        return score_rollout(adapter, task, rollout)
    finally:
        current_info.reset(token)


def check_project(project: Project | str, candidate: str | None = None) -> list[CheckResult]:
    """Run every probe; config errors raise ``ConfigError`` (the file itself is unusable)."""
    proj = project if isinstance(project, Project) else load_project(project)
    out: list[CheckResult] = []
    split = proj.frozen_split()
    sizes = ", ".join(f"{name} {len(split[name])}" for name in SPLIT_NAMES)
    out.append(CheckResult("project", "ok", f"{proj.file}: {len(proj.all_tasks)} tasks ({sizes})"))
    for name in ("val",):
        if not split[name]:
            out.append(CheckResult("splits", "fail", f"split {name!r} has no tasks"))
    names = proj.candidate_names()
    if not names:
        out.append(CheckResult("candidates", "fail", f"no candidate in {proj.candidates_dir}"))
        return out
    out.append(CheckResult("candidates", "ok", ", ".join(names)))
    cand = proj.candidate(candidate or names[0])

    again = load_project(proj.root)
    stable = all(
        [t.model_dump() for t in proj.tasks(s)] == [t.model_dump() for t in again.tasks(s)]
        for s in SPLIT_NAMES
    )
    out.append(
        CheckResult(
            "tasks stable",
            "ok" if stable else "fail",
            "two loads give the same tasks" if stable else "tasks differ between loads",
        )
    )

    adapter = adapter_for(str(proj.root), proj.scoring)
    for note in getattr(getattr(adapter, "scorer", None), "notes", []):
        out.append(CheckResult("evaluation", "ok", note))  # Eve keys honesteval does not use
    probe_ids = split["train"] or split["val"]
    if not probe_ids:
        return out
    by_id = {t.id: t for t in proj.all_tasks}
    task, *others = (by_id[i] for i in probe_ids[:SEED_PROBE_TASKS])
    seed0 = proj.config.base_seed
    runs = []
    for k in (0, 1):
        spec = TrialSpec(task=task, trial=k, seed=seed0 + k)
        attempt = attempt_target(adapter, spec, cand, proj.config.timeout_s)
        if attempt.rollout is None:
            out.append(
                CheckResult("target", "fail", f"task {task.id!r} seed {seed0 + k}: {attempt.error}")
            )
            return out
        runs.append(attempt.rollout)
    out.append(CheckResult("target", "ok", f"ran task {task.id!r} with seeds {seed0}, {seed0 + 1}"))
    first, second = (_probe_score(adapter, proj, cand, task, runs[0], seed0) for _ in range(2))
    if first.errored:
        out.append(CheckResult("scorer", "fail", f"could not grade the probe: {first.reason}"))
    elif second.errored or first.reward != second.reward:
        # Rewards are what the gate reads; feedback text may differ (a judge's wording).
        regraded = second.reason if second.errored else second.reward
        out.append(
            CheckResult(
                "scorer deterministic",
                "warn",
                f"the same rollout of task {task.id!r} scored {first.reward} then {regraded}",
            )
        )
    else:
        out.append(CheckResult("scorer deterministic", "ok", f"reward {first.reward} twice"))
    out.append(_seed_probe(adapter, proj, cand, [task, *others], runs))
    return out


def _seed_probe(
    adapter: Adapter, proj: Project, cand: Candidate, tasks: list[Task], first: list[Rollout]
) -> CheckResult:
    """Does the seed reach the target? Seeds are tried on a few tasks until two rollouts of a
    task differ. A stochastic target can give the same rollout for two seeds by chance (a 0/1
    output that is right 80 % of the time agrees with itself 68 % of the time), so one pair is
    no evidence: the warning comes only after every probe agreed, with how likely that was."""
    seed0 = proj.config.base_seed
    chances = 0  # seed pairs that could have differed
    tried: list[str] = []
    for index, (task, n_seeds) in enumerate(zip(tasks, SEED_PROBE_SEEDS, strict=False)):
        known = first if index == 0 else []  # the target check's rollouts of seeds 0 and 1
        outputs: list[str] = []
        for k in range(n_seeds):
            if k < len(known):
                rollout: Rollout | None = known[k]
            else:
                spec = TrialSpec(task=task, trial=k, seed=seed0 + k)
                rollout = attempt_target(adapter, spec, cand, proj.config.timeout_s).rollout
            if rollout is None:
                break  # the target check above reports a failing target; probe what we have
            outputs.append(_canonical(rollout.output))
            if outputs[-1] != outputs[0]:
                return CheckResult(
                    "seeds",
                    "ok",
                    f"the seed changes the rollout (candidate {cand.name!r} on task "
                    f"{task.id!r}: seeds {seed0} and {seed0 + k} differ)",
                )
        chances += max(len(outputs) - 1, 0)
        tried.append(f"{len(outputs)} seeds on task {task.id!r}")
    if chances == 0:
        return CheckResult(
            "seeds", "warn", f"candidate {cand.name!r}: no two seeds could be compared"
        )
    likelihood = 1 - (1 - _CHANGE_RATE) ** chances
    return CheckResult(
        "seeds",
        "warn",
        f"candidate {cand.name!r}: every rollout was byte-identical ({', '.join(tried)}). A target "
        f"whose rollout changed with its seed even one time in three would have shown a "
        f"difference here with probability {likelihood:.1%}: the target most likely ignores its "
        f"seed, and then {FICTION}",
    )
