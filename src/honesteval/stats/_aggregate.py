"""``aggregate``: per-trial outcomes of one candidate on one split → a :class:`SplitResult`.

Vectorised with numpy (10,000 tasks × 10 trials aggregate in tens of milliseconds).
The honesty rules live here:

* ``ok`` trials and ``failed`` ones (the candidate's own failure, at the reward the caller
  gives it: the project's ``failure_reward``) count; ``infra_error`` and ``scorer_error`` are
  missing data;
* a task with zero ``ok`` trials is *unscored*: listed in ``per_task``, excluded from every
  statistic, and it lowers ``coverage``;
* ``reward`` is the mean over scored tasks of each task's mean over its ``ok`` trials, so a
  task with more trials does not weigh more;
* a pass^k / pass@k for a k that no task reaches is *absent*, never 0.0;
* whenever a task lacks a value (no counted trial; for pass^k, fewer than k), the statistic
  over every task asked is bounded: the missing tasks at the reward range's low end, and at its
  high end (``reward_bounds``, ``pass_hat_k_bounds``), and a warning names how many tasks are
  missing whole.

The steps, in order: :func:`_iv` (validation: shapes, ``ks``, rewards inside the reward range)
→ :func:`_task_stats` (per-task means, SEs, passes) → :func:`_spread` (reward, SE and the
independent units the interval is over) → :func:`_intervals` (the reported 95 % interval, the
t interval, and the sample-size sentence) → :func:`_pass_k` → :func:`_bounds` (reward and
pass^k with the missing tasks at 0 and at 1); each returns a frozen result.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain
from typing import Literal

import numpy as np

from honesteval.models import (
    REWARD_RANGE,
    SplitName,
    SplitResult,
    StderrMethod,
    TaskResult,
    TaskTrials,
    cluster_key,
)

from ._checks import sorted_ks
from ._estimators import ClusteredMean, cluster_groups, clustered_mean, combined_stderr, stderr
from ._interval import hidden_fraction, reported_ci, tasks_to_rule_out
from ._missing import missing_bounds_by_position
from ._quantiles import t_quantile

__all__ = ["aggregate"]

FEW_TASKS = 5
FEW_CLUSTERS = 10
RULED_OUT_SHARE = 0.10  # the sample-size sentence says how many units bring the hidden share here
_STATUS_CODE = {"ok": 0, "failed": 1, "infra_error": 2, "scorer_error": 3}


def _validate_ks(ks: Sequence[int] | None, n_trials: int) -> list[int]:
    if ks is None:
        return list(range(1, max(n_trials, 1) + 1))
    return sorted_ks(ks)


@dataclass(frozen=True)
class _Trials:
    """The validated (tasks × trials) matrix, padded with NaN; ``ok`` marks counted trials."""

    rewards: np.ndarray
    ok: np.ndarray
    status_counts: dict[str, int]
    planned: int
    n_trials: int
    ks: list[int]


def _iv(
    task_results: Sequence[TaskTrials],
    ks: Sequence[int] | None,
    n_trials: int | None,
    failure_reward: float,
) -> _Trials:
    """Validate the input and lay it out as a matrix (built from flat lists: 100k trials
    cost one pass in C, not a Python double loop). Every counted reward must be finite and
    inside the reward range; so must ``failure_reward``."""
    low, high = REWARD_RANGE
    if not low <= failure_reward <= high:
        raise ValueError(f"failure_reward {failure_reward!r} is outside the reward range [0, 1]")
    widths = [len(t.statuses) for t in task_results]
    if widths != [len(t.rewards) for t in task_results]:
        t = next(t for t, w in zip(task_results, widths, strict=True) if len(t.rewards) != w)
        raise ValueError(f"task {t.id!r}: {len(t.statuses)} statuses but {len(t.rewards)} rewards")
    planned = sum(widths)
    flat_status = np.fromiter(
        map(_STATUS_CODE.__getitem__, chain.from_iterable(t.statuses for t in task_results)),
        dtype=np.int8,
        count=planned,
    )
    # None (a trial without a reward) becomes NaN; a failed trial counts at failure_reward
    # whatever it carries.
    flat_reward = np.array(list(chain.from_iterable(t.rewards for t in task_results)), dtype=float)
    flat_reward[flat_status == _STATUS_CODE["failed"]] = failure_reward
    width = np.asarray(widths, dtype=np.intp)
    rows = np.repeat(np.arange(len(task_results)), width)
    cols = np.arange(flat_status.size) - np.repeat(np.cumsum(width) - width, width)
    flat_ok = flat_status <= _STATUS_CODE["failed"]  # the counted statuses
    counted = flat_reward[flat_ok]
    if not np.all(np.isfinite(counted)):
        bad = int(rows[flat_ok][~np.isfinite(counted)][0])
        raise ValueError(f"task {task_results[bad].id!r}: a counted trial without a finite reward")
    outside = (counted < low) | (counted > high)
    if outside.any():
        bad = int(rows[flat_ok][outside][0])
        raise ValueError(
            f"task {task_results[bad].id!r}: reward {float(counted[outside][0])!r} is outside "
            "the reward range [0, 1]"
        )
    max_trials = max(widths, default=0)
    rewards = np.full((len(task_results), max_trials), np.nan)
    ok = np.zeros((len(task_results), max_trials), dtype=bool)
    rewards[rows[flat_ok], cols[flat_ok]] = counted
    ok[rows, cols] = flat_ok
    counts = np.bincount(flat_status, minlength=len(_STATUS_CODE))
    n_trials_eff = n_trials if n_trials is not None else max_trials
    return _Trials(
        rewards=rewards,
        ok=ok,
        status_counts={name: int(counts[code]) for name, code in _STATUS_CODE.items()},
        planned=planned,
        n_trials=n_trials_eff,
        ks=_validate_ks(ks, n_trials_eff),
    )


@dataclass(frozen=True)
class _TaskStats:
    """Per task: counted trials, scored or not, mean, SE over its trials, passes."""

    n_ok: np.ndarray
    scored: np.ndarray
    means: np.ndarray
    ses: np.ndarray
    passes: np.ndarray

    @property
    def n_scored(self) -> int:
        return int(self.scored.sum())


def _task_stats(trials: _Trials, threshold: float) -> _TaskStats:
    ok, rewards = trials.ok, trials.rewards
    n_ok = ok.sum(axis=1)
    scored = n_ok > 0
    # Each row is sorted before it is summed: the same trials in any order, the same bits.
    with np.errstate(invalid="ignore", divide="ignore"):
        sums = np.sort(np.where(ok, rewards, 0.0), axis=1).sum(axis=1)
        means = np.where(scored, sums / np.maximum(n_ok, 1), np.nan)
        dev2 = np.sort(np.where(ok, (rewards - means[:, None]) ** 2, 0.0), axis=1).sum(axis=1)
        # Per-task SE over its ok trials; 0 with fewer than two (the spread is unmeasured).
        ses = np.where(n_ok >= 2, np.sqrt(dev2 / np.maximum(n_ok - 1, 1)) / np.sqrt(n_ok), 0.0)
    passes = (ok & (rewards >= threshold)).sum(axis=1)
    return _TaskStats(n_ok, scored, means, ses, passes)


def _coverage_warnings(
    n_tasks: int, n_scored: int, n_trials: int, min_coverage: float
) -> list[str]:
    warnings: list[str] = []
    if n_trials == 1:
        warnings.append("n_trials=1: within-task variance is unmeasured")
    if n_tasks == 0:
        warnings.append("empty split: no task was asked; this result is never gateable")
    elif n_scored == 0:
        warnings.append(f"no task was scored (0 of {n_tasks}): reward and SE are undefined")
    elif n_scored < FEW_TASKS:
        warnings.append(
            f"only {n_scored} scored task{'s' if n_scored != 1 else ''}: "
            f"the SE is optimistic below ~{FEW_TASKS}"
        )
    if n_tasks and n_scored / n_tasks < min_coverage:
        warnings.append(f"coverage {n_scored / n_tasks:.2f} < {min_coverage:.2f}")
    return warnings


@dataclass(frozen=True)
class _Spread:
    """The reward, its SE, and the independent draws the interval is over."""

    reward: float
    se: float
    se_trials: float
    method: StderrMethod
    df: float  # n − 1, or the clustered SE's Bell–McCaffrey df
    units: np.ndarray  # task means, or cluster means; None-free
    unit_name: Literal["tasks", "clusters"]
    equal_units: bool  # the mean of ``units`` is the reward (clusters of equal size)
    n_clusters: int | None
    effective_clusters: float | None
    warnings: list[str]


def _cluster_warnings(clustered: ClusteredMean, equal_sizes: bool) -> list[str]:
    """The few-clusters warning, on the *effective* number of clusters (Σn_c)²/Σn_c²: one
    cluster of 20 tasks beside 10 singletons is 11 clusters but 2.2 effective ones."""
    c, c_eff = clustered.n_clusters, clustered.effective_clusters
    if c < 2:
        return ["fewer than 2 clusters scored: the clustered SE is unmeasured"]
    if c_eff >= FEW_CLUSTERS:
        return []
    counted = f"{c} clusters" if equal_sizes else f"{c_eff:.1f} effective clusters (of {c})"
    rests = (
        "the reported 95% CI (over cluster means) does not rest on it"
        if equal_sizes
        else f"the 95% CI is a t interval with {clustered.df:.1f} Bell-McCaffrey df and may be "
        "too narrow"
    )
    return [
        f"only {counted}: the clustered SE rests on few independent units and may be too "
        f"small, so the gate's bar may be too low; {rests}; unreliable below ~{FEW_CLUSTERS}"
    ]


def _spread(task_results: Sequence[TaskTrials], stats: _TaskStats, method: StderrMethod) -> _Spread:
    """Reward and SE by ``method`` over the scored tasks (at least one)."""
    scored = stats.scored
    means = stats.means[scored]
    task_ses = stats.ses[scored]
    # Correctly rounded sums (math.fsum): the same tasks in any order, the same bits.
    se_trials = math.sqrt(math.fsum((task_ses**2).tolist())) / means.size
    common = dict(reward=math.fsum(means.tolist()) / means.size, se_trials=se_trials, method=method)
    if method == "clustered":
        keys = [
            cluster_key(t.id, t.cluster) for t, s in zip(task_results, scored, strict=True) if s
        ]
        clustered = clustered_mean(means, keys)
        groups = cluster_groups(means, keys)
        sizes = {g.size for g in groups}
        # The clusters are the independent draws. With equal sizes the mean of cluster
        # means is the reward; with unequal sizes it is another estimand.
        return _Spread(
            **common,
            se=clustered.se,
            df=clustered.df,
            units=np.array([math.fsum(g.tolist()) / g.size for g in groups]),
            unit_name="clusters",
            equal_units=len(sizes) == 1,
            n_clusters=clustered.n_clusters,
            effective_clusters=clustered.effective_clusters,
            warnings=_cluster_warnings(clustered, len(sizes) == 1),
        )
    se = stderr(means) if method == "task" else combined_stderr(means, task_ses)
    return _Spread(
        **common,
        se=se,
        df=means.size - 1,
        units=means,
        unit_name="tasks",
        equal_units=True,
        n_clusters=None,
        effective_clusters=None,
        warnings=[],
    )


@dataclass(frozen=True)
class _Intervals:
    ci95: tuple[float, float] | None
    ci95_method: str | None
    ci95_t: tuple[float, float] | None
    warnings: list[str]


def _sample_size_sentence(spread: _Spread, t_half: float | None) -> list[str]:
    """One sentence when the width is the sample size's doing rather than the spread's.

    With n units, any two-sided 95 % interval leaves open a hidden share
    1 − 0.025^(1/n) of units at the far end of the range (:func:`hidden_fraction`); that
    share, times the distance to that end, is the width a sample of n units with no spread
    at all still has on that side. Said when it exceeds the t half-width (the spread's part).
    """
    n = spread.units.size
    low, high = REWARD_RANGE
    far_end = low if spread.reward - low >= high - spread.reward else high
    share = hidden_fraction(n)
    if t_half is not None and share * abs(spread.reward - far_end) <= t_half:
        return []
    unit = spread.unit_name if n != 1 else spread.unit_name[:-1]
    return [
        f"the interval is wide because of the sample size: {n} {unit} cannot rule out a "
        f"hidden {share:.0%} of {spread.unit_name} at reward {far_end:g} "
        f"(~{tasks_to_rule_out(RULED_OUT_SHARE)} would bring that below "
        f"{RULED_OUT_SHARE:.0%})"
    ]


def _intervals(spread: _Spread) -> _Intervals:
    """The reported interval (:func:`reported_ci` over tasks or equal-size clusters; over
    unequal clusters the clustered t interval, CR2 SE with Bell–McCaffrey df, clipped) and
    the Student t interval. The sample-size sentence explains a distribution-free width only."""
    low, high = REWARD_RANGE
    ci95_t: tuple[float, float] | None = None
    t_half: float | None = None
    if spread.df > 0:
        t_half = t_quantile(0.975, spread.df) * spread.se
        ci95_t = (spread.reward - t_half, spread.reward + t_half)
    if spread.equal_units:
        reported = reported_ci(spread.units, spread.unit_name, low=low, high=high)
        sentence = _sample_size_sentence(spread, t_half)
        return _Intervals(reported.bounds, reported.method, ci95_t, sentence)
    if ci95_t is None:
        return _Intervals(None, None, None, [])
    method = (
        f"Student t with {spread.df:.1f} Bell-McCaffrey df over clusters of unequal sizes "
        "(CR2 SE, Bell & McCaffrey 2002; Imbens & Kolesar 2016), clipped"
    )
    return _Intervals((max(ci95_t[0], low), min(ci95_t[1], high)), method, ci95_t, [])


@dataclass(frozen=True)
class _PassK:
    pass_hat: dict[int, float]
    pass_at: dict[int, float]
    tasks_k: dict[int, int]
    warnings: list[str]
    #: per k: the tasks with at least k counted trials, and their pass^k
    per_task_hat: dict[int, tuple[np.ndarray, np.ndarray]]


def _product_ratio(top: np.ndarray, n: np.ndarray, k: int) -> np.ndarray:
    """prod_{i<k} (top − i) / (n − i): C(top, k) / C(n, k), stable, vectorised over tasks.

    A zero factor appears whenever top < k, which gives the exact 0 the closed form gives.
    """
    out = np.ones(top.shape, dtype=float)
    for i in range(k):
        out *= np.maximum(top - i, 0) / (n - i)
    return out


def _pass_k(stats: _TaskStats, ks: list[int]) -> _PassK:
    """pass^k and pass@k over the tasks with at least k counted trials (absent if none)."""
    pass_hat: dict[int, float] = {}
    pass_at: dict[int, float] = {}
    tasks_k: dict[int, int] = {}
    per_task_hat: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    warnings: list[str] = []
    n_ok, n_scored = stats.n_ok, stats.n_scored
    for k in ks:
        reach = n_ok >= k  # implies scored
        count = int(reach.sum())
        if count == 0:
            continue  # absent, never 0.0
        n_k, c_k = n_ok[reach], stats.passes[reach]
        hats = _product_ratio(c_k, n_k, k)
        per_task_hat[k] = (reach, hats)
        pass_hat[k] = math.fsum(hats.tolist()) / count  # order-free: correctly rounded
        pass_at[k] = math.fsum((1.0 - _product_ratio(n_k - c_k, n_k, k)).tolist()) / count
        tasks_k[k] = count
        if count < n_scored:
            warnings.append(
                f"pass^{k} and pass@{k} are over {count} of {n_scored} scored tasks (the rest "
                f"have fewer than {k} counted trials); they are not comparable with pass^1"
            )
    # Uneven counted trials across scored tasks: the missing ones concentrate somewhere.
    short = stats.scored & (n_ok < n_ok.max(initial=0))
    if short.any():
        warnings.append(
            f"missing trials concentrate on {int(short.sum())} of {n_scored} scored tasks: "
            "pass^k may be biased (a task that errors more is under-represented), rerun them"
        )
    return _PassK(pass_hat, pass_at, tasks_k, warnings, per_task_hat)


@dataclass(frozen=True)
class _Bounds:
    reward: tuple[float, float] | None
    pass_hat: dict[int, tuple[float, float]]
    warnings: list[str]


def _bounds(stats: _TaskStats, spread: _Spread | None, pass_k: _PassK) -> _Bounds:
    """Reward and pass^k over every task asked, the tasks lacking a value at the reward
    range's low end and at its high end (:func:`missing_bounds_by_position`, the gate's
    worst-case rule); a warning names the tasks missing whole (no counted trial)."""
    n_tasks = stats.scored.size
    pass_hat: dict[int, tuple[float, float]] = {}
    for k, (reach, hats) in pass_k.per_task_hat.items():
        laid_out = np.zeros(n_tasks)
        laid_out[reach] = hats
        bounds = missing_bounds_by_position(laid_out, reach)
        if bounds is not None:
            pass_hat[k] = bounds
    n_scored = stats.n_scored
    reward = missing_bounds_by_position(stats.means, stats.scored)
    if spread is None or reward is None:
        return _Bounds(None, pass_hat, [])
    lo, hi = reward
    missing = n_tasks - n_scored
    warning = (
        f"{missing} of {n_tasks} tasks missing whole (no counted trial): the reward "
        f"{spread.reward:.4f} is over the other {n_scored}; with the missing at 0 and at 1 it "
        f"lies in [{lo:.4f}, {hi:.4f}] (rerun them)"
    )
    return _Bounds(reward, pass_hat, [warning])


def _per_task(
    task_results: Sequence[TaskTrials], stats: _TaskStats, failure_reward: float
) -> list[TaskResult]:
    """One :class:`TaskResult` a task, built by ``TaskResult.trusted`` (the inputs were
    validated as ``TaskTrials``) from Python lists, not numpy scalars: 10,000 tasks cheaply."""
    scored = stats.scored.tolist()
    means = [m if s else None for m, s in zip(stats.means.tolist(), scored, strict=True)]
    ses = [e if s else None for e, s in zip(stats.ses.tolist(), scored, strict=True)]
    return TaskResult.trusted(
        {
            "id": t.id,
            "cluster": t.cluster,
            "mean": mean,
            "se": se,
            "n_ok": n_ok,
            "statuses": t.statuses,
            # the reward each counted trial contributed; a task without a failed trial keeps
            # its own list
            "rewards": [
                failure_reward if s == "failed" else r
                for s, r in zip(t.statuses, t.rewards, strict=True)
            ]
            if "failed" in t.statuses
            else t.rewards,
            "feedback": t.feedback,
        }
        for t, mean, se, n_ok in zip(task_results, means, ses, stats.n_ok.tolist(), strict=True)
    )


def aggregate(
    task_results: Sequence[TaskTrials],
    ks: Sequence[int] | None = None,
    threshold: float = 1.0,
    *,
    stderr_method: Literal["auto"] | StderrMethod = "auto",
    min_coverage: float = 0.6,
    candidate: str = "",
    fingerprint: str = "",
    split: SplitName = "val",
    base_seed: int = 0,
    n_trials: int | None = None,
    subset: bool = False,
    extra_warnings: Sequence[str] = (),
    failure_reward: float = 0.0,
) -> SplitResult:
    """Aggregate the trials of every task asked into a :class:`SplitResult`.

    ``ks`` defaults to 1..n_trials. ``stderr_method="auto"`` uses the cluster-robust SE when
    any task carries a ``cluster`` (tasks without one are their own cluster), else the plain
    SE of per-task means (Miller 2024, Eq. 1). ``"combined"`` is cap-evolve's formula.
    A ``failed`` trial counts at ``failure_reward`` (whatever reward it carries). A counted
    reward outside the reward range [0, 1] raises ``ValueError``.

    >>> from honesteval.models import TaskTrials
    >>> r = aggregate([TaskTrials(id="a", statuses=["ok"], rewards=[1.0]),
    ...                TaskTrials(id="b", statuses=["ok"], rewards=[0.0]),
    ...                TaskTrials(id="c", statuses=["infra_error"], rewards=[None]),
    ...                TaskTrials(id="d", statuses=["scorer_error"], rewards=[None])])
    >>> r.reward, r.coverage, r.n_tasks
    (0.5, 0.5, 4)
    """
    trials = _iv(task_results, ks, n_trials, failure_reward)
    stats = _task_stats(trials, threshold)
    n_tasks, n_scored = len(task_results), stats.n_scored
    warnings = _coverage_warnings(n_tasks, n_scored, trials.n_trials, min_coverage)
    has_clusters = any(t.cluster is not None for t in task_results)
    method: StderrMethod = (
        ("clustered" if has_clusters else "task") if stderr_method == "auto" else stderr_method
    )
    spread = _spread(task_results, stats, method) if n_scored else None
    intervals = _intervals(spread) if spread else _Intervals(None, None, None, [])
    pass_k = _pass_k(stats, trials.ks)
    bounds = _bounds(stats, spread, pass_k)
    warnings += (spread.warnings if spread else []) + intervals.warnings + pass_k.warnings
    warnings += bounds.warnings
    warnings.extend(extra_warnings)
    counts = trials.status_counts
    return SplitResult.model_construct(
        candidate=candidate,
        fingerprint=fingerprint,
        split=split,
        base_seed=base_seed,
        n_trials=trials.n_trials,
        subset=subset,
        reward=spread.reward if spread else None,
        stderr=spread.se if spread else None,
        stderr_method=method,
        stderr_trials=spread.se_trials if spread else None,
        ci95=intervals.ci95,
        ci95_method=intervals.ci95_method,
        ci95_t=intervals.ci95_t,
        ci95_t_df=spread.df if spread and intervals.ci95_t is not None else None,
        n_clusters=spread.n_clusters if spread else None,
        effective_clusters=spread.effective_clusters if spread else None,
        n_tasks=n_tasks,
        n_scored=n_scored,
        coverage=1.0 if n_tasks == 0 else n_scored / n_tasks,
        empty=n_tasks == 0,
        trials_planned=trials.planned,
        trials_ok=counts["ok"],
        trials_infra_error=counts["infra_error"],
        trials_scorer_error=counts["scorer_error"],
        trials_failed=counts["failed"],
        pass_hat_k=pass_k.pass_hat,
        pass_hat_k_bounds=bounds.pass_hat,
        reward_bounds=bounds.reward,
        pass_at_k=pass_k.pass_at,
        tasks_k=pass_k.tasks_k,
        per_task=_per_task(task_results, stats, failure_reward),
        warnings=warnings,
        pass_threshold=threshold,
        started_at=None,
        finished_at=None,
        wall_s=None,
        trials_reused=0,
        tokens=None,
        cost=None,
        step_seconds=None,
    )
