"""The promoted gain's interval, valid at the confirmation's own stopping time.

The default confirmation (:mod:`._eprocess`) stops at the first round whose evidence crosses
1/alpha_j, so the raw Δ of the rounds run is biased upwards by the stop, and a fixed-n interval
around it is not a 95 % interval at that time. This one is a *confidence sequence*: an interval
after every round that holds at every round at once, so also at a data-chosen stop.

**The estimand.** θ = (1/T)·Σ_t μ_t, the mean over the T val tasks of μ_t = E[candidate − best
on task t at a fresh seed]: what the confirmation's claim ("better on these val tasks") is
about, per trial, in reward units.

**The construction** (Waudby-Smith & Ramdas 2024, predictable plug-in bets, each bound at
α/2). On the [0, 1] scale y = (d + 1)/2 and m = (θ + 1)/2, the lower bound's capital for a
candidate value m is K⁺_R(m) = Π_{r ≤ R} Π_t (1 + λ_r·(y_{t,r} − m)), one bet λ_r ∈ [0, MAX_BET]
a round from the earlier rounds only. Given the past, the round's trials are independent, so
E[Π_t (1 + λ_r(y_t − m)) | past] = Π_t (1 + λ_r(ν_t − m)) ≤ exp(λ_r·Σ_t(ν_t − m)) = 1 at the
true m (ν_t the tasks' means on this scale): K⁺(m) is a nonnegative supermartingale and
Ville's inequality gives P(∃R: K⁺_R(m) ≥ 2/α) ≤ α/2. The lower bound at round R is the
smallest m not rejected; K⁺ decreases in m (λ does not depend on m), so it is found by
bisection. The upper bound is the mirror image (bets on m − y). Both at once: P(θ outside the
interval at any round, hence at the stop) ≤ α, whatever the tasks' distributions in [−1, 1].

**Missing trials** (one side lacks a counted reward) enter the lower bound's capital at the
worst case for the candidate (d = −1) and the upper bound's at the best (d = +1): each bound
can only widen.

References
----------
Waudby-Smith, I., & Ramdas, A. (2024). Estimating means of bounded random variables by
betting. JRSS-B 86(1), 1-27 (predictable plug-in bets, Eq. 26-27; the two one-sided
sequences at α/2 each).
Ville, J. (1939). Étude critique de la notion de collectif. Gauthier-Villars.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

__all__ = ["GAIN_CONFIDENCE", "GainInterval", "gain_bounds", "gain_interval"]

#: The sequence's coverage: every round at once, so also at the confirmation's stop.
GAIN_CONFIDENCE = 0.95
#: The largest bet on the [0, 1] scale: a factor is then ≥ 1 − MAX_BET > 0 for every m.
MAX_BET = 0.75
#: Bisection steps on [0, 1]: 2^−30 ≈ 1e−9, far below the 4 decimals printed.
BISECTION_STEPS = 30


def _bets(y: np.ndarray, alpha: float) -> np.ndarray:
    """λ_r for each round of ``y`` (…, rounds, tasks) from the rounds before r: WSR's
    predictable plug-in sqrt(2·log(2/α) / (σ̂²·n·log(1 + n))) ∧ MAX_BET, n the trials through
    round r and σ̂² the earlier trials' variance with a prior pseudo-trial of variance 1/4."""
    tasks, rounds = y.shape[-1], y.shape[-2]
    zeros = np.zeros((*y.shape[:-2], 1))
    s1 = np.concatenate([zeros, np.cumsum(y.sum(axis=-1), axis=-1)[..., :-1]], axis=-1)
    s2 = np.concatenate([zeros, np.cumsum((y * y).sum(axis=-1), axis=-1)[..., :-1]], axis=-1)
    before = tasks * np.arange(rounds, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        centred = np.where(before > 0, np.maximum(s2 - s1 * s1 / before, 0.0), 0.0)
    var = (0.25 + centred) / (before + 1)
    n = tasks * np.arange(1, rounds + 1, dtype=float)
    out: np.ndarray = np.minimum(
        np.sqrt(2 * math.log(2 / alpha) / (var * n * np.log1p(n))), MAX_BET
    )
    return out


def _bound(y: np.ndarray, used: np.ndarray, alpha: float, sign: float) -> np.ndarray:
    """The lower (sign +1) or upper (sign −1) bound on the [0, 1] scale after ``used`` rounds
    of each row of ``y`` (draws, rounds, tasks)."""
    z = y if sign > 0 else 1.0 - y  # the upper bound is the lower bound of 1 − y, mirrored
    bets = _bets(z, alpha)
    counted = (np.arange(z.shape[-2]) < used[:, None]).astype(float)  # (draws, rounds)
    weight = (bets * counted)[..., None]
    bar = math.log(2 / alpha)
    low, high = np.zeros(z.shape[0]), np.ones(z.shape[0])
    for _ in range(BISECTION_STEPS):
        mid = 0.5 * (low + high)
        log_k = np.log1p(weight * (z - mid[:, None, None])).sum(axis=(-2, -1))
        rejected = log_k >= bar
        low, high = np.where(rejected, mid, low), np.where(rejected, high, mid)
    return high if sign > 0 else 1.0 - high


def gain_bounds(
    deltas_low: ArrayLike,
    deltas_high: ArrayLike,
    used: ArrayLike,
    confidence: float = GAIN_CONFIDENCE,
) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) bounds on θ after ``used`` rounds, vectorised over draws: paired deltas
    (draws, rounds, tasks) in [−1, 1], ``deltas_low`` with missing trials at −1 (the lower
    bound's) and ``deltas_high`` at +1 (the upper's); rounds past ``used`` are ignored. For
    simulations (``bench/gain_interval.py``); a gate calls :func:`gain_interval`.

    >>> low, high = gain_bounds(np.zeros((1, 3, 12)), np.zeros((1, 3, 12)), [3])
    >>> bool(low[0] < 0 < high[0]), round(float(low[0] + high[0]), 6)
    (True, 0.0)
    """
    lo = np.asarray(deltas_low, dtype=float)
    hi = np.asarray(deltas_high, dtype=float)
    rounds = np.asarray(used, dtype=int)
    if lo.shape != hi.shape or lo.ndim != 3 or rounds.shape != lo.shape[:1]:
        raise ValueError("deltas must be (draws, rounds, tasks) and used (draws,)")
    if np.any(np.abs(lo) > 1) or np.any(np.abs(hi) > 1):
        raise ValueError("paired deltas must lie in [-1, 1]")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    alpha = 1.0 - confidence
    lower = _bound((lo + 1) / 2, rounds, alpha, +1.0)
    upper = _bound((hi + 1) / 2, rounds, alpha, -1.0)
    return 2 * lower - 1, 2 * upper - 1


@dataclass(frozen=True)
class GainInterval:
    """The mean paired Δ a trial on the val tasks: the rounds' raw mean and the interval that
    holds at the confirmation's stop."""

    raw: float
    low: float
    high: float
    rounds: int
    confidence: float = GAIN_CONFIDENCE


