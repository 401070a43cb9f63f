"""``honesteval check``: validate a project and probe its adapter before spending on it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Literal

from honesteval.adapters import Adapter
from honesteval.evaluation.context import TrialInfo, current_info
from honesteval.evaluation.plan import adapter_for
from honesteval.evaluation.trial import TrialSpec, attempt_target, score_rollout
from honesteval.models import Candidate, Rollout, Score, Task
from honesteval.project.loader import SPLIT_NAMES, Project, load_project

FICTION = "every variance number here is fiction"


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
    task = next(t for t in proj.all_tasks if t.id == probe_ids[0])
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
    probed = f"candidate {cand.name!r} on task {task.id!r}"
    if _canonical(runs[0].output) == _canonical(runs[1].output):
        out.append(
            CheckResult(
                "seeds",
                "warn",
                f"{probed}: seeds {seed0} and {seed0 + 1} gave byte-identical rollouts: the "
                f"target ignores its seed, so {FICTION}",
            )
        )
    else:
        out.append(CheckResult("seeds", "ok", f"two seeds give different rollouts ({probed})"))
    return out
