"""Exact per-task means from trial rewards, and exact means and variances of samples of them.

Rewards are taken as the decimals the user wrote: each double ``x`` is read as the shortest
decimal that reads back as it, ``Fraction(repr(x))`` (0.1 is 1/10, not the double nearest to
it), so 0.1 + 0.2 equals 0.3 as a person computing in decimals expects. A task's mean over
its n counted trials is then a rational; with ``unit`` the least common multiple of every
mean's denominator, every mean is ``M_i / unit`` with M_i an integer. Sums and squares of
Python ints are exact, so means, variances and the comparison Δ² ≷ bar² · Var(Δ) are exact
rationals; neither float rounding nor task order decides a gate.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from honesteval.models import COUNTED_STATUSES, SplitResult

from ._estimators import WORKING_ICC, bell_mccaffrey_df

__all__ = ["ExactSample", "TaskSums", "common_grid", "decimal", "task_sums"]


@functools.lru_cache(maxsize=4096)
def decimal(x: float) -> Fraction:
    """The shortest decimal that reads back as ``x``, exactly: what the user wrote. Cached:
    trial rewards repeat (0 and 1 above all), and a gate reads each one several times.

    >>> decimal(0.1), decimal(0.1 + 0.2) == decimal(0.3), decimal(1)
    (Fraction(1, 10), False, Fraction(1, 1))
    """
    return Fraction(repr(float(x)))


@dataclass(frozen=True)
class TaskSums:
    """One task's counted trial rewards, as decimals: their sum, sum of squares and count."""

    total: Fraction
    squares: Fraction
    count: int

    @property
    def mean(self) -> Fraction:
        return self.total / self.count

    @property
    def variance_of_mean(self) -> Fraction:
        """se² of the task's mean over its trials, var(ddof=1)/count; 0 below two trials."""
        n = self.count
        if n < 2:
            return Fraction(0)
        return (n * self.squares - self.total**2) / (n * n * (n - 1))


def task_sums(result: SplitResult) -> dict[str, TaskSums]:
    """Every scored task of ``result``: the exact sums and count of its counted trial rewards."""
    out: dict[str, TaskSums] = {}
    counted = COUNTED_STATUSES
    for t in result.per_task:
        if not t.n_ok:
            continue
        values = [
            decimal(r)
            for s, r in zip(t.statuses, t.rewards, strict=True)
            if s in counted and r is not None
        ]
        if values:
            out[t.id] = TaskSums(
                sum(values, Fraction(0)), sum((v * v for v in values), Fraction(0)), len(values)
            )
    return out


def common_grid(*sides: Mapping[str, TaskSums]) -> tuple[int, list[dict[str, int]]]:
    """Put every task mean of every side on one integer grid: (unit, [{id: M}]).

    A task's mean is exactly ``M / unit``; the reward 1.0 is ``unit``.
    """
    means = [{tid: s.mean for tid, s in side.items()} for side in sides]
    unit = math.lcm(*{m.denominator for side in means for m in side.values()})
    grids = [
        {tid: m.numerator * (unit // m.denominator) for tid, m in side.items()} for side in means
    ]
    return unit, grids


@dataclass(frozen=True)
class ExactSample:
    """Values ``v_i / unit`` (integers over a common unit), optionally grouped in clusters.

    ``clusters`` is None for independent values (the plain SE of the mean, Miller Eq. 1), or
    one key per value for the cluster-robust CR2 SE, with Bell–McCaffrey degrees of freedom
    (:func:`._estimators.clustered_mean`, the same rule ``aggregate`` uses).
    """

    values: list[int]
    unit: int
    clusters: list[str] | None = None

    @property
    def n(self) -> int:
        return len(self.values)

    @functools.cached_property
    def _by_cluster(self) -> dict[str, list[int]]:
        by_cluster: dict[str, list[int]] = {}
        for v, c in zip(self.values, self.clusters or [], strict=False):
            by_cluster.setdefault(c, []).append(v)
        return by_cluster

    @property
    def n_clusters(self) -> int:
        return self.n if self.clusters is None else len(self._by_cluster)

    @functools.cached_property
    def df(self) -> float:
        """n − 1; with clusters the Bell–McCaffrey df (C − 1 with equal sizes), 0 below 2."""
        if self.clusters is None:
            return float(self.n - 1)
        if self.n_clusters < 2:
            return 0.0
        return bell_mccaffrey_df([len(vs) for vs in self._by_cluster.values()], WORKING_ICC)

    @property
    def mean(self) -> Fraction:
        return Fraction(sum(self.values), self.n * self.unit)

    @functools.cached_property
    def variance_of_mean(self) -> Fraction:
        """Var of the mean, exactly; 0 with fewer than two values (or clusters).

        Plain: (nΣv² − (Σv)²) / (n² (n − 1)). Clustered, CR2:
        Σ_c (Σ_{i∈c}(v_i − v̄))² · n/(n − n_c) / n², where Σ_{i∈c}(v_i − v̄) = (n·S_c − n_c·S)/n.
        """
        n, u = self.n, self.unit
        if self.n_clusters < 2:
            return Fraction(0)
        s = sum(self.values)
        if self.clusters is None:
            q = sum(v * v for v in self.values)
            return Fraction(n * q - s * s, n * n * (n - 1) * u * u)
        spread = sum(
            Fraction((n * sum(vs) - len(vs) * s) ** 2, n - len(vs))
            for vs in self._by_cluster.values()
        ) + Fraction(0)
        return spread / (n**3 * u * u)

    @property
    def se(self) -> float:
        return math.sqrt(float(self.variance_of_mean))
