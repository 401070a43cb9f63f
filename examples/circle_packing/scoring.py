"""Scorer: validate the packing, reward = sum of radii / reference(n), clipped to [0, 1].

An invalid packing (wrong count, a circle outside the square, an overlap beyond 1e-9) scores
0: the candidate ran and failed, which is a real result (status ok), not missing data.
"""

from __future__ import annotations

import math

TOL = 1e-9

# Best published sums of radii (AlphaEvolve, 2025): n=26: 2.635, n=32: 2.937.
PUBLISHED = {26: 2.635, 32: 2.937}


def reference(n: int) -> float:
    """The best published sum where there is one; elsewhere an estimate.

    The estimate: the sum of radii grows like c(n)·sqrt(n); c is interpolated (and
    extrapolated) linearly in n through the two published points, c(26) = 2.635/sqrt(26) =
    0.5168 and c(32) = 2.937/sqrt(32) = 0.5192. It is a yardstick, not a record: a reward of
    1.0 means "at or above the estimate".
    """
    if n in PUBLISHED:
        return PUBLISHED[n]
    c26, c32 = PUBLISHED[26] / math.sqrt(26), PUBLISHED[32] / math.sqrt(32)
    c = c26 + (n - 26) * (c32 - c26) / 6
    return c * math.sqrt(n)


def validate(n: int, packing: object) -> str | None:
    """None when the packing is valid, else what is wrong with it."""
    if not isinstance(packing, list) or len(packing) != n:
        return f"expected {n} circles"
    circles = []
    for c in packing:
        if not (isinstance(c, list) and len(c) == 3 and all(isinstance(v, int | float) for v in c)):
            return "a circle is not [x, y, r]"
        x, y, r = map(float, c)
        if not all(math.isfinite(v) for v in (x, y, r)) or r < 0:
            return "a circle has a non-finite or negative value"
        if x - r < -TOL or x + r > 1 + TOL or y - r < -TOL or y + r > 1 + TOL:
            return "a circle leaves the unit square"
        circles.append((x, y, r))
    for i in range(n):
        xi, yi, ri = circles[i]
        for j in range(i + 1, n):
            xj, yj, rj = circles[j]
            if math.hypot(xi - xj, yi - yj) < ri + rj - TOL:
                return f"circles {i} and {j} overlap"
    return None


def score(task: dict, output: object) -> dict:
    n = int(task["input"]["n"])
    problem = validate(n, output)
    if problem is not None:
        return {"reward": 0.0, "feedback": f"invalid packing: {problem}"}
    total = sum(c[2] for c in output)  # type: ignore[union-attr]
    return {
        "reward": min(1.0, total / reference(n)),
        "feedback": f"sum of radii {total:.4f} vs reference {reference(n):.4f}",
    }
