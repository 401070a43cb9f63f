"""An anytime-valid paired test by betting (Waudby-Smith & Ramdas 2024, "Estimating means of
bounded random variables by betting", JRSS-B, §3; the test form of their confidence sequence).

Observations are paired differences x_i = candidate − current in [−1, 1], each from a task
drawn uniformly at random (with replacement) from the split and a fresh seed, so under
H0: "the candidate is no better on this split" every x_i has conditional mean ≤ 0 given the
past. A gambler starts with wealth 1 and stakes a fraction λ_i ∈ [0, c] (c < 1) on x_i > 0:

    K_t = Π_{i≤t} (1 + λ_i·x_i)

Because λ_i is chosen before x_i is seen, K_t is a nonnegative supermartingale under H0, and
Ville's inequality gives P(sup_t K_t ≥ 1/α) ≤ α: stopping whenever K_t ≥ 1/α, or at any
other time for any reason, is a valid level-α test. The bet is the aGRAPA plug-in
λ_i = clip(m / (v + m²), 0, c) from the running mean m and variance v of x_1..x_{i−1}
(regularised by a prior pseudo-observation), which grows log-optimally when x is stationary.

Edge cases: an empty sequence never rejects (K = 1); a run of x = −1 cannot ruin the gambler
because λ ≤ c < 1 keeps every factor ≥ 1 − c > 0.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "SequentialOutcome",
    "betting_bets",
    "betting_log_wealth",
    "sequential_stops",
    "sequential_test",
]

MAX_BET = 0.5
PRIOR_MEAN = 0.0
PRIOR_VAR = 0.25


def betting_bets(
    diffs: ArrayLike, *, max_bet: float = MAX_BET, prior_var: float = PRIOR_VAR
) -> np.ndarray:
    """λ_i for each observation along the last axis, from x_1..x_{i−1} only (predictable)."""
    x = np.asarray(diffs, dtype=float)
    zeros = np.zeros((*x.shape[:-1], 1))
    s1 = np.concatenate([zeros, np.cumsum(x, axis=-1)[..., :-1]], axis=-1)
    s2 = np.concatenate([zeros, np.cumsum(x * x, axis=-1)[..., :-1]], axis=-1)
    seen = np.arange(x.shape[-1], dtype=float)  # observations before i
    mean = (PRIOR_MEAN + s1) / (seen + 1)
    centred = s2 - np.divide(s1 * s1, seen, out=np.zeros_like(s1), where=seen > 0)
    var = (prior_var + centred) / (seen + 1)
    bets: np.ndarray = np.clip(mean / (var + mean * mean), 0.0, max_bet)
    return bets


def betting_log_wealth(diffs: ArrayLike, *, max_bet: float = MAX_BET) -> np.ndarray:
    """log K_t after each observation along the last axis (vectorised over leading axes)."""
    x = np.asarray(diffs, dtype=float)
    if np.any(np.abs(x) > 1):
        raise ValueError("paired differences must lie in [-1, 1]")
    if not 0 < max_bet < 1:
        raise ValueError(f"max_bet must be in (0, 1), got {max_bet}")
    return np.cumsum(np.log1p(betting_bets(x, max_bet=max_bet) * x), axis=-1)


@dataclass(frozen=True)
class SequentialOutcome:
    """``reject`` iff K_t reached 1/α at some t ≤ budget; ``n_used`` observations were paid for."""

    reject: bool
    n_used: int
    e_value: float


def sequential_stops(
    diffs: ArrayLike, alphas: ArrayLike, *, max_bet: float = MAX_BET
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Many sequential tests at once: rows of ``diffs`` (the budget, in draw order) at ``alphas``.

    Each row stops at the first t with K_t ≥ 1/α (reject), or as soon as it can no longer get
    there: each remaining observation multiplies K by at most 1 + c, so when
    K_t·(1 + c)^(remaining) < 1/α no continuation can reject (an exact futility stop).
    Returns (reject, observations used, K at the stop), one entry per row.
    """
    x = np.atleast_2d(np.asarray(diffs, dtype=float))
    n = x.shape[-1]
    log_k = betting_log_wealth(x, max_bet=max_bet)
    target = np.log(1.0 / np.asarray(alphas, dtype=float)).reshape(-1, 1)
    remaining = np.arange(n - 1, -1, -1)
    hit = log_k >= target
    hopeless = log_k + remaining * math.log1p(max_bet) < target
    first_hit = np.where(hit.any(axis=-1), hit.argmax(axis=-1), n)
    first_hopeless = np.where(hopeless.any(axis=-1), hopeless.argmax(axis=-1), n)
    stop = np.minimum(np.minimum(first_hit, first_hopeless), n - 1)
    e_value = np.exp(np.take_along_axis(log_k, stop[:, None], axis=-1)[:, 0])
    return first_hit <= stop, stop + 1, e_value


def sequential_test(
    diffs: ArrayLike, alpha: float, *, max_bet: float = MAX_BET
) -> SequentialOutcome:
    """One sequential test (see :func:`sequential_stops`); an empty budget never rejects."""
    x = np.asarray(diffs, dtype=float)
    if x.size == 0:
        return SequentialOutcome(False, 0, 1.0)
    reject, used, e_value = sequential_stops(x.reshape(1, -1), [alpha], max_bet=max_bet)
    return SequentialOutcome(bool(reject[0]), int(used[0]), float(e_value[0]))
