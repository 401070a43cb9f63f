"""The evaluation core: plan which trials to run (reusing stored ones), then aggregate.

This is where the sealed test split is refused (:class:`SealedSplitError`), in the core and
not only in the CLI. The ``evaluate`` flow calls :func:`plan_evaluation`, runs the planned
trials as Prefect tasks, and calls :func:`finish_evaluation`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from honesteval import interrupts
from honesteval.adapters import Adapter, build_adapter
from honesteval.errors import ConfigError, SealedSplitError
from honesteval.evaluation.tally import EvaluationTally
from honesteval.evaluation.trial import TrialSettings, TrialSpec, grade_isolated, needs_score
from honesteval.models import (
    COUNTED_STATUSES,
    Candidate,
    Seeding,
    SplitName,
    SplitResult,
    Task,
    TrialRecord,
    trial_seed,
    utc_now,
)
from honesteval.project.loader import Project, load_project
from honesteval.project.schema import MAX_TRIALS, ProjectConfig
from honesteval.project.split import SPLIT_NAMES
from honesteval.stats import aggregate, positive_int, sorted_ks
from honesteval.store.fingerprints import trial_context
from honesteval.store.state_dir import Store

_adapters: dict[tuple[str, int, str | None], Adapter] = {}
_adapters_lock = threading.Lock()


def adapter_for(
    project: Project | str, scoring: str | None = None, *, run_start: bool = False
) -> Adapter:
    """The project's adapter, built once per process and run (rebuilt if the file changes).

    Trials carry only the project path, so a Dask worker can build the adapter itself: a
    path loads the project when no adapter of the file as it is now was built; a loaded
    :class:`Project` builds it from what was loaded (no second read), unless the file changed
    since. ``scoring`` is the run's scoring fingerprint (:attr:`TrialSettings.scoring`): the
    trials of one run share one adapter, so its judges keep the prompts and rubrics
    snapshotted when it was built, while a long-lived process (``serve``, a worker) builds a
    fresh one for a run that starts after the files were edited. ``run_start``: a run (or a
    ``check``) asks; an adapter whose scorer saw its files tampered with is not reused for it
    (a new one refuses while the files differ from the clean snapshot).
    """
    root = project.root if isinstance(project, Project) else Path(project)
    mtime_ns = (root / "honesteval.yaml").stat().st_mtime_ns
    key = (str(root), mtime_ns, scoring)
    with _adapters_lock:
        cached = _adapters.get(key)
        if cached is None or (run_start and getattr(cached, "saw_tamper", False)):
            current = isinstance(project, Project) and project.file_mtime_ns == mtime_ns
            source = project if current and isinstance(project, Project) else load_project(root)
            _adapters[key] = build_adapter(source)
        return _adapters[key]


def current_best_name(project: Project) -> str | None:
    best = Store(project.state_dir).read_best()
    return None if best is None else best.name


@dataclass
class EvaluationPlan:
    """Everything decided before the first trial runs."""

    project: Project
    settings: TrialSettings
    split: SplitName
    tasks: list[Task]
    n_trials: int
    base_seed: int
    ks: list[int] | None
    subset: bool
    #: how trial k of a task gets its seed (:func:`~honesteval.models.trial_seed`)
    seeding: Seeding = "shared"
    reused: dict[tuple[str, int], TrialRecord] = field(default_factory=dict)
    todo: list[TrialSpec] = field(default_factory=list)
    #: stored rollouts to grade without running their target again (a run that stopped
    #: between the target and the scorer; ``rescore``)
    to_score: list[tuple[TrialSpec, TrialRecord]] = field(default_factory=list)
    started_at: str = field(default_factory=utc_now)
    t0: float = field(default_factory=time.perf_counter)

    @property
    def candidate(self) -> str:
        return self.settings.candidate.name

    @property
    def trials_planned(self) -> int:
        return len(self.tasks) * self.n_trials

    def seed(self, task_id: str, trial: int) -> int:
        return trial_seed(self.base_seed, task_id, trial, self.seeding)


def check_positive(name: str, value: int | None) -> None:
    """A count the user gave (``--max-concurrency``, ``--batch-size``) is an integer >= 1."""
    if value is not None:
        try:
            positive_int(name, value)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None


def check_split(split: str, *, allow_sealed: bool = False) -> SplitName:
    if split not in SPLIT_NAMES:
        raise ConfigError(f"unknown split {split!r}: use train or val (test is sealed)")
    if split == "test" and not allow_sealed:
        raise SealedSplitError(
            "the test split is sealed: only `honesteval finalize` may score it, once"
        )
    return split


def plan_evaluation(
    project: Project | str | Path,
    candidate: str | None = None,
    split: str = "val",
    *,
    n_trials: int | None = None,
    base_seed: int | None = None,
    ks: Sequence[int] | None = None,
    task_ids: Sequence[str] | None = None,
    fresh: bool = False,
    allow_sealed: bool = False,
    holdout: bool = False,
    seeding: Seeding = "shared",
) -> EvaluationPlan:
    """Validate the request and decide which trials to run and which stored ones to reuse.

    A stored trial is reused when it is counted (``ok``, or ``failed``: the candidate's own
    failure is a result, not a blip) and matches candidate fingerprint, split, task, seed and
    context (the scoring fingerprint and the task's content: a changed scorer or task never
    reuses stale trials; records from before contexts existed are rerun), a trial failed for
    running past ``timeout_s`` only while ``timeout_is: failure`` and ``timeout_s`` was not
    raised since, and, for a scored
    trial with evaluation steps, the evaluator fingerprint (the steps' files wherever they
    live); infra and scorer errors are run again; ``fresh=True`` reuses nothing.

    With a held-out part of val frozen (``gate.confirm_holdout``), ``val`` means the rest of
    it; ``holdout=True`` (the gate's confirmations only) means the held-out part.
    ``seeding="per_task"`` (the gate's confirmations) gives each task its own seeds
    (:mod:`honesteval.models.seeds`).
    """
    proj = project if isinstance(project, Project) else load_project(project)
    split_name = check_split(split, allow_sealed=allow_sealed)
    n, wanted_ks = _iv_counts(proj.config.trials if n_trials is None else n_trials, ks)
    seed0 = proj.config.base_seed if base_seed is None else int(base_seed)
    cand = proj.candidate(_candidate_or_best(proj, candidate))
    Store(proj.state_dir).check_writable()
    # targets, scorers, steps checked before any trial; judges snapshot their files now
    adapter = adapter_for(proj, proj.scoring, run_start=True)
    tasks, subset = _select_tasks(proj, split_name, task_ids, holdout=holdout)
    started_at = utc_now()
    plan = EvaluationPlan(
        project=proj,
        settings=_trial_settings(proj, cand, split_name, fresh_since=started_at if fresh else None),
        started_at=started_at,
        split=split_name,
        tasks=tasks,
        n_trials=n,
        base_seed=seed0,
        ks=wanted_ks,
        subset=subset,
        seeding=seeding,
    )
    stored_trials = (
        {} if fresh else Store(proj.state_dir).read_trials(split_name, cand.name, cand.fingerprint)
    )
    _sort_trials(plan, stored_trials, getattr(adapter, "scorer_fingerprint", None))
    return plan


def _candidate_or_best(proj: Project, candidate: str | None) -> str:
    """The candidate asked for, else the current best (an error before the first promotion)."""
    if candidate is not None:
        return candidate
    best = current_best_name(proj)
    if best is None:
        raise ConfigError("no current best yet: name a candidate")
    return best


def _trial_settings(
    proj: Project, cand: Candidate, split: SplitName, *, fresh_since: str | None = None
) -> TrialSettings:
    """What every trial of this evaluation runs under, from the project's settings."""
    cfg = proj.config
    return TrialSettings(
        project_root=str(proj.root),
        candidate=cand,
        split=split,
        retries=cfg.retries,
        retry_backoff_s=cfg.retry_backoff_s,
        timeout_s=cfg.timeout_s,
        failure_reward=cfg.failure_reward,
        timeout_is=cfg.timeout_is,
        scoring=proj.scoring,
        fresh_since=fresh_since,
    )


def _timeout_still_holds(record: TrialRecord, settings: TrialSettings) -> bool:
    """A trial failed for running past ``timeout_s`` counts only while that verdict holds:
    time is still the candidate's (``timeout_is: failure``) and the limit is no longer now."""
    if record.timeout_s is None:
        return True
    return settings.timeout_is == "failure" and settings.timeout_s <= record.timeout_s


def _iv_counts(n: object, ks: Sequence[int] | None) -> tuple[int, list[int] | None]:
    """Trials per task (an integer in 1..MAX_TRIALS) and the pass^k ks, validated."""
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_TRIALS:
        raise ConfigError(f"n_trials must be an integer >= 1 (at most {MAX_TRIALS}), got {n!r}")
    try:
        return n, None if ks is None else sorted_ks(ks)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


def _select_tasks(
    project: Project, split: SplitName, task_ids: Sequence[str] | None, *, holdout: bool
) -> tuple[list[Task], bool]:
    """The split's tasks, or the asked subset of them in the asked order; (tasks, subset).

    Where a held-out part of val is frozen (``gate.confirm_holdout``), only confirmations
    (``holdout=True``) score it and nothing else does."""
    tasks = project.tasks(split)
    held = Store(project.state_dir).read_holdout() if split == "val" else None
    if held is not None:
        tasks = [t for t in tasks if (t.id in held) == holdout]
    elif holdout:
        raise ConfigError("no held-out part of val is frozen (gate.confirm_holdout)")
    if not tasks:
        raise ConfigError(f"split {split!r} has no tasks")
    if task_ids is None:
        return tasks, False
    wanted = list(dict.fromkeys(task_ids))
    by_id = {t.id: t for t in tasks}
    unknown = [t for t in wanted if t not in by_id]
    if unknown:
        raise ConfigError(f"task ids not in split {split!r}: {unknown[:5]}")
    if not wanted:
        raise ConfigError("task_ids is empty")
    return [by_id[t] for t in wanted], set(wanted) != set(by_id)


#: The fields every planned TrialSpec sets, one set for all of them: a 50,000-trial plan built
#: with the validating constructor held 50,000 copies of it (~0.2 KB each).
_SPEC_FIELDS = set(TrialSpec.model_fields)


def _sort_trials(
    plan: EvaluationPlan,
    stored_trials: dict[tuple[str, int], TrialRecord],
    scorer_fingerprint: str | None,
) -> None:
    """Every planned trial into ``reused``, ``to_score`` (a stored rollout to grade) or
    ``todo`` (its target runs)."""
    scoring, settings = plan.project.scoring, plan.settings
    for task in plan.tasks:
        context = trial_context(scoring, task)
        for k in range(plan.n_trials):
            seed = plan.seed(task.id, k)
            stored = stored_trials.get((task.id, seed))
            spec = TrialSpec.model_construct(_SPEC_FIELDS, task=task, trial=k, seed=seed)
            # A changed scorer or task never reuses a stale trial (its context differs).
            if stored is None or stored.context != context:
                plan.todo.append(spec)
            elif (
                stored.status in COUNTED_STATUSES
                and _same_scorer(stored, scorer_fingerprint)
                and _timeout_still_holds(stored, settings)
            ):
                plan.reused[(task.id, k)] = stored
            elif needs_score(stored) and stored.output_to_score:
                plan.to_score.append((spec, stored))  # the rollout is paid for: grade it
            # (a rollout stored cut is no output to grade: its target runs again)
            else:
                plan.todo.append(spec)


def _same_scorer(record: TrialRecord, fingerprint: str | None) -> bool:
    """A stored trial counts only if the scorer that graded it is the one configured now."""
    if fingerprint is None or record.score is None:  # unscored: a candidate failure
        return True
    return bool((record.score or {}).get("details", {}).get("evaluator") == fingerprint)


def tally_of(plan: EvaluationPlan) -> EvaluationTally:
    """An empty tally of the plan's evaluation: its reused trials counted, its stored rollouts
    awaiting a score (``plan.to_score``) as they are on disk until graded."""
    return EvaluationTally(
        ((task.id, task.cluster) for task in plan.tasks),
        plan.n_trials,
        reused=plan.reused.values(),
        awaiting=(stored for _, stored in plan.to_score),
    )


def finish_evaluation(
    plan: EvaluationPlan, records: Sequence[TrialRecord], *, write: bool = True
) -> SplitResult:
    """Aggregate the fresh and the reused trials; store the result (SPEC §6.2).

    A stored rollout of ``plan.to_score`` that ``records`` does not grade counts as what it is
    on disk (awaiting its score: missing data); the next run grades it.
    """
    tally = tally_of(plan)
    tally.add(records)
    return finish_tally(plan, tally, write=write)


def finish_tally(
    plan: EvaluationPlan, tally: EvaluationTally, *, write: bool = True
) -> SplitResult:
    """Aggregate an evaluation from its tally (:func:`tally_of`, every trial added as it
    finished); store the result (SPEC §6.2)."""
    cfg = plan.project.config
    result = aggregate(
        tally.task_trials(),
        plan.ks,
        cfg.pass_threshold,
        stderr_method=cfg.stderr_method,
        min_coverage=plan.project.gate_config.min_coverage,
        candidate=plan.candidate,
        fingerprint=plan.settings.candidate.fingerprint,
        split=plan.split,
        base_seed=plan.base_seed,
        n_trials=plan.n_trials,
        subset=plan.subset,
        extra_warnings=_config_warnings(cfg),
        # A failed trial counts at today's failure_reward, even if stored under another.
        failure_reward=cfg.failure_reward,
    )
    result = result.model_copy(
        update=dict(
            trials_planned=plan.trials_planned,
            trials_not_started=tally.n_not_started,
            budget=tally.budget,
            started_at=plan.started_at,
            finished_at=utc_now(),
            wall_s=time.perf_counter() - plan.t0,
            trials_reused=tally.n_reused,
            trials_graded=tally.n_graded,
            seeding=plan.seeding,
            trials_ran=tally.n_ran + tally.n_repeated,
            trials_repeated=tally.n_repeated,
            scorer=plan.settings.scoring,
            **tally.usage(),
        )
    )
    if write:
        Store(plan.project.state_dir).write_result(result)
    return result


def _config_warnings(cfg: ProjectConfig) -> list[str]:
    """Warnings the project's settings earn every result."""
    if cfg.evaluation is not None and cfg.evaluation.count_failure_score:
        return [
            "count_failure_score: true: failed evaluations are averaged in as failure_score "
            "(Eve's behaviour) instead of being treated as missing data"
        ]
    return []


def kept_trials(plan: EvaluationPlan) -> int:
    """How many of the plan's trials are on disk now, so the next run pays no target for them:
    results that count, and rollouts awaiting their score (a ``fresh`` plan: only those
    stored since it started)."""
    cand = plan.settings.candidate
    stored = Store(plan.project.state_dir).read_trials(plan.split, cand.name, cand.fingerprint)
    fresh = plan.settings.fresh_since is not None
    kept = 0
    for task in plan.tasks:
        context = trial_context(plan.project.scoring, task)
        for k in range(plan.n_trials):
            record = stored.get((task.id, plan.seed(task.id, k)))
            if record is None or record.context != context:
                continue
            if fresh and record.started_at < plan.started_at:
                continue
            if record.status in COUNTED_STATUSES or needs_score(record):
                kept += 1
    return kept


def finish_without_targets(plan: EvaluationPlan, max_concurrency: int) -> SplitResult:
    """Finish a plan that runs no target (``plan.todo`` empty) in this process, without
    Prefect: grade the stored rollouts awaiting their score (``plan.to_score``: a run stopped
    between its targets and its scorer), at most ``max_concurrency`` at once, then aggregate
    and store the result as :func:`finish_evaluation` does."""
    if plan.todo:
        raise ValueError(f"{len(plan.todo)} trial(s) still have a target to run")
    if not plan.to_score:
        return finish_evaluation(plan, [])
    from concurrent.futures import ThreadPoolExecutor

    adapter = adapter_for(plan.project, plan.settings.scoring)

    def grade(pair: tuple[TrialSpec, TrialRecord]) -> TrialRecord:
        spec, stored = pair
        try:
            return grade_isolated(adapter, spec.task, stored, plan.settings)
        except interrupts.TrialAbandoned:  # stopping: it stays stored, awaiting its score
            return stored

    # A stop (Ctrl-C) lets the gradings running finish or give up, and starts no other.
    with interrupts.waking(lambda: None), ThreadPoolExecutor(max(1, max_concurrency)) as pool:
        graded = list(pool.map(grade, plan.to_score))
    raise_if_stopped([plan])
    return finish_evaluation(plan, graded)


def raise_if_stopped(plans: Sequence[EvaluationPlan]) -> None:
    """After a run in this process: the storage error that stopped it (a full disk, naming
    the file), or :class:`interrupts.Interrupted` with the trials kept when a signal did."""
    failure = interrupts.failure()
    if failure is not None:
        raise failure
    if interrupts.requested():
        raise interrupts.Interrupted(*kept_of(plans))


def kept_of(plans: Sequence[EvaluationPlan]) -> tuple[int, int]:
    """(trials kept on disk now, trials planned) over ``plans`` (:func:`kept_trials`)."""
    return sum(kept_trials(plan) for plan in plans), sum(p.trials_planned for p in plans)


def plan_rescore(
    project: Project | str | Path,
    candidate: str | None = None,
    split: str = "val",
    *,
    n_trials: int | None = None,
    base_seed: int | None = None,
) -> EvaluationPlan:
    """A plan that re-grades every stored rollout with the current scorer (``to_score``) and
    runs no target: stored ``infra_error`` trials stay missing data (kept as ``reused``).
    A trial never run is an error: evaluate first.
    """
    plan = plan_evaluation(project, candidate, split, n_trials=n_trials, base_seed=base_seed)
    cand = plan.settings.candidate
    stored = Store(plan.project.state_dir).read_trials(plan.split, cand.name, cand.fingerprint)
    plan.reused, plan.todo, plan.to_score = {}, [], []
    missing = 0
    for task in plan.tasks:
        for k in range(plan.n_trials):
            spec = TrialSpec(task=task, trial=k, seed=plan.seed(task.id, k))
            record = stored.get((task.id, spec.seed))
            if record is None:
                missing += 1
            elif record.status == "infra_error":
                plan.reused[(task.id, k)] = record
            else:
                plan.to_score.append((spec, record))
    if missing:
        raise ConfigError(
            f"{missing} trial(s) of {cand.name} on {plan.split} were never run: evaluate first"
        )
    return plan
