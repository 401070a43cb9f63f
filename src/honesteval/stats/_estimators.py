"""Scalar estimators on plain sequences: standard errors, pass^k, pass@k, bootstrap CI.

Every edge case is handled (and documented) where it occurs; nothing here imports Prefect.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence

import numpy as np

__all__ = [
    "bootstrap_ci",
    "clustered_stderr",
    "combined_stderr",
    "pass_at_k",
    "pass_hat_k",
    "stderr",
]


def _as_1d(xs: Sequence[float] | np.ndarray, name: str) -> np.ndarray:
    arr = np.asarray(xs, dtype=float)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {arr.shape}")
    return arr


def stderr(xs: Sequence[float] | np.ndarray) -> float:
    """Standard error of the mean: sample sd (ddof=1) / sqrt(n).

    With fewer than two values the spread is unmeasured; we return 0.0 rather than NaN so the
    caller can add its own warning (``aggregate`` does) instead of propagating NaN.

    >>> round(stderr([0.0, 1.0]), 6)
    0.5
    >>> stderr([0.7])
    0.0
    """
    arr = _as_1d(xs, "xs")
    n = arr.size
    if n < 2:
        return 0.0
    return float(np.std(arr, ddof=1) / math.sqrt(n))


def _count_passes(rewards: Sequence[float], threshold: float) -> tuple[int, int]:
    arr = _as_1d(rewards, "rewards")
    return int(np.count_nonzero(arr >= threshold)), int(arr.size)


def pass_hat_k(rewards: Sequence[float], k: int, threshold: float = 1.0) -> float | None:
    """pass^k (reliability): the chance that k trials drawn without replacement all pass.

    c = #{r >= threshold}, n = len(rewards). ``None`` when k < 1 or k > n (not estimable);
    0.0 when c < k; else C(c, k) / C(n, k), computed with exact integers.

    >>> pass_hat_k([1, 1, 0], 2)
    0.3333333333333333
    >>> pass_hat_k([1, 1, 0], 4) is None
    True
    """
    c, n = _count_passes(rewards, threshold)
    if k < 1 or k > n:
        return None
    if c < k:
        return 0.0
    return math.comb(c, k) / math.comb(n, k)


def pass_at_k(rewards: Sequence[float], k: int, threshold: float = 1.0) -> float | None:
    """pass@k (capability): the chance that at least one of k trials (no replacement) passes.

    ``None`` when k < 1 or k > n: unlike some peers we do not clamp k to n, because a pass@5
    made of 3 trials is a different number. Else 1 − C(n−c, k) / C(n, k), exactly; 1.0 when
    n − c < k (every draw of k must contain a pass).

    >>> pass_at_k([1, 0, 0], 2)
    0.6666666666666667
    """
    c, n = _count_passes(rewards, threshold)
    if k < 1 or k > n:
        return None
    if n - c < k:
        return 1.0
    # int / int is correctly rounded in Python, so the subtraction is the only rounding step.
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def combined_stderr(means: Sequence[float], ses: Sequence[float]) -> float:
    """cap-evolve's combined SE: sqrt(between / n + sum(se^2) / n^2).

    ``between`` is var(means, ddof=1), 0 when n < 2; the result is 0.0 when n = 0. It counts
    trial noise twice (once inside ``between``, once in the se terms), so it is conservative;
    it exists for compatibility with cap-evolve, not as the default.

    >>> round(combined_stderr([0.2, 0.4], [0.1, 0.1]), 6)
    0.122474
    """
    m = _as_1d(means, "means")
    s = _as_1d(ses, "ses")
    if m.size != s.size:
        raise ValueError(f"means and ses differ in length: {m.size} != {s.size}")
    n = m.size
    if n == 0:
        return 0.0
    between = float(np.var(m, ddof=1)) if n >= 2 else 0.0
    return math.sqrt(between / n + float(np.sum(s**2)) / n**2)


def clustered_stderr(values: Sequence[float], clusters: Sequence[Hashable]) -> float:
    """Cluster-robust SE of the mean (Miller 2024, Eq. 4; CR1 small-sample factor).

    sqrt(C/(C−1) · Σ_c (Σ_{i∈c} (v_i − v̄))²) / n, with C the number of clusters.

    With one member per cluster this is sqrt(n/(n−1) · Σ(v − v̄)²) / n = sd(ddof=1)/√n, i.e.
    exactly :func:`stderr` (the C/(C−1) factor then *is* the n/(n−1) Bessel factor). With
    C < 2 the between-cluster spread is unmeasured: we return 0.0, like :func:`stderr` for
    n < 2, and ``aggregate`` warns.

    >>> round(clustered_stderr([0.0, 1.0, 0.0, 1.0], ["a", "a", "b", "b"]), 6)
    0.0
    """
    v = _as_1d(values, "values")
    if len(clusters) != v.size:
        raise ValueError(f"values and clusters differ in length: {v.size} != {len(clusters)}")
    n = v.size
    if n == 0:
        return 0.0
    _, inverse = np.unique(np.asarray(clusters, dtype=object).astype(str), return_inverse=True)
    n_clusters = int(inverse.max()) + 1
    if n_clusters < 2:
        return 0.0
    sums = np.bincount(inverse, weights=v - v.mean(), minlength=n_clusters)
    return math.sqrt(n_clusters / (n_clusters - 1) * float(np.sum(sums**2))) / n


def bootstrap_ci(
    xs: Sequence[float],
    confidence: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval for the mean; deterministic for a given ``seed``.

    One value gives the degenerate interval (x, x); an empty input raises ``ValueError``.

    >>> bootstrap_ci([0.5, 0.5, 0.5])
    (0.5, 0.5)
    """
    arr = _as_1d(xs, "xs")
    if arr.size == 0:
        raise ValueError("bootstrap_ci needs at least one value")
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, arr.size, size=(resamples, arr.size))
    means = arr[idx].mean(axis=1)
    tail = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(means, [tail, 1.0 - tail])
    return float(lo), float(hi)
