"""Exact per-task means from trial rewards, and exact means and variances of samples of them.

Every finite double is an integer multiple of 2^-1074, so a trial reward scaled by a power of
two is an exact integer. A task's mean over its n counted trials is (scaled sum) / n; over a
set of tasks with trial counts n_1..n_m, L = lcm(n_1..n_m) puts every mean on one integer grid:
mean_i = M_i / (L · scale) with M_i = sum_i · (L / n_i). Sums and squares of Python ints are
exact, so means, variances and the comparison Δ² ≷ bar² · Var(Δ) are exact rationals; neither
float rounding nor task order decides a gate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction

from honesteval.models import COUNTED_STATUSES, SplitResult

__all__ = ["ExactSample", "TaskSums", "common_grid", "task_sums"]


@dataclass(frozen=True)
class TaskSums:
    """One task's counted trial rewards: their sum as a fraction ``num / den`` and their count.

    ``den`` is a power of two (the largest denominator of the rewards), so ``num`` is exact.
    """

    num: int
    den: int
    count: int


def task_sums(result: SplitResult) -> dict[str, TaskSums]:
    """Every scored task of ``result``: the exact sum and count of its counted trial rewards."""
    out: dict[str, TaskSums] = {}
    counted = COUNTED_STATUSES
    for t in result.per_task:
        if not t.n_ok:
            continue
        ratios = [
            float(r).as_integer_ratio()
            for s, r in zip(t.statuses, t.rewards, strict=True)
            if s in counted and r is not None
        ]
        if len(ratios) == 1:
            out[t.id] = TaskSums(ratios[0][0], ratios[0][1], 1)
        elif ratios:
            den = max(d for _, d in ratios)  # powers of two: the largest is a multiple of all
            out[t.id] = TaskSums(sum(n * (den // d) for n, d in ratios), den, len(ratios))
    return out


def common_grid(*sides: Mapping[str, TaskSums]) -> tuple[int, list[dict[str, int]]]:
    """Put every task mean of every side on one integer grid: (unit, [{id: M}]).

    A task's mean is exactly ``M / unit``; the reward 1.0 is ``unit``.
    """
    sums = [s for side in sides for s in side.values()]
    den = max((s.den for s in sums), default=1)
    lcm = math.lcm(*{s.count for s in sums}) if sums else 1
    unit = den * lcm
    grids = [
        {tid: s.num * (den // s.den) * (lcm // s.count) for tid, s in side.items()}
        for side in sides
    ]
    return unit, grids


@dataclass(frozen=True)
class ExactSample:
    """Values ``v_i / unit`` (integers over a common unit), optionally grouped in clusters.

    ``clusters`` is None for independent values (the plain SE of the mean, Miller Eq. 1), or
    one key per value for the cluster-robust SE (Miller Eq. 4, CR1 factor C/(C−1)); with
    clusters the degrees of freedom are C − 1.
    """

    values: list[int]
    unit: int
    clusters: list[str] | None = None

    @property
    def n(self) -> int:
        return len(self.values)

    @property
    def n_clusters(self) -> int:
        return self.n if self.clusters is None else len(set(self.clusters))

    @property
    def df(self) -> int:
        return self.n_clusters - 1

    @property
    def mean(self) -> Fraction:
        return Fraction(sum(self.values), self.n * self.unit)

    @property
    def variance_of_mean(self) -> Fraction:
        """Var of the mean, exactly; 0 with fewer than two values (or clusters).

        Plain: (nΣv² − (Σv)²) / (n² (n − 1)). Clustered: C/(C−1) · Σ_c (Σ_{i∈c}(v_i − v̄))² / n²
        where Σ_{i∈c}(v_i − v̄) = (n·S_c − n_c·S) / n.
        """
        n, u = self.n, self.unit
        if self.n_clusters < 2:
            return Fraction(0)
        s = sum(self.values)
        if self.clusters is None:
            q = sum(v * v for v in self.values)
            return Fraction(n * q - s * s, n * n * (n - 1) * u * u)
        by_cluster: dict[str, list[int]] = {}
        for v, c in zip(self.values, self.clusters, strict=True):
            by_cluster.setdefault(c, []).append(v)
        c_count = len(by_cluster)
        spread = sum((n * sum(vs) - len(vs) * s) ** 2 for vs in by_cluster.values())
        return Fraction(c_count * spread, (c_count - 1) * n**4 * u * u)

    @property
    def se(self) -> float:
        return math.sqrt(float(self.variance_of_mean))
