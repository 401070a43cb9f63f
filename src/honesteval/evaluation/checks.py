"""``honesteval check``: validate a project and probe its adapter before spending on it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

import numpy as np
from scipy.stats import permutation_test, rankdata

from honesteval.adapters import Adapter, sandbox_line
from honesteval.adapters.context import TrialInfo, current_info
from honesteval.evaluation.plan import adapter_for
from honesteval.evaluation.trial import TrialSpec, attempt_target, score_rollout
from honesteval.models import Candidate, Rollout, Score, Task
from honesteval.project.loader import Project, load_project
from honesteval.project.split import SPLIT_NAMES
from honesteval.stats import small_val_warning

FICTION = "every variance number here is fiction"
SEED_PROBE_TASKS = 3  # tasks the seed probe may try
SEED_PROBE_SEEDS = (8, 4, 4)  # seeds per probed task; it stops at the first rollout that differs
# The seed warning's likelihood: a target whose rollout changed with its seed even one time in
# three would have shown a difference among this many chances with this probability.
_CHANGE_RATE = 1 / 3
#: The cross-task probe: two tasks at these many shared seeds, and the permutation p-value at
#: or below which their rewards' rank correlation says the draws are shared (a target whose
#: tasks draw independently is named so at most this often).
TASK_PROBE_SEEDS = 10
TASK_PROBE_P = 0.01


@dataclass(frozen=True)
class CheckResult:
    name: str
    level: Literal["ok", "warn", "fail"]
    detail: str


@dataclass(frozen=True)
class ProjectCheck:
    """What :func:`check_project` found: every check in the order it ran (iterating gives
    them), and whether any failed."""

    checks: tuple[CheckResult, ...]

    def __iter__(self) -> Iterator[CheckResult]:
        return iter(self.checks)

    def __len__(self) -> int:
        return len(self.checks)

    @property
    def failed(self) -> bool:
        return any(c.level == "fail" for c in self.checks)


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


def check_project(project: Project | str, candidate: str | None = None) -> ProjectCheck:
    """Run every probe; config errors raise ``ConfigError`` (the file itself is unusable).

    In order: the project and its split, its candidates, that two loads give the same tasks,
    what the evaluation does not use, then one candidate's probes (target, scorer, seeds) on
    the first train (else val) tasks. A failing candidates or target check ends the run: what
    follows needs them.
    """
    proj = _iv(project)
    split = proj.frozen_split()
    checks = [
        _project_check(proj, split),
        *_split_checks(split),
        *_unsplit_check(proj, split),
        *_gate_size_check(proj, split),
    ]
    names = proj.candidate_names()
    checks.append(_candidates_check(proj, names))
    checks += _sandbox_check(proj)
    if not names:
        return ProjectCheck(tuple(checks))
    cand = proj.candidate(candidate or names[0])
    checks.append(_tasks_stable_check(proj))
    adapter = adapter_for(proj, proj.scoring, run_start=True)
    checks += _evaluation_notes(adapter)
    checks += _candidate_probes(adapter, proj, cand, split["train"] or split["val"])
    return ProjectCheck(tuple(checks))


def _iv(project: Project | str) -> Project:
    return project if isinstance(project, Project) else load_project(project)


def _project_check(proj: Project, split: dict[str, list[str]]) -> CheckResult:
    sizes = ", ".join(f"{name} {len(split[name])}" for name in SPLIT_NAMES)
    return CheckResult("project", "ok", f"{proj.file}: {len(proj.all_tasks)} tasks ({sizes})")


def _split_checks(split: dict[str, list[str]]) -> list[CheckResult]:
    """The splits an evaluation cannot do without (val: the gate scores it)."""
    return [
        CheckResult("splits", "fail", f"split {name!r} has no tasks")
        for name in ("val",)
        if not split[name]
    ]


def _gate_size_check(proj: Project, split: dict[str, list[str]]) -> list[CheckResult]:
    """A warning when val is too small for the default gate to promote small gains."""
    warning = small_val_warning(len(split["val"]), proj.config.trials, proj.gate_config)
    return [] if warning is None else [CheckResult("gate power", "warn", warning)]


#: Task ids quoted by the unsplit-tasks check.
UNSPLIT_SHOWN = 5


def _unsplit_check(proj: Project, split: dict[str, list[str]]) -> list[CheckResult]:
    """Tasks added after the split was frozen are in no split: never evaluated, so say so."""
    placed = {tid for ids in split.values() for tid in ids}
    unsplit = [tid for tid in proj.task_ids if tid not in placed]
    if not unsplit:
        return []
    shown = ", ".join(unsplit[:UNSPLIT_SHOWN]) + (" …" if len(unsplit) > UNSPLIT_SHOWN else "")
    return [
        CheckResult(
            "unsplit tasks",
            "warn",
            f"{len(unsplit)} task(s) of {proj.config.tasks} are in no split, so nothing "
            f"evaluates them: {shown} (added after the split was frozen in "
            f"{proj.state_dir / 'splits.json'}). To add them, list every split in `splits:` "
            "(the frozen ids plus these), remove splits.json and run `honesteval "
            "refreeze-splits`: it refuses to move a task with stored trials across the "
            "test boundary",
        )
    ]


def _candidates_check(proj: Project, names: list[str]) -> CheckResult:
    if not names:
        return CheckResult("candidates", "fail", f"no candidate in {proj.candidates_dir}")
    return CheckResult("candidates", "ok", ", ".join(names))


def _sandbox_check(proj: Project) -> list[CheckResult]:
    """Which sandbox candidate programs run in (a warning where none can be made here)."""
    line = sandbox_line(proj)
    return [] if line is None else [CheckResult("sandbox", "ok" if line[0] else "warn", line[1])]


def _tasks_stable_check(proj: Project) -> CheckResult:
    """Loading the project again gives the same tasks in every split (tasks must be
    deterministic: a stored trial is matched to its task by content)."""
    again = load_project(proj.root)
    stable = all(
        [t.model_dump() for t in proj.tasks(s)] == [t.model_dump() for t in again.tasks(s)]
        for s in SPLIT_NAMES
    )
    if stable:
        return CheckResult("tasks stable", "ok", "two loads give the same tasks")
    return CheckResult("tasks stable", "fail", "tasks differ between loads")


def _evaluation_notes(adapter: Adapter) -> list[CheckResult]:
    """Eve keys honesteval does not use, one line each (from the steps scorer, if any)."""
    notes = getattr(getattr(adapter, "scorer", None), "notes", [])
    return [CheckResult("evaluation", "ok", note) for note in notes]


def _candidate_probes(
    adapter: Adapter, proj: Project, cand: Candidate, probe_ids: list[str]
) -> list[CheckResult]:
    """The target on the first probe task with two seeds, the scorer twice on one rollout,
    then whether the seed reaches the target (none when there is no task to probe)."""
    if not probe_ids:
        return []
    by_id = {t.id: t for t in proj.all_tasks}
    task, *others = (by_id[i] for i in probe_ids[:SEED_PROBE_TASKS])
    target, runs = _target_check(adapter, proj, cand, task)
    if not runs:
        return [target]
    scorer = _scorer_check(adapter, proj, cand, task, runs[0])
    seeds = _seed_probe(adapter, proj, cand, [task, *others], runs)
    return [target, scorer, seeds, *_task_draws_probe(adapter, proj, cand, [task, *others])]


def _target_check(
    adapter: Adapter, proj: Project, cand: Candidate, task: Task
) -> tuple[CheckResult, list[Rollout]]:
    """Run the target on ``task`` with the first two seeds; [] rollouts when one fails."""
    seed0 = proj.config.base_seed
    runs = []
    for k in (0, 1):
        spec = TrialSpec(task=task, trial=k, seed=seed0 + k)
        attempt = attempt_target(adapter, spec, cand, proj.config.timeout_s)
        if attempt.rollout is None:
            detail = f"task {task.id!r} seed {seed0 + k}: {attempt.error}"
            return CheckResult("target", "fail", detail), []
        runs.append(attempt.rollout)
    detail = f"ran task {task.id!r} with seeds {seed0}, {seed0 + 1}"
    return CheckResult("target", "ok", detail), runs


def _scorer_check(
    adapter: Adapter, proj: Project, cand: Candidate, task: Task, rollout: Rollout
) -> CheckResult:
    """Grade one rollout twice: it must grade, and give the same reward both times."""
    seed0 = proj.config.base_seed
    first, second = (_probe_score(adapter, proj, cand, task, rollout, seed0) for _ in range(2))
    if first.errored:
        return CheckResult("scorer", "fail", f"could not grade the probe: {first.reason}")
    if second.errored or first.reward != second.reward:
        # Rewards are what the gate reads; feedback text may differ (a judge's wording).
        regraded = second.reason if second.errored else second.reward
        return CheckResult(
            "scorer deterministic",
            "warn",
            f"the same rollout of task {task.id!r} scored {first.reward} then {regraded}",
        )
    return CheckResult("scorer deterministic", "ok", f"reward {first.reward} twice")


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


def _probe_rewards(
    adapter: Adapter, proj: Project, cand: Candidate, task: Task, seeds: range
) -> list[float] | None:
    """The rewards of ``task`` at ``seeds`` (None: a trial failed to run or to grade)."""
    rewards = []
    for k, seed in enumerate(seeds):
        rollout = attempt_target(
            adapter, TrialSpec(task=task, trial=k, seed=seed), cand, proj.config.timeout_s
        ).rollout
        score = None if rollout is None else _probe_score(adapter, proj, cand, task, rollout, seed)
        if score is None or score.errored or score.reward is None:
            return None
        rewards.append(float(score.reward))
    return rewards


def _rank_correlation(x: np.ndarray, y: np.ndarray, axis: int = -1) -> np.ndarray:
    """Spearman's rank correlation of ``x`` and ``y`` along ``axis`` (Pearson's of their
    average ranks), for every resample at once."""
    rx, ry = (rankdata(v, axis=axis) for v in (x, y))
    rx, ry = (r - r.mean(axis=axis, keepdims=True) for r in (rx, ry))
    spread = np.sqrt((rx * rx).sum(axis=axis) * (ry * ry).sum(axis=axis))
    return np.asarray((rx * ry).sum(axis=axis) / spread)


def _task_draws_probe(
    adapter: Adapter, proj: Project, cand: Candidate, tasks: list[Task]
) -> list[CheckResult]:
    """Do two tasks at one seed draw independently? A target seeded by the seed alone
    (``random.Random(seed)``) gives every task of a seed the same draw: its rewards then rise
    and fall together across seeds. Two tasks at :data:`TASK_PROBE_SEEDS` shared seeds, the
    one-sided permutation test of Spearman's rank correlation of their rewards (seeds are
    exchangeable when the tasks draw independently, so it names such a target at most
    :data:`TASK_PROBE_P` of the time). None of this moves the gate's level: its confirmation
    gives each task its own seeds (:mod:`honesteval.models.seeds`); the shared seeds of a
    screen then pair the tasks' luck, so the screen is noisier than its SE says."""
    if len(tasks) < 2:
        return []
    seeds = range(proj.config.base_seed, proj.config.base_seed + TASK_PROBE_SEEDS)
    first, second = tasks[:2]
    pair = f"tasks {first.id!r} and {second.id!r} at seeds {seeds.start}..{seeds.stop - 1}"
    rewards = [_probe_rewards(adapter, proj, cand, t, seeds) for t in (first, second)]
    if rewards[0] is None or rewards[1] is None:
        return [CheckResult("task draws", "warn", f"{pair}: a probe trial failed, not compared")]
    a, b = (np.asarray(r) for r in rewards)
    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return [CheckResult("task draws", "ok", f"{pair}: a reward never varied, not compared")]
    test = permutation_test(
        (a, b),
        _rank_correlation,
        permutation_type="pairings",
        alternative="greater",
        n_resamples=9_999,
        vectorized=True,
        rng=0,
    )
    found = (
        f"{pair}: rank correlation of rewards {test.statistic:+.2f} "
        f"(permutation p = {test.pvalue:.3g})"
    )
    if test.pvalue > TASK_PROBE_P:
        return [CheckResult("task draws", "ok", f"{found}: no sign of shared draws")]
    return [
        CheckResult(
            "task draws",
            "warn",
            f"{found}: the tasks' draws look shared, as a target seeded by the seed alone "
            "(random.Random(seed)) gives them; seed it by task and seed "
            "(random.Random(f\"{task['id']}|{seed}\")). The gate's confirmation gives each task "
            "its own seeds, so its level holds; the screen's shared seeds make it noisier "
            "than its SE says",
        )
    ]