def gain_interval(
    candidate: ArrayLike, current: ArrayLike, rounds: int, confidence: float = GAIN_CONFIDENCE
) -> GainInterval:
    """The confirmation's gain interval from both sides' rewards (rounds, tasks) in [0, 1],
    NaN where a side has no counted reward, after its first ``rounds`` rounds.

    >>> cand = np.ones((4, 12)); cur = np.zeros((4, 12))
    >>> g = gain_interval(cand, cur, 2)     # Δ = +1 on every trial of 2 rounds
    >>> g.raw, round(g.high, 6), bool(0.5 < g.low < 1)
    (1.0, 1.0, True)
    """
    cand = np.asarray(candidate, dtype=float)[:rounds]
    cur = np.asarray(current, dtype=float)[:rounds]
    if cand.shape != cur.shape or cand.ndim != 2 or cand.size == 0:
        raise ValueError(f"rewards must be (rounds, tasks) on both sides: {cand.shape}")
    low_d = np.nan_to_num(cand, nan=0.0) - np.nan_to_num(cur, nan=1.0)
    high_d = np.nan_to_num(cand, nan=1.0) - np.nan_to_num(cur, nan=0.0)
    known = ~np.isnan(cand) & ~np.isnan(cur)
    raw = float((cand - cur)[known].mean()) if known.any() else math.nan
    low, high = gain_bounds(low_d[None], high_d[None], [cand.shape[0]], confidence)
    return GainInterval(raw, float(low[0]), float(high[0]), cand.shape[0], confidence)
