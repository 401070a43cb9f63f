"""Power analysis for ``honesteval plan`` (Miller 2024, "Adding Error Bars to Evals", §5).

With n tasks, K trials per task, between-task variance ω² of the (paired) per-task true
difference and within-task variance σ² of one trial's difference, the SE of the mean
difference is sqrt((ω² + σ²/K) / n). An effect δ is detected with power 1 − β at one-sided
level α when δ ≥ (z_{1−α} + z_{1−β}) · SE. Solved for n (Eq. 9) and for K (Eq. 10):

    n = (z_{1−α} + z_{1−β})² · (ω² + σ²/K) / δ²
    K = σ² / (n δ² / (z_{1−α} + z_{1−β})² − ω²)      (no K suffices when the bracket is <= 0)

The gate is one-sided, so z_{1−α} here is the gate's own bar (k_se, or the normal quantile of
``alpha``), not Miller's two-sided z_{α/2}.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from honesteval.models import COUNTED_STATUSES, GateConfig, SplitResult

from ._quantiles import normal_quantile

__all__ = [
    "VarianceComponents",
    "bar_z",
    "between_variance",
    "minimum_detectable_effect",
    "paired_components",
    "required_tasks",
    "required_trials",
    "task_means",
    "variance_components",
]

POWER = 0.8  # the minimum detectable effect is the effect detected with 80 % power
Z_POWER_80 = normal_quantile(POWER)


def bar_z(cfg: GateConfig) -> float:
    """The gate's bar as a one-sided normal quantile z_{1−α}: the normal quantile of ``alpha``
    when it is set, else ``k_se`` itself (read as z)."""
    return normal_quantile(1.0 - cfg.alpha) if cfg.alpha is not None else cfg.k_se


def task_means(result: SplitResult) -> dict[str, float]:
    """Each scored task's mean reward, by task id (unscored tasks are absent)."""
    return {t.id: t.mean for t in result.per_task if t.mean is not None}


@dataclass(frozen=True)
class VarianceComponents:
    """ω² (between tasks) and σ² (within a task, one trial), as measured or assumed.

    ``omega2`` is floored at 0 (a variance); ``omega2_unfloored`` is the unbiased estimate it
    came from (negative when the spread of the means is below what trial noise alone gives)
    and ``omega2_se`` its sampling SE: the two-stage power averages over them
    (:func:`honesteval.stats.promotion_power`)."""

    omega2: float
    sigma2: float
    n_tasks: int
    n_trials: float
    source: str
    omega2_unfloored: float | None = None
    omega2_se: float = 0.0


def between_variance(values: np.ndarray, noise: float) -> tuple[float, float]:
    """(ω̂², SE): the variance of ``values`` beyond ``noise`` (what trial noise adds to each
    value's variance), unbiased and not floored, and its sampling SE from the fourth central
    moment, Var(s²) ≈ μ₄/n − σ⁴(n − 3)/(n(n − 1)) (Cramér 1946, §27.4), ``noise`` taken as
    known (it is measured on every trial, not on n values).

    >>> est, se = between_variance(np.array([0.0, 1.0, 0.0, 1.0]), 0.25)
    >>> round(est, 4), round(se, 4)   # s² = 1/3, μ₄ = 1/16: √(1/64 − 1/108)
    (0.0833, 0.0798)
    """
    x = np.asarray(values, dtype=float)
    n = x.size
    s2 = float(np.var(x, ddof=1))
    m4 = float(np.mean((x - x.mean()) ** 4))
    var_s2 = m4 / n - s2 * s2 * (n - 3) / (n * (n - 1))
    return s2 - noise, math.sqrt(max(var_s2, 0.0))


def _within(result: SplitResult) -> float:
    variances = [
        float(
            np.var(
                [
                    float(r)
                    for r, s in zip(t.rewards, t.statuses, strict=True)
                    if s in COUNTED_STATUSES and r is not None
                ],
                ddof=1,
            )
        )
        for t in result.per_task
        if t.n_ok >= 2
    ]
    return float(np.mean(variances)) if variances else 0.0


def variance_components(result: SplitResult) -> VarianceComponents:
    """ω² and σ² of one candidate's result; Var(task means) = ω² + σ²/K, so ω² is what remains
    after the trial noise is taken out (floored at 0)."""
    means = task_means(result)
    if len(means) < 2:
        raise ValueError("need at least 2 scored tasks to measure variances")
    sigma2 = _within(result)
    k = float(np.mean([t.n_ok for t in result.per_task if t.id in means]))
    omega2, se = between_variance(np.array(list(means.values())), sigma2 / k)
    return VarianceComponents(
        max(0.0, omega2), sigma2, len(means), k, f"{result.candidate} on {result.split}", omega2, se
    )


def paired_components(a: SplitResult, b: SplitResult) -> VarianceComponents:
    """Components of the per-task *difference* b − a, from two results on the same tasks."""
    ma, mb = task_means(a), task_means(b)
    ids = sorted(ma.keys() & mb.keys())
    if len(ids) < 2:
        raise ValueError("need at least 2 tasks scored by both results")
    d = np.array([mb[i] - ma[i] for i in ids])
    sigma2 = _within(a) + _within(b)
    k = float(np.mean([t.n_ok for t in a.per_task + b.per_task if t.id in set(ids)]))
    omega2, se = between_variance(d, sigma2 / k)
    return VarianceComponents(
        max(0.0, omega2), sigma2, len(ids), k, f"paired {b.candidate} − {a.candidate}", omega2, se
    )


def minimum_detectable_effect(
    omega2: float,
    sigma2: float,
    n_tasks: int,
    n_trials: float,
    *,
    z_alpha: float,
    z_power: float = Z_POWER_80,
) -> float:
    return (z_alpha + z_power) * math.sqrt((omega2 + sigma2 / n_trials) / n_tasks)


def required_tasks(
    effect: float,
    omega2: float,
    sigma2: float,
    n_trials: float,
    *,
    z_alpha: float,
    z_power: float = Z_POWER_80,
) -> int:
    """Eq. 9: tasks needed to detect ``effect`` at ``n_trials`` trials per task."""
    if effect <= 0:
        raise ValueError("effect must be > 0")
    return max(2, math.ceil((z_alpha + z_power) ** 2 * (omega2 + sigma2 / n_trials) / effect**2))


def required_trials(
    effect: float,
    omega2: float,
    sigma2: float,
    n_tasks: int,
    *,
    z_alpha: float,
    z_power: float = Z_POWER_80,
) -> int | None:
    """Eq. 10: trials per task needed with ``n_tasks`` tasks; None when no number suffices
    (the between-task variance alone hides the effect: add tasks, not trials)."""
    if effect <= 0:
        raise ValueError("effect must be > 0")
    room = n_tasks * effect**2 / (z_alpha + z_power) ** 2 - omega2
    if room <= 0:
        return None
    return max(1, math.ceil(sigma2 / room))
