"""The reported 95 % interval for the mean of bounded values: order-free betting, Anderson's
Kolmogorov–Smirnov interval at n ≤ 4, or exact Clopper–Pearson when every value is 0 or 1.

The betting interval (Waudby-Smith & Ramdas 2024, §4–5) bets, for every candidate mean m,
against "the mean is m" with the hedged capital ½K⁺ + ½K⁻ of predictable plug-in bets (their
Eq. 26, fixed-n bets, truncated at c/m and c/(1 − m), Eq. 27) and keeps the m whose capital
stays below 1/α. Here the capital is read at the fixed end n (not its running maximum) and
averaged over B permutations of the sorted values, which makes the interval a symmetric
function of the values: any order of the same values gives the same interval, to the bit.

Why it is valid (tasks drawn i.i.d., or exchangeably, from the population). For the true mean
μ and any fixed order of i.i.d. values, K_n⁺(μ) and K_n⁻(μ) are the final values of
nonnegative martingales started at 1 (the bet on observation t depends only on observations
before t), so each has expectation 1: both are e-values, and so is ½K⁺ + ½K⁻. Given the
multiset of values, the values in a uniformly random order are distributed like the sample
itself (exchangeability), so the capital of the sorted values in a uniformly random
permutation is an e-value too, and a mean of e-values is an e-value (Vovk & Wang 2021). The
permutations come from a seed fixed before any data are seen, so over the seed's draw the
average Ē(μ) has expectation ≤ 1 and Markov's inequality gives P(Ē(μ) ≥ 1/α) ≤ α. (Averaging
e-values over random orders to remove the dependence on order is the derandomisation of Ren &
Barber 2023.) Keeping the m where max(½Ē⁺, ½Ē⁻) < 1/α, i.e. where neither side alone
rejects, is a superset of the set Ē < 1/α, hence valid; and since each Ē⁺(m) is
non-increasing in m (each factor is) and each Ē⁻(m) non-decreasing, the kept set is an
interval whose ends bisection finds.

Clopper–Pearson (1934) is exact for Bernoulli values: with all n values in {0, 1} it is the
binomial interval for the number of ones. :func:`reported_ci` uses it when every value is 0 or
1 (a binary scorer with one trial per task, or clusters of one task); otherwise Anderson's
interval (1969) at n ≤ 4, where it is the narrower of the two valid intervals, and the betting
interval above; docs/statistics.md states the rule and bench/stat_validity.py measures it.

References
----------
Waudby-Smith, I. & Ramdas, A. (2024). Estimating means of bounded random variables by
betting. JRSS-B 86(1), 1–27.
Vovk, V. & Wang, R. (2021). E-values: calibration, combination and applications. Annals of
Statistics 49(3), 1736–1754.
Ren, Z. & Barber, R. F. (2024). Derandomised knockoffs: leveraging e-values for false
discovery rate control. JRSS-B 86(1), 122–154.
Clopper, C. J. & Pearson, E. S. (1934). The use of confidence or fiducial limits illustrated
in the case of the binomial. Biometrika 26(4), 404–413.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.special import betaincinv, smirnovi

__all__ = [
    "ANDERSON_MAX_N",
    "ReportedInterval",
    "anderson_ci",
    "betting_ci",
    "clopper_pearson_ci",
    "hidden_fraction",
    "hoeffding_ci",
    "reported_ci",
    "tasks_to_rule_out",
]

TRUNCATION = 0.9  # c in λ ≤ c/m (c/(1−m)), Eq. 27: close to 1 so few tasks near an end count
PERMUTATION_SEED = 20231  # fixed before any data: the permutations are not chosen by the data
PERMUTATION_BUDGET = 50_000  # B·n: B permutations of n values cost one (B × n) array
MAX_PERMUTATIONS = 1000
MIN_PERMUTATIONS = 16
MAX_STEPS = 200  # a cap the root finder never reaches (it stops at TOLERANCE in ~10 steps)
TOLERANCE = 1e-5  # bounds are found by bisection to this width, then rounded outwards
#: Up to this n Anderson's interval is the narrower valid one: its mean width is 0.84–0.97×
#: the betting interval's at n = 2–3 and 0.94–1.00× at n = 4, 0.99–1.03× at n = 5 (Beta(2, 5),
#: uniform, Beta(80, 1), Beta(½, ½) values; docs/statistics.md). Chosen by n, never by the data.
ANDERSON_MAX_N = 4


def _unit_sample(xs: Sequence[float] | np.ndarray, low: float, high: float) -> np.ndarray:
    """The values scaled to [0, 1] and sorted (the order they came in must not matter)."""
    x = (np.asarray(xs, dtype=float) - low) / (high - low)
    if x.ndim != 1 or x.size == 0:
        raise ValueError("an interval needs a non-empty one-dimensional sample")
    return np.sort(np.clip(x, 0.0, 1.0))


def _check_confidence(confidence: float) -> float:
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return 1.0 - confidence


def permutation_count(n: int) -> int:
    """B for n values: as many as the budget allows (order matters less as n grows)."""
    return int(min(MAX_PERMUTATIONS, max(MIN_PERMUTATIONS, PERMUTATION_BUDGET // max(n, 1))))


@functools.cache
def _permutation_index(n: int) -> np.ndarray:
    """(B × n) indices: B permutations of range(n) drawn from the fixed seed (cached, read-only)."""
    rng = np.random.default_rng(PERMUTATION_SEED)
    index = rng.permuted(np.tile(np.arange(n), (permutation_count(n), 1)), axis=1)
    index.setflags(write=False)
    return index


def _permuted(x: np.ndarray) -> np.ndarray:
    """(B × n): the sorted values in the B seeded permutations."""
    permuted: np.ndarray = x[_permutation_index(x.size)]
    return permuted


def _bets(x: np.ndarray, alpha: float) -> np.ndarray:
    """Predictable plug-in bets per row, λ_t = sqrt(2 log(2/α) / (n σ̂²_{t−1})) (Eq. 26), σ̂²
    regularised with one fake observation of variance 1/4 (so the first bet is defined)."""
    n = x.shape[-1]
    t = np.arange(1, n + 1)
    mu = (0.5 + np.cumsum(x, axis=-1)) / (t + 1)
    sigma2 = (0.25 + np.cumsum((x - mu) ** 2, axis=-1)) / (t + 1)
    sigma2_prev = np.concatenate((np.full((*x.shape[:-1], 1), 0.25), sigma2[..., :-1]), axis=-1)
    bets: np.ndarray = np.sqrt(2.0 * math.log(2.0 / alpha) / (n * sigma2_prev))
    return bets


def _log_mean_capital(x: np.ndarray, lam: np.ndarray, m: float, side: int) -> float:
    """log of the mean over permutations of K_n(m), the final capital of the bet on
    "mean > m" (side +1) or "< m" (side −1); each factor 1 + side·min(λ, c/room)·(x − m) is
    at least 1 − c > 0."""
    room = m if side > 0 else 1.0 - m
    bet = lam if room <= 0 else np.minimum(lam, TRUNCATION / room)
    log_k = np.sum(np.log1p(side * bet * (x - m)), axis=-1)
    top = float(np.max(log_k))
    return top + math.log(float(np.mean(np.exp(log_k - top))))


def _bound(x: np.ndarray, lam: np.ndarray, threshold: float, side: int) -> float:
    """The edge of {m : the side's mean capital reached the threshold}, rounded outwards.

    The + side rejects a down-set [0, a) (its capital is non-increasing in m), the − side an
    up-set (b, 1]; each is searched between the sample mean and the range's end by the
    Illinois variant of false position (a bracketing method: the rejected end is always
    rejected), which needs about a third of bisection's evaluations.
    """

    def excess(m: float) -> float:  # ≥ 0: rejected
        return _log_mean_capital(x, lam, m, side) - threshold

    mean = float(np.mean(x))
    rejected, kept = (0.0, mean) if side > 0 else (1.0, mean)
    f_rejected, f_kept = excess(rejected), excess(kept)
    if f_rejected < 0:
        return rejected  # even the range's end is not rejected
    if f_kept >= 0:
        return kept  # cannot happen for the bet that loses at the mean; kept for safety
    stale = 0  # +1 per step that moved the rejected end, −1 per step that moved the kept end
    for _ in range(MAX_STEPS):
        if abs(kept - rejected) <= TOLERANCE:
            break
        m = rejected + f_rejected * (kept - rejected) / (f_rejected - f_kept)
        if not min(rejected, kept) < m < max(rejected, kept):
            m = 0.5 * (rejected + kept)
        f_m = excess(m)
        if f_m >= 0:
            rejected, f_rejected = m, f_m
            stale = max(stale, 0) + 1
            if stale > 1:
                f_kept /= 2  # Illinois: the kept end has not moved twice; pull it in
        else:
            kept, f_kept = m, f_m
            stale = min(stale, 0) - 1
            if stale < -1:
                f_rejected /= 2
    return rejected  # the last rejected point: the true edge lies inside


def _scaled(bounds: tuple[float, float], low: float, high: float) -> tuple[float, float]:
    return float(low + bounds[0] * (high - low)), float(low + bounds[1] * (high - low))


def betting_ci(
    xs: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
    *,
    low: float = 0.0,
    high: float = 1.0,
) -> tuple[float, float]:
    """Two-sided order-free betting interval for the mean of values in [low, high].

    The same values in any order give the same interval (they are sorted first). Cost: one
    (B × n) array per bisection step, B·n ≈ 50,000 (at least 16 permutations).

    >>> lo, hi = betting_ci([0.4, 0.6] * 10)
    >>> 0.0 < lo < 0.5 < hi < 1.0
    True
    >>> betting_ci([0.6, 0.4] * 10) == (lo, hi)
    True
    """
    alpha = _check_confidence(confidence)
    x = _permuted(_unit_sample(xs, low, high))
    lam = _bets(x, alpha)
    threshold = math.log(2.0 / alpha)  # ½Ē ≥ 1/α  ⇔  log Ē ≥ log(2/α)
    return _scaled((_bound(x, lam, threshold, +1), _bound(x, lam, threshold, -1)), low, high)


def _anderson_lower(x: np.ndarray, epsilon: float) -> float:
    """∫₀¹ max(1 − F_n(t) − ε, 0) dt for sorted x in [0, 1]: the smallest mean of a
    distribution function lying below F_n + ε."""
    n = x.size
    gaps = np.diff(np.concatenate(([0.0], x, [1.0])))  # F_n = i/n on the i-th gap
    heights = np.maximum(1.0 - np.arange(n + 1) / n - epsilon, 0.0)
    return math.fsum((gaps * heights).tolist())


def anderson_ci(
    xs: Sequence[float] | np.ndarray,
    confidence: float = 0.95,
    *,
    low: float = 0.0,
    high: float = 1.0,
) -> tuple[float, float]:
    """Anderson's interval for the mean of values in [low, high]: the means of the
    distribution functions inside the one-sided Kolmogorov–Smirnov band F_n ± ε, ε the exact
    one-sided critical value at α/2 (``scipy.special.smirnovi``; Dvoretzky–Kiefer–Wolfowitz
    with Massart's constant bounds it by sqrt(log(2/α)/(2n))).

    Valid for every distribution on the range: the band holds with probability ≥ 1 − α/2 a
    side for a continuous F and more for one with atoms, and the mean is ∫(1 − F). At n ≤ 3
    it is narrower than the betting interval (:data:`ANDERSON_MAX_N`), beyond it wider.

    References
    ----------
    Anderson, T. W. (1969). Confidence limits for the expected value of an arbitrary bounded
    random variable with a continuous distribution function. Bull. ISI 43, 249–251.
    Learned-Miller, E. & Thomas, P. S. (2020). A new confidence interval for the mean of a
    bounded random variable. arXiv:1905.06208.

    >>> lo, hi = anderson_ci([0.3, 0.5, 0.9])
    >>> 0.0 < lo < 0.3 and 0.9 < hi < 1.0
    True
    """
    alpha = _check_confidence(confidence)
    x = _unit_sample(xs, low, high)
    epsilon = float(smirnovi(x.size, alpha / 2.0))
    lower = _anderson_lower(x, epsilon)
    upper = 1.0 - _anderson_lower(np.sort(1.0 - x), epsilon)
    return _scaled((lower, upper), low, high)


def clopper_pearson_ci(ones: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The exact binomial interval for ``ones`` successes in ``n`` trials (Clopper–Pearson).

    >>> lo, hi = clopper_pearson_ci(8, 8)
    >>> round(lo, 4), hi
    (0.6306, 1.0)
    """
    alpha = _check_confidence(confidence)
    if not 0 <= ones <= n or n < 1:
        raise ValueError(f"need 0 <= ones <= n and n >= 1, got ones={ones}, n={n}")
    lo = 0.0 if ones == 0 else float(betaincinv(ones, n - ones + 1, alpha / 2))
    hi = 1.0 if ones == n else float(betaincinv(ones + 1, n - ones, 1 - alpha / 2))
    return lo, hi


def hoeffding_ci(xs: Sequence[float] | np.ndarray, confidence: float = 0.95) -> tuple[float, float]:
    """Hoeffding's interval for values in [0, 1], clipped to [0, 1]: the yardstick.

    >>> [round(b, 4) for b in hoeffding_ci([0.5] * 8)]
    [0.0198, 0.9802]
    """
    alpha = _check_confidence(confidence)
    x = np.asarray(xs, dtype=float)
    half = math.sqrt(math.log(2.0 / alpha) / (2 * x.size))
    mean = float(np.mean(x))
    return max(0.0, mean - half), min(1.0, mean + half)


def hidden_fraction(n: int, confidence: float = 0.95) -> float:
    """1 − (α/2)^(1/n): the share of tasks at the far end of the range that n tasks all
    scoring at one end cannot rule out (the Clopper–Pearson bound for n out of n, which no
    two-sided interval splitting α equally can beat: with that share hidden, all n tasks
    miss it with probability α/2).

    >>> round(hidden_fraction(8), 3)
    0.369
    """
    alpha = _check_confidence(confidence)
    return float(1.0 - (alpha / 2.0) ** (1.0 / n))


def tasks_to_rule_out(share: float, confidence: float = 0.95) -> int:
    """The fewest tasks for which :func:`hidden_fraction` is at most ``share``.

    >>> tasks_to_rule_out(0.10)
    36
    """
    alpha = _check_confidence(confidence)
    return math.ceil(math.log(alpha / 2.0) / math.log1p(-share) - 1e-12)


@dataclass(frozen=True)
class ReportedInterval:
    """The interval ``aggregate`` reports, and the name of how it was made."""

    bounds: tuple[float, float]
    method: str


def reported_ci(
    xs: Sequence[float] | np.ndarray,
    unit: str,
    *,
    low: float = 0.0,
    high: float = 1.0,
    confidence: float = 0.95,
) -> ReportedInterval:
    """Clopper–Pearson when every value is at an end of [low, high]; else, by n alone (fixed
    before any data), Anderson's interval at n ≤ :data:`ANDERSON_MAX_N` and the betting
    interval above; ``unit`` ("tasks", "clusters") names what the values are means of.

    >>> reported_ci([1.0] * 8, "tasks").method
    'Clopper-Pearson (exact for 0/1 values), over tasks'
    """
    x = _unit_sample(xs, low, high)
    if np.all((x == 0.0) | (x == 1.0)):
        ones = int(np.count_nonzero(x == 1.0))
        bounds = _scaled(clopper_pearson_ci(ones, x.size, confidence), low, high)
        return ReportedInterval(bounds, f"Clopper-Pearson (exact for 0/1 values), over {unit}")
    if x.size <= ANDERSON_MAX_N:
        bounds = anderson_ci(xs, confidence, low=low, high=high)
        return ReportedInterval(
            bounds, f"Anderson (Kolmogorov-Smirnov band, distribution-free), over {unit}"
        )
    bounds = betting_ci(xs, confidence, low=low, high=high)
    return ReportedInterval(
        bounds, f"betting, order-free (Waudby-Smith & Ramdas 2024), over {unit}"
    )
