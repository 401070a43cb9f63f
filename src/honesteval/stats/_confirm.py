"""The confirmation's test: a fixed-n betting e-value on the paired per-task deltas.

The confirmation decides at the online level alpha_j (1e−2 at j = 1, 1e−5 further on). A t bar
there assumes normal tails that bounded, skewed per-task deltas do not have (a candidate a bit
better on most tasks and much worse on a few: the t test rejects 2.3× too often at 1e−5). This
test's level holds for any distribution of deltas in [−1, 1]:

* **The e-value.** A gambler starts with capital 1 and, task after task, stakes a fraction
  λ_t ∈ [0, 1] of it on x_t > 0: K = Π_t (1 + λ_t·x_t). λ_t is chosen from x_1..x_{t−1} only
  (Waudby-Smith & Ramdas 2024, "Estimating means of bounded random variables by betting",
  JRSS-B 86(1), the fixed-n plug-in bet of their Eq. 26 read one-sided:
  λ_t = min(1, sqrt(2·log(1/α) / (n·σ̂²_{t−1})))), so when the deltas are independent with mean
  ≤ 0 each factor has conditional mean ≤ 1 and E[K] ≤ 1. The capital depends on the order of
  the tasks; averaging it over :data:`PERMUTATIONS` fixed permutations of the *sorted* deltas
  makes the e-value a function of the multiset alone (a mean of e-values is an e-value), so
  the task ids' order cannot move it.
* **The decision.** Promote iff E ≥ 1/alpha_j. Markov: P(E ≥ 1/α) ≤ α·E[E] ≤ α, exactly,
  for every n and every distribution on [−1, 1] with mean ≤ 0: no normal approximation.
* **What it costs.** Nothing can confirm faster than the worst null allows: with n tasks whose
  deltas are all v > 0, a two-point null {−1, v} with mean 0 produces that sample with
  probability (1 + v)^−n, so *no* valid test can confirm at α unless n·log(1 + v) ≥ log(1/α)
  (at 1e−5: 50 tasks need v ≥ 0.26). The t bar's extra power at small alpha_j is its normal
  assumption. The power (:func:`promotion_power`) is computed by simulation, never by the t
  formula.

The null the level holds under: the observations (per-task deltas, or per-cluster means of them
when tasks carry clusters) are independent, each with mean ≤ 0 — e.g. i.i.d. draws from a
population of tasks on which the candidate is no better, with fresh seeds for the trials.

With e-values the online rule e-LOND (Xu & Ramdas 2024, "Online multiple testing with
e-values", AISTATS; :mod:`._online`) controls the false discovery rate under arbitrary
dependence between confirmations.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "CONFIRM_MAX_BET",
    "PERMUTATIONS",
    "ConfirmEvidence",
    "cluster_means",
    "confirm_evidence",
    "confirmation_log_e",
    "e_value_bar",
    "log_e_of_shift",
]

#: Bets up to the whole capital: λ = 1 is still valid (a delta of −1 ruins that ordering, the
#: e-value stays an e-value) and lets a sample of n deltas ≈ v reach (1 + v)^n, the most any
#: valid test can use (see the module docstring).
CONFIRM_MAX_BET = 1.0
#: Orderings averaged: enough that the e-value barely moves with the permutation seed.
PERMUTATIONS = 32
PERMUTATION_SEED = 24_2024
PRIOR_VAR = 0.25  # one pseudo-observation of variance 1/4 (the most a [−1, 1] half-range has)


@functools.lru_cache(maxsize=64)
def _orderings(n: int, count: int) -> np.ndarray:
    """``count`` fixed orderings of n items (seeded, so the e-value is reproducible)."""
    rng = np.random.default_rng(PERMUTATION_SEED + n)
    return np.argsort(rng.random((count, n)), axis=-1)


def _bets(x: np.ndarray, alpha: float) -> np.ndarray:
    """λ_t along the last axis from x_1..x_{t−1}: shift-invariant (the running variance about
    the running mean), so a shift of every delta moves the capital monotonically."""
    n = x.shape[-1]
    t = np.arange(1, n + 1, dtype=float)
    s1 = np.cumsum(x, axis=-1)
    s2 = np.cumsum(x * x, axis=-1)
    centred = np.maximum(s2 - s1 * s1 / t, 0.0)
    var = (PRIOR_VAR + centred) / (t + 1)
    prev = np.concatenate([np.full((*x.shape[:-1], 1), PRIOR_VAR), var[..., :-1]], axis=-1)
    bets: np.ndarray = np.minimum(
        np.sqrt(2.0 * math.log(1.0 / alpha) / (n * prev)), CONFIRM_MAX_BET
    )
    return bets


def confirmation_log_e(
    samples: ArrayLike, alpha: float, *, permutations: int = PERMUTATIONS
) -> np.ndarray:
    """log E for each row of ``samples`` (observations along the last axis, any order).

    Vectorised over leading axes. −inf when every ordering was ruined (a delta of −1 met a bet
    of 1). An empty row has E = 1 (log 0). ``permutations`` fewer than the default only for
    power simulations (the decision always averages :data:`PERMUTATIONS`).

    >>> float(np.exp(confirmation_log_e([0.2] * 50, 1e-3))) > 1e3   # 50 tasks, +0.2 each
    True
    >>> bool(confirmation_log_e([0.2, -0.2] * 25, 1e-3) < 0)         # mean 0: no evidence
    True
    """
    x = np.sort(np.asarray(samples, dtype=float), axis=-1)
    if np.any(np.abs(x) > 1):
        raise ValueError("paired deltas must lie in [-1, 1]")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    n = x.shape[-1]
    if n == 0:
        return np.zeros(x.shape[:-1])
    ordered = x[..., _orderings(n, permutations)]  # (..., P, n)
    return _log_mean_capital(ordered, alpha)


def _log_mean_capital(ordered: np.ndarray, alpha: float) -> np.ndarray:
    factors = 1.0 + _bets(ordered, alpha) * ordered
    with np.errstate(divide="ignore"):
        log_k = np.sum(np.log(np.maximum(factors, 0.0)), axis=-1)  # (..., P)
    top = np.max(log_k, axis=-1)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.mean(np.exp(log_k - safe[..., None]), axis=-1)
        out: np.ndarray = np.where(np.isfinite(top), safe + np.log(mean), -np.inf)
    return out


def log_e_of_shift(residuals: np.ndarray, shift: float, alpha: float) -> float:
    """log E of ``residuals + shift`` (no range check: a factor below 0 counts as ruin). The
    bets depend on the residuals only, so this increases with ``shift``; the selective
    interval (:mod:`._selective`) finds the promotion bar with it."""
    x = np.sort(residuals) + shift
    return float(_log_mean_capital(x[_orderings(x.size, PERMUTATIONS)], alpha))


def e_value_bar(alpha: float) -> float:
    """log(1/α): the confirmation promotes iff log E ≥ this."""
    return math.log(1.0 / alpha)


def cluster_means(values: Sequence[float], keys: Sequence[str] | None) -> np.ndarray:
    """The test's observations: per-task deltas, or with clusters one mean per cluster (tasks
    of a cluster are not independent; clusters are)."""
    x = np.asarray(values, dtype=float)
    if keys is None:
        return x
    groups: dict[str, list[float]] = {}
    for key, value in zip(keys, values, strict=True):
        groups.setdefault(key, []).append(value)
    return np.array([float(np.mean(g)) for _, g in sorted(groups.items())])


@dataclass(frozen=True)
class ConfirmEvidence:
    """One confirmation's e-value against its level, on the test's observations."""

    log_e: float
    alpha: float
    n_obs: int

    @property
    def e_value(self) -> float:
        return math.exp(self.log_e) if self.log_e < 700 else math.inf

    @property
    def accept(self) -> bool:
        return self.log_e >= e_value_bar(self.alpha)

    def text(self) -> str:
        return f"e-value {self.e_value:.4g} vs 1/alpha_j = {1 / self.alpha:.4g}"


def confirm_evidence(observations: np.ndarray, alpha: float) -> ConfirmEvidence:
    return ConfirmEvidence(float(confirmation_log_e(observations, alpha)), alpha, observations.size)
