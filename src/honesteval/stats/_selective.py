"""The promoted gain without the winner's curse: an interval conditional on the promotion.

A promoted candidate's confirmation Δ passed the bar, so it is biased upwards (at j = 10 a true
gain of 0.06 was reported as 0.124, and a plain t interval covered it 43 % of the time). The
interval here conditions on the selection, as in selective inference for a truncated normal
(Lee, Sun, Sun & Taylor 2016, "Exact post-selection inference, with application to the lasso",
Ann. Statist. 44(3), §5; Fithian, Sun & Taylor 2014, "Optimal inference after model
selection", conditioning on the nuisance statistics):

* Write the observations as x_i = x̄ + r_i. Shifting every x_i by the same amount moves the
  betting e-value monotonically (the bets depend only on the residuals r, every factor
  1 + λ·x grows with x), so given r the promotion happened iff x̄ ≥ b(r), with b found by
  bisection.
* Under the normal model x̄ ~ N(μ, se²) independently of r, so given the promotion and r, x̄
  is N(μ, se²) truncated to [b, ∞). The pivot G(μ) = P(X̄ ≥ x̄ | X̄ ≥ b; μ) increases in μ;
  the interval is {μ : α/2 ≤ G(μ) ≤ 1 − α/2} and the estimate is G(μ) = 1/2 (the conditional
  median-unbiased estimate), clipped to the delta range [−1, 1].

The SE is estimated, and a promotion selects samples whose spread happened to be small (a
smaller spread lowers the bar), so the pivot is averaged over the scale's posterior,
σ² = s²·(n − 1)/χ²_{n−1} (:data:`SCALE_NODES` equal-probability quantiles): far above the bar
this is the Student t interval (mixing the normal over that posterior is how t arises; to
1e−4 with these nodes), near it the truncated pivot widens accordingly.
The bar comes from the task-level e-value (:func:`._confirmation.promotion_bar`);
``bench/confirm_power.py`` measures its coverage at j = 1 and j = 10.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import chdtri, log_ndtr, logsumexp

__all__ = ["truncated_gain"]


#: Scale posterior quantiles the pivot is averaged over.
SCALE_NODES = 64


def scale_nodes(se: float, n: int) -> np.ndarray:
    """SEs at equal-probability quantiles of se²·(n − 1)/χ²_{n−1}."""
    upper_tails = (np.arange(SCALE_NODES) + 0.5) / SCALE_NODES
    nodes: np.ndarray = se * np.sqrt((n - 1) / chdtri(n - 1, upper_tails))
    return nodes


def _log_pivot(mu: float, mean: float, bar: float, se: np.ndarray) -> float:
    """log of the mean over the SEs ``se`` of P(X̄ ≥ mean | X̄ ≥ bar), X̄ ~ N(mu, se²)."""
    terms = log_ndtr((mu - mean) / se) - log_ndtr((mu - bar) / se)
    return float(logsumexp(terms) - math.log(terms.size))


def _solve(target: float, mean: float, bar: float, se: np.ndarray) -> float:
    """The μ in [−1, 1] with G(μ) = target (G increases in μ); the range's end if none is."""
    log_target = math.log(target)

    def f(mu: float) -> float:
        return _log_pivot(mu, mean, bar, se) - log_target

    if f(-1.0) >= 0:
        return -1.0
    if f(1.0) <= 0:
        return 1.0
    # Imported here: scipy.optimize costs ~0.3 CPU s at import, and every CLI command imports
    # this package while only a promotion solves (docs/performance.md, CLI start-up).
    from scipy.optimize import brentq

    return float(brentq(f, -1.0, 1.0, xtol=1e-9))


def truncated_gain(
    observations: np.ndarray, bar: float, confidence: float = 0.95
) -> tuple[float, tuple[float, float]] | None:
    """(estimate, interval) of the mean gain given that the mean of ``observations`` reached
    ``bar`` (b(r), the promotion's bar given the residuals).

    None below 2 observations or with zero spread (no SE to build it from), and when the mean
    is below ``bar`` (nothing to condition on).

    >>> est, (lo, hi) = truncated_gain(np.array([0.3, 0.1, 0.2, 0.25] * 10), -1.0)
    >>> round(lo, 3), round(hi, 3)   # far above the bar: the plain t interval
    (0.189, 0.236)
    """
    x = np.asarray(observations, dtype=float)
    if x.size < 2 or float(np.std(x)) == 0.0:
        return None
    se = scale_nodes(float(np.std(x, ddof=1)) / math.sqrt(x.size), x.size)
    mean = float(x.mean())
    if not mean >= bar:
        return None
    tail = (1.0 - confidence) / 2
    lower = _solve(tail, mean, bar, se)
    upper = _solve(1.0 - tail, mean, bar, se)
    estimate = _solve(0.5, mean, bar, se)
    return estimate, (lower, upper)
