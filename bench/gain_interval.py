"""The promoted gain's interval at the confirmation's stop, through the real code.

Run: ``python bench/gain_interval.py`` (``--promotions N`` a cell, default 25,000; ``--quick``
runs 4,000). No Prefect: the default confirmation's paired trials are simulated with numpy,
each confirmation runs as the gate runs it (the real ``promoted_paths``: promote at the first
crossing of 1/alpha_j, futility, budget), and every promoted one gets the real
``gain_bounds`` (what ``rounds_decide`` reports as ``gain_cs95``) after the rounds it ran.

Worlds (T val tasks, budget 3 × the screen's K trials, as the gate's default): binary rewards
at 12×10 and 7×3 (task pass rates U(0.2, 0.7), the candidate +g on every task); heavy-tailed
(12×10, rewards near the task's mean with a 5 % chance of an all-or-nothing outcome); skewed
(12×10, Δ = +s on 90 % of trials and −0.9 on 10 %). In each, the true gain is the world's MDE at
that level (P(promote) = 0.8, found by bisection through ``promoted_paths``), at alpha_1 and
alpha_10 of the default online rule (nine confirmations without a promotion before j = 10).

Prints, per cell: P(promote), the promotions counted, how often the 95 % confidence
sequence holds among promotions (target ≥ 95 % − 1 MC SE) and of raw Δ ± 1.96·SE (SE of the
stopped rounds' trial deltas), each with MC SE sqrt(p(1 − p)/n), and both mean widths.

References: Waudby-Smith & Ramdas (2024), "Estimating means of bounded random variables by
betting", JRSS-B 86(1).
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from _common import run_size

from honesteval.stats import advance, new_online_state, next_level, promoted_paths
from honesteval.stats._confirmation import unreachable
from honesteval.stats._gain_sequence import gain_bounds

#: A world: (rng, draws, rounds, tasks, gain) → (paired deltas, true θ per draw).
World = Callable[[np.random.Generator, int, int, int, float], tuple[np.ndarray, np.ndarray]]
CHUNK = 5_000


def binary(rng: np.random.Generator, draws: int, rounds: int, tasks: int, g: float):
    p = rng.uniform(0.2, 0.7, (draws, 1, tasks))
    q = np.clip(p + g, 0.0, 1.0)
    d = (rng.random((draws, rounds, tasks)) < q).astype(float)
    d -= rng.random((draws, rounds, tasks)) < p
    return d, (q - p).mean(axis=(1, 2))


def heavy(rng: np.random.Generator, draws: int, rounds: int, tasks: int, g: float):
    """Rewards Beta(50·m, 50·(1 − m)) near the task's mean m, or with probability 0.05 an
    all-or-nothing Bernoulli(m): mean m either way, rare extremes."""
    p = rng.uniform(0.2, 0.7, (draws, 1, tasks))

    def reward(m: np.ndarray) -> np.ndarray:
        shape = (draws, rounds, tasks)
        m = np.broadcast_to(m, shape)
        near = rng.beta(50 * m, 50 * (1 - m))
        extreme = (rng.random(shape) < m).astype(float)
        return np.where(rng.random(shape) < 0.05, extreme, near)

    q = np.clip(p + g, 0.01, 0.99)
    return reward(q) - reward(p), (q - p).mean(axis=(1, 2))


def skewed(rng: np.random.Generator, draws: int, rounds: int, tasks: int, g: float):
    """Δ = +s on 90 % of trials, −0.9 on 10 %: mean g = 0.9·s − 0.09."""
    s = (g + 0.09) / 0.9
    d = np.where(rng.random((draws, rounds, tasks)) < 0.1, -0.9, s)
    return d, np.full(draws, g)


def power(world: World, rng, tasks: int, budget: int, level: float, g: float) -> float:
    d, _ = world(rng, 2_000, budget, tasks, g)
    return float(promoted_paths(d, level)[0].mean())


def mde(world: World, seed: int, tasks: int, budget: int, level: float) -> float:
    """The gain promoted with probability 0.8 (common random numbers across the bisection)."""
    low, high = 0.0, 0.6
    for _ in range(14):
        mid = 0.5 * (low + high)
        if power(world, np.random.default_rng(seed), tasks, budget, level, mid) >= 0.8:
            high = mid
        else:
            low = mid
    return high


def se_text(p: float, n: int) -> str:
    return f"{p:.4f} ± {math.sqrt(p * (1 - p) / max(n, 1)):.4f}"


def cell(world: World, seed: int, tasks: int, budget: int, level: float, target: int) -> str:
    g = mde(world, seed, tasks, budget, level)
    rng = np.random.default_rng(seed + 1)
    draws = promoted = cs_hits = t_hits = 0
    cs_width = t_width = 0.0
    while promoted < target:
        d, theta = world(rng, CHUNK, budget, tasks, g)
        hit, used = promoted_paths(d, level)
        d, theta, used = d[hit], theta[hit], used[hit]
        low, high = gain_bounds(d, d, used)
        counted = np.arange(budget)[None, :, None] < used[:, None, None]
        n = tasks * used
        raw = (d * counted).sum(axis=(1, 2)) / n
        var = ((d - raw[:, None, None]) ** 2 * counted).sum(axis=(1, 2)) / np.maximum(n - 1, 1)
        half = 1.96 * np.sqrt(var / n)
        draws += CHUNK
        promoted += int(hit.sum())
        cs_hits += int(((low <= theta) & (theta <= high)).sum())
        t_hits += int((np.abs(raw - theta) <= half).sum())
        cs_width += float((high - low).sum())
        t_width += float((2 * half).sum())
    return (
        f"gain {g:.4f}  P(promote) {promoted / draws:.3f}  promotions {promoted:6d}  "
        f"CS {se_text(cs_hits / promoted, promoted)} width {cs_width / promoted:.3f}  "
        f"raw Δ ± 1.96 SE {se_text(t_hits / promoted, promoted)} width "
        f"{t_width / promoted:.3f}"
    )


def levels() -> tuple[float, float]:
    state = new_online_state()
    first = next_level(state)
    for _ in range(9):
        state = advance(state, next_level(state), promoted=False)
    return first, next_level(state)


def main() -> None:
    target = run_size(__doc__ or "", "promotions", 25_000, 4_000)
    worlds: list[tuple[str, World, int, int]] = [
        ("binary 12×10", binary, 12, 10),
        ("binary 7×3", binary, 7, 3),
        ("heavy-tailed 12×10", heavy, 12, 10),
        ("skewed 12×10", skewed, 12, 10),
    ]
    alpha_1, alpha_10 = levels()
    print(
        f"promoted gain's 95 % confidence sequence at the stop; alpha_1 = {alpha_1:.4g}, "
        f"alpha_10 = {alpha_10:.4g}; {target} promotions a cell"
    )
    for index, (name, world, tasks, trials) in enumerate(worlds):
        budget = 3 * trials
        for j, level in ((1, alpha_1), (10, alpha_10)):
            started = time.perf_counter()
            why = unreachable(tasks, budget, level)
            row = (
                f"no promotion possible: {why}"
                if why is not None
                else cell(world, 35_000 + 10 * index + j, tasks, budget, level, target)
            )
            print(
                f"{name:19s} j={j:2d}  {row}  [{time.perf_counter() - started:.0f} s]", flush=True
            )


if __name__ == "__main__":
    main()
