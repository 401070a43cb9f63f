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
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

import numpy as np

from honesteval.models import (
    REWARD_RANGE,
    SplitName,
    SplitResult,
    StderrMethod,
    TaskResult,
    TaskTrials,
)

from ._estimators import clustered_stderr, combined_stderr, stderr
from ._interval import betting_ci
from ._missing import missing_bounds
from ._quantiles import t_quantile

__all__ = ["aggregate"]

FEW_TASKS = 5
FEW_CLUSTERS = 10
_STATUS_CODE = {"ok": 0, "failed": 1, "infra_error": 2, "scorer_error": 3}


def _validate_ks(ks: Sequence[int] | None, n_trials: int) -> list[int]:
    if ks is None:
        return list(range(1, max(n_trials, 1) + 1))
    out = sorted({int(k) for k in ks})
    if any(k < 1 for k in out):
        raise ValueError(f"every k must be >= 1, got {list(ks)}")
    return out


def _product_ratio(top: np.ndarray, n: np.ndarray, k: int) -> np.ndarray:
    """prod_{i<k} (top − i) / (n − i): C(top, k) / C(n, k), stable, vectorised over tasks.

    A zero factor appears whenever top < k, which gives the exact 0 the closed form gives.
    """
    out = np.ones(top.shape, dtype=float)
    for i in range(k):
        out *= np.maximum(top - i, 0) / (n - i)
    return out


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
    A ``failed`` trial counts at ``failure_reward`` (whatever reward it carries).

    >>> from honesteval.models import TaskTrials
    >>> r = aggregate([TaskTrials(id="a", statuses=["ok"], rewards=[1.0]),
    ...                TaskTrials(id="b", statuses=["ok"], rewards=[0.0]),
    ...                TaskTrials(id="c", statuses=["infra_error"], rewards=[None]),
    ...                TaskTrials(id="d", statuses=["scorer_error"], rewards=[None])])
    >>> r.reward, r.coverage, r.n_tasks
    (0.5, 0.5, 4)
    """
    n_tasks = len(task_results)
    widths = [len(t.statuses) for t in task_results]
    for t, w in zip(task_results, widths, strict=True):
        if len(t.rewards) != w:
            raise ValueError(f"task {t.id!r}: {w} statuses but {len(t.rewards)} rewards")
    max_trials = max(widths, default=0)
    n_trials_eff = n_trials if n_trials is not None else max_trials
    ks_list = _validate_ks(ks, n_trials_eff)

    # A ragged (tasks × trials) matrix padded with NaN; ok marks the trials that count.
    # Built from flat lists so 100k trials cost one pass in C, not a Python double loop.
    flat_status = np.array(
        [_STATUS_CODE[s] for t in task_results for s in t.statuses], dtype=np.int8
    )
    flat_reward = np.array(
        [
            failure_reward if s == "failed" else np.nan if r is None else r
            for t in task_results
            for s, r in zip(t.statuses, t.rewards, strict=True)
        ],
        dtype=float,
    )
    width = np.asarray(widths, dtype=np.intp)
    rows = np.repeat(np.arange(n_tasks), width)
    cols = np.arange(flat_status.size) - np.repeat(np.cumsum(width) - width, width)
    flat_ok = flat_status <= _STATUS_CODE["failed"]  # the counted statuses
    if not np.all(np.isfinite(flat_reward[flat_ok])):
        bad = int(rows[flat_ok][~np.isfinite(flat_reward[flat_ok])][0])
        raise ValueError(f"task {task_results[bad].id!r}: a counted trial without a finite reward")
    rewards = np.full((n_tasks, max_trials), np.nan)
    ok = np.zeros((n_tasks, max_trials), dtype=bool)
    rewards[rows[flat_ok], cols[flat_ok]] = flat_reward[flat_ok]
    ok[rows, cols] = flat_ok
    counts = np.bincount(flat_status, minlength=len(_STATUS_CODE))
    status_counts = {name: int(counts[code]) for name, code in _STATUS_CODE.items()}
    trials_failed = status_counts["failed"]

    n_ok = ok.sum(axis=1)
    scored = n_ok > 0
    n_scored = int(scored.sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        sums = np.where(ok, rewards, 0.0).sum(axis=1)
        means = np.where(scored, sums / np.maximum(n_ok, 1), np.nan)
        dev2 = np.where(ok, (rewards - means[:, None]) ** 2, 0.0).sum(axis=1)
        # Per-task SE over its ok trials; 0 with fewer than two (the spread is unmeasured).
        ses = np.where(n_ok >= 2, np.sqrt(dev2 / np.maximum(n_ok - 1, 1)) / np.sqrt(n_ok), 0.0)
    passes = (ok & (rewards >= threshold)).sum(axis=1)

    warnings: list[str] = []
    empty = n_tasks == 0
    coverage = 1.0 if empty else n_scored / n_tasks
    if n_trials_eff == 1:
        warnings.append("n_trials=1: within-task variance is unmeasured")
    if empty:
        warnings.append("empty split: no task was asked; this result is never gateable")
    elif n_scored == 0:
        warnings.append(f"no task was scored (0 of {n_tasks}): reward and SE are undefined")
    elif n_scored < FEW_TASKS:
        warnings.append(
            f"only {n_scored} scored task{'s' if n_scored != 1 else ''}: "
            f"the SE is optimistic below ~{FEW_TASKS}"
        )
    if not empty and coverage < min_coverage:
        warnings.append(f"coverage {coverage:.2f} < {min_coverage:.2f}")

    task_means = means[scored]
    clusters = [t.cluster for t in task_results]
    has_clusters = any(c is not None for c in clusters)
    auto_method: StderrMethod = "clustered" if has_clusters else "task"
    method: StderrMethod = auto_method if stderr_method == "auto" else stderr_method

    reward: float | None = None
    se: float | None = None
    se_trials: float | None = None
    ci95: tuple[float, float] | None = None
    ci95_t: tuple[float, float] | None = None
    ci95_method: str | None = None
    n_clusters: int | None = None
    if n_scored > 0:
        reward = float(task_means.mean())
        scored_ids = [t.id for t, s in zip(task_results, scored, strict=True) if s]
        df = n_scored - 1
        # The betting interval's observations: task means in id order (i.i.d. draws of tasks).
        observations = task_means[np.argsort(np.asarray(scored_ids, dtype=object))]
        ci95_method = "betting (Waudby-Smith & Ramdas 2024), over tasks"
        if method == "task":
            se = stderr(task_means)
        elif method == "clustered":
            # A task without a cluster is a cluster of its own (its id cannot clash: prefixed).
            keys = [
                f"c:{c}" if c is not None else f"t:{t.id}"
                for t, c, s in zip(task_results, clusters, scored, strict=True)
                if s
            ]
            se = clustered_stderr(task_means, keys)
            names, inverse, sizes = np.unique(
                np.asarray(keys, dtype=object).astype(str), return_inverse=True, return_counts=True
            )
            n_clusters = len(names)
            df = n_clusters - 1
            if n_clusters < 2:
                warnings.append("fewer than 2 clusters scored: the clustered SE is unmeasured")
            elif n_clusters < FEW_CLUSTERS:
                warnings.append(
                    f"only {n_clusters} clusters: the clustered SE and its interval rest on "
                    f"{n_clusters} independent units (t with {df} df); unreliable below "
                    f"~{FEW_CLUSTERS}"
                )
            # The clusters are the independent draws. With equal sizes the mean of cluster
            # means is the reward; with unequal sizes it is another estimand, so the betting
            # interval does not apply and the clustered t interval (clipped) is reported.
            observations = np.bincount(inverse, weights=task_means) / sizes
            ci95_method = "betting (Waudby-Smith & Ramdas 2024), over clusters"
            if len(set(sizes.tolist())) > 1:
                ci95_method = None
        else:
            se = combined_stderr(task_means, ses[scored])
        se_trials = float(math.sqrt(float(np.sum(ses[scored] ** 2))) / n_scored)
        if df >= 1:
            half = t_quantile(0.975, df) * se
            ci95_t = (reward - half, reward + half)
        if ci95_method is not None:
            ci95 = betting_ci(observations, 0.95, low=REWARD_RANGE[0], high=REWARD_RANGE[1])
        elif ci95_t is not None:
            ci95_method = f"Student t with {df} df over clusters (unequal sizes), clipped"
            ci95 = (max(ci95_t[0], REWARD_RANGE[0]), min(ci95_t[1], REWARD_RANGE[1]))

    all_ids = [t.id for t in task_results]
    pass_hat: dict[int, float] = {}
    pass_hat_bounds: dict[int, tuple[float, float]] = {}
    pass_at: dict[int, float] = {}
    tasks_k: dict[int, int] = {}
    for k in ks_list:
        reach = n_ok >= k  # implies scored
        count = int(reach.sum())
        if count == 0:
            continue  # absent, never 0.0
        n_k, c_k = n_ok[reach], passes[reach]
        per_task_hat = _product_ratio(c_k, n_k, k)
        pass_hat[k] = float(per_task_hat.mean())
        if count < n_tasks:
            reached = [i for i, r in zip(all_ids, reach, strict=True) if r]
            bounds = missing_bounds(dict(zip(reached, per_task_hat.tolist(), strict=True)), all_ids)
            if bounds is not None:
                pass_hat_bounds[k] = bounds
        pass_at[k] = float((1.0 - _product_ratio(n_k - c_k, n_k, k)).mean())
        tasks_k[k] = count
        if count < n_scored:
            warnings.append(
                f"pass^{k} and pass@{k} are over {count} of {n_scored} scored tasks (the rest "
                f"have fewer than {k} counted trials); they are not comparable with pass^1"
            )
    # Uneven counted trials across scored tasks: the missing ones concentrate somewhere.
    short = scored & (n_ok < n_ok.max(initial=0))
    if short.any():
        warnings.append(
            f"missing trials concentrate on {int(short.sum())} of {n_scored} scored tasks: "
            "pass^k may be biased (a task that errors more is under-represented), rerun them"
        )

    reward_bounds: tuple[float, float] | None = None
    if reward is not None and n_scored < n_tasks:
        scored_means = {t.id: float(means[i]) for i, t in enumerate(task_results) if scored[i]}
        reward_bounds = missing_bounds(scored_means, all_ids)
    if reward_bounds is not None:
        lo, hi = reward_bounds
        missing = n_tasks - n_scored
        warnings.append(
            f"{missing} of {n_tasks} task{'s' if n_tasks != 1 else ''} missing whole (no "
            f"counted trial): the reward {reward:.4f} is over the other {n_scored}; with the "
            f"missing at 0 and at 1 it lies in [{lo:.4f}, {hi:.4f}] (rerun them)"
        )

    warnings.extend(extra_warnings)
    per_task = [
        # model_construct: inputs were validated as TaskTrials; this keeps 10k tasks cheap.
        TaskResult.model_construct(
            id=t.id,
            cluster=t.cluster,
            mean=float(means[i]) if scored[i] else None,
            se=float(ses[i]) if scored[i] else None,
            n_ok=int(n_ok[i]),
            statuses=t.statuses,
            rewards=[
                failure_reward if s == "failed" else r
                for s, r in zip(t.statuses, t.rewards, strict=True)
            ]
            if trials_failed
            else t.rewards,
            feedback=t.feedback,
        )
        for i, t in enumerate(task_results)
    ]
    return SplitResult.model_construct(
        candidate=candidate,
        fingerprint=fingerprint,
        split=split,
        base_seed=base_seed,
        n_trials=n_trials_eff,
        subset=subset,
        reward=reward,
        stderr=se,
        stderr_method=method,
        stderr_trials=se_trials,
        ci95=ci95,
        ci95_method=ci95_method,
        ci95_t=ci95_t,
        n_clusters=n_clusters,
        n_tasks=n_tasks,
        n_scored=n_scored,
        coverage=coverage,
        empty=empty,
        trials_planned=sum(widths),
        trials_ok=status_counts["ok"],
        trials_infra_error=status_counts["infra_error"],
        trials_scorer_error=status_counts["scorer_error"],
        trials_failed=status_counts["failed"],
        pass_hat_k=pass_hat,
        pass_hat_k_bounds=pass_hat_bounds,
        reward_bounds=reward_bounds,
        pass_at_k=pass_at,
        tasks_k=tasks_k,
        per_task=per_task,
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
