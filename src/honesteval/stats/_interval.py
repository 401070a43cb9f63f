"""A valid confidence interval for the mean of bounded values: the betting interval.

Waudby-Smith & Ramdas (2024), "Estimating means of bounded random variables by betting",
JRSS-B 86(1): the hedged capital process with predictable plug-in bets (their §4, Eq. 27 with
the fixed-n bets of Eq. 26 and truncation c = 1/2), read off at the last observation. For every
candidate mean m a gambler bets against "the mean is m"; the interval keeps the m whose capital
never reached 1/α. Valid for every n (no normal approximation), it never leaves the value range,
and it adapts to the variance like an empirical-Bernstein bound, tighter in practice.

Packages considered: ``confseq`` (the authors' code) needs a C++ build (CMake, pybind11) and
pulls matplotlib, pandas, multiprocess and pytest at run time, last released 2023; the newer
``expectation`` requires Python >= 3.12. The method is forty lines of numpy, so it lives here,
checked in the tests against a direct loop over the paper's formulas.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["betting_ci"]

TRUNCATION = 0.5  # c in λ ≤ c/m (c/(1−m)): the paper's recommended 1/2
TOLERANCE = 1e-6  # bounds are found by bisection to this width, then rounded outwards


def _bets(x: np.ndarray, alpha: float) -> np.ndarray:
    """Predictable plug-in bets λ_i = sqrt(2 log(2/α) / (n σ̂²_{i−1})), σ̂² regularised
    with one fake observation of variance 1/4 (so the first bet is defined)."""
    n = x.size
    t = np.arange(1, n + 1)
    mu = (0.5 + np.cumsum(x)) / (t + 1)
    sigma2 = (0.25 + np.cumsum((x - mu) ** 2)) / (t + 1)
    sigma2_prev = np.concatenate(([0.25], sigma2[:-1]))
    return np.sqrt(2.0 * math.log(2.0 / alpha) / (n * sigma2_prev))


def _peak_log_capital(x: np.ndarray, lam: np.ndarray, m: float, side: int) -> float:
    """max over time of log K_t(m) for the bet on "mean > m" (side +1) or "< m" (side −1).

    Each factor is 1 + side·min(λ, c/m or c/(1−m))·(x − m) with |side·λ·(x − m)| ≤ c < 1.
    """
    room = m if side > 0 else 1.0 - m
    bet = lam if room <= 0 else np.minimum(lam, TRUNCATION / room)
    return float(np.max(np.cumsum(np.log1p(side * bet * (x - m)))))


def _bound(x: np.ndarray, lam: np.ndarray, threshold: float, side: int) -> float:
    """The edge of {m : the side's capital reached the threshold}, rounded outwards.

    K⁺_t(m) is non-increasing in m for every t (each factor is), so "rejected by the + bet"
    is a down-set [0, a) and bisection finds a; symmetrically "rejected by the − bet" is an
    up-set (b, 1]. The kept set [a, b] is therefore an interval.
    """
    rejected_end, kept_end = (0.0, float(np.mean(x))) if side > 0 else (1.0, float(np.mean(x)))
    if _peak_log_capital(x, lam, rejected_end, side) < threshold:
        return rejected_end  # even the range's end is not rejected
    while abs(kept_end - rejected_end) > TOLERANCE:
        mid = 0.5 * (rejected_end + kept_end)
        if _peak_log_capital(x, lam, mid, side) >= threshold:
            rejected_end = mid
        else:
            kept_end = mid
    return rejected_end  # the last rejected point: the true edge lies inside


def betting_ci(
    xs: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
    *,
    low: float = 0.0,
    high: float = 1.0,
) -> tuple[float, float]:
    """Two-sided betting confidence interval for the mean of values in [low, high].

    Observations are used in the order given (the caller fixes one, e.g. by task id). The
    hedged process max(½K⁺, ½K⁻) ≥ 1/α rejects m at any time t (a running intersection,
    which the confidence-sequence guarantee allows). The sample mean is never rejected by
    the bet that loses money there, so each bound is searched between it and the range's end.

    >>> lo, hi = betting_ci([0.4, 0.6] * 10)
    >>> 0.0 < lo < 0.5 < hi < 1.0
    True
    """
    x = (np.asarray(xs, dtype=float) - low) / (high - low)
    if x.ndim != 1 or x.size == 0:
        raise ValueError("betting_ci needs a non-empty one-dimensional sample")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    x = np.clip(x, 0.0, 1.0)
    alpha = 1.0 - confidence
    lam = _bets(x, alpha)
    threshold = math.log(2.0 / alpha)  # ½K ≥ 1/α  ⇔  log K ≥ log(2/α)
    lo_unit = _bound(x, lam, threshold, +1)
    hi_unit = _bound(x, lam, threshold, -1)
    return float(low + lo_unit * (high - low)), float(low + hi_unit * (high - low))
