"""Circle packing: n circles in the unit square, maximise the sum of radii.

The local optimiser both candidates share (it is the benchmark's library, not a candidate):
SLSQP over (x, y, r) with the wall and pairwise non-overlap constraints and their exact
Jacobians, from a random start, then a repair pass that shrinks radii until the packing is
strictly valid. A start that SLSQP cannot rescue ends in a poor (but valid) packing: that is a
real, seed-dependent failure of the candidate, scored as such.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

Packing = list[tuple[float, float, float]]


def _unpack(z: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return z[:n], z[n : 2 * n], z[2 * n :]


def optimise(n: int, rng: np.random.Generator, iters: int = 300) -> Packing:
    """One random start, locally optimised, repaired to a valid packing."""
    x0 = rng.uniform(0.1, 0.9, n)
    y0 = rng.uniform(0.1, 0.9, n)
    r0 = np.full(n, 0.02)
    z0 = np.concatenate([x0, y0, r0])
    iu, ju = np.triu_indices(n, 1)
    m = len(iu)

    def obj(z):
        return -z[2 * n :].sum()

    g = np.zeros(3 * n)
    g[2 * n :] = -1

    def obj_jac(z):
        return g

    def cons(z):
        x, y, r = _unpack(z, n)
        walls = np.concatenate([x - r, 1 - x - r, y - r, 1 - y - r])
        dx = x[iu] - x[ju]
        dy = y[iu] - y[ju]
        rr = r[iu] + r[ju]
        pair = dx * dx + dy * dy - rr * rr
        return np.concatenate([walls, pair])

    def cons_jac(z):
        x, y, r = _unpack(z, n)
        J = np.zeros((4 * n + m, 3 * n))
        ar = np.arange(n)
        J[ar, ar] = 1
        J[ar, 2 * n + ar] = -1
        J[n + ar, ar] = -1
        J[n + ar, 2 * n + ar] = -1
        J[2 * n + ar, n + ar] = 1
        J[2 * n + ar, 2 * n + ar] = -1
        J[3 * n + ar, n + ar] = -1
        J[3 * n + ar, 2 * n + ar] = -1
        dx = x[iu] - x[ju]
        dy = y[iu] - y[ju]
        rr = r[iu] + r[ju]
        rows = 4 * n + np.arange(m)
        J[rows, iu] = 2 * dx
        J[rows, ju] = -2 * dx
        J[rows, n + iu] = 2 * dy
        J[rows, n + ju] = -2 * dy
        J[rows, 2 * n + iu] = -2 * rr
        J[rows, 2 * n + ju] = -2 * rr
        return J

    bounds = [(0, 1)] * (2 * n) + [(0, 0.5)] * n
    res = minimize(
        obj,
        z0,
        jac=obj_jac,
        method="SLSQP",
        bounds=bounds,
        constraints=[{"type": "ineq", "fun": cons, "jac": cons_jac}],
        options={"maxiter": iters, "ftol": 1e-10},
    )
    return repair(*_unpack(res.x, n))


def repair(x: np.ndarray, y: np.ndarray, r: np.ndarray) -> Packing:
    """Clip to the square and shrink overlapping circles until nothing overlaps."""
    x = np.clip(x, 0, 1)
    y = np.clip(y, 0, 1)
    r = np.minimum.reduce([np.maximum(r, 0), x, 1 - x, y, 1 - y])
    for _ in range(50):
        d = np.hypot(x[:, None] - x[None, :], y[:, None] - y[None, :])
        over = r[:, None] + r[None, :] - d
        np.fill_diagonal(over, -1)
        worst = over.max(axis=1)
        if worst.max() <= 0:
            break
        r = np.maximum(r - np.maximum(worst, 0) / 2 - 1e-12, 0)
    return [(float(a), float(b), float(c)) for a, b, c in zip(x, y, r, strict=True)]
