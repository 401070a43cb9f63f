"""Monte Carlo of the gate and the intervals through the real ``aggregate`` and ``decide``.

Run: ``.venv/bin/python bench/stat_validity.py [--reps N]`` (about two minutes at 1,000). No
Prefect: simulated trial rewards go through the same pure functions the flows call. Prints,
each with its Monte Carlo standard error sqrt(p(1 − p)/R):

1. per-call false accept when the candidate equals the current best (paired, k_se = 1 and
   alpha = 0.05), 30 tasks × 3 trials;
2. power when the true gain equals the MDE the gate reports (alpha = 0.05, target 80 %);
3. coverage of the reported 95 % interval (betting) and of the Student t one, their mean
   widths, and how often each leaves [0, 1], in the worlds of the issue: binary and skewed
   with 8 tasks and 1 trial, the same with 30 tasks × 3 trials, 4 clusters of 4 tasks, and
   bounded continuous rewards.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy import stats as sps

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from honesteval.models import GateConfig, SplitResult, TaskTrials
from honesteval.stats import aggregate, decide


def result(rewards: np.ndarray, name: str, clusters: list[str] | None = None) -> SplitResult:
    """A (tasks × trials) reward matrix as a val SplitResult, through the real aggregate."""
    n, k = rewards.shape
    tasks = [
        TaskTrials(
            id=f"t{i:04d}",
            cluster=None if clusters is None else clusters[i],
            statuses=["ok"] * k,
            rewards=rewards[i].tolist(),
        )
        for i in range(n)
    ]
    return aggregate(tasks, candidate=name, fingerprint=name, split="val", n_trials=k)


def beta_rewards(rng: np.random.Generator, means: np.ndarray, trials: int) -> np.ndarray:
    """Continuous rewards in [0, 1] with per-task means ``means`` (Beta, concentration 6)."""
    a = np.clip(means, 1e-3, 1 - 1e-3) * 6.0
    return rng.beta(a[:, None], (6.0 - a)[:, None], size=(means.size, trials))


def rate(hits: int, reps: int) -> str:
    p = hits / reps
    return f"{p:6.1%} ± {math.sqrt(p * (1 - p) / reps):.1%}"


def false_accept(rng: np.random.Generator, reps: int, cfg: GateConfig) -> int:
    accepts = 0
    for _ in range(reps):
        means = rng.uniform(0.2, 0.8, 30)
        cur = result(beta_rewards(rng, means, 3), "cur")
        cand = result(beta_rewards(rng, means, 3), "cand")
        accepts += decide(cur, cand, cfg).accept
    return accepts


def power_at_mde(rng: np.random.Generator, reps: int) -> tuple[float, int]:
    """Pilot: the MDE the gate reports; then the accept rate when the true gain is that MDE."""
    cfg = GateConfig(alpha=0.05)
    pilot = []
    for _ in range(max(50, reps // 10)):
        means = rng.uniform(0.2, 0.7, 30)
        d = decide(
            result(beta_rewards(rng, means, 3), "cur"),
            result(beta_rewards(rng, means, 3), "cand"),
            cfg,
        )
        pilot.append(d.mde)
    mde = float(np.mean(pilot))
    accepts = 0
    for _ in range(reps):
        means = rng.uniform(0.2, 0.7, 30)
        cur = result(beta_rewards(rng, means, 3), "cur")
        cand = result(beta_rewards(rng, means + mde, 3), "cand")
        accepts += decide(cur, cand, cfg).accept
    return mde, accepts


@dataclass(frozen=True)
class World:
    name: str
    draw: Callable[[np.random.Generator], tuple[np.ndarray, list[str] | None]]
    true_mean: float


def binary_skewed(n: int, trials: int) -> World:
    # per-task pass probability ~ Beta(0.5, 4.5): mean 0.1, most tasks near 0, a few easy
    def draw(rng: np.random.Generator) -> tuple[np.ndarray, None]:
        p = rng.beta(0.5, 4.5, n)
        return (rng.random((n, trials)) < p[:, None]).astype(float), None

    return World(f"binary, skewed (mean 0.1), {n} tasks × {trials}", draw, 0.1)


def four_clusters() -> World:
    # 4 clusters of 4 tasks: cluster pass rates ~ Beta(1, 3), tasks share their cluster's rate
    def draw(rng: np.random.Generator) -> tuple[np.ndarray, list[str]]:
        p = np.repeat(rng.beta(1.0, 3.0, 4), 4)
        rewards = (rng.random((16, 3)) < p[:, None]).astype(float)
        return rewards, [f"c{i // 4}" for i in range(16)]

    return World("binary, 4 clusters of 4 tasks × 3", draw, 0.25)


def continuous() -> World:
    def draw(rng: np.random.Generator) -> tuple[np.ndarray, None]:
        return beta_rewards(rng, rng.beta(2.0, 5.0, 8), 3), None

    return World("continuous Beta, 8 tasks × 3", draw, 2.0 / 7.0)


def coverage(
    rng: np.random.Generator, world: World, reps: int
) -> tuple[dict[str, int], dict[str, float]]:
    """Hits of the true mean, intervals leaving [0, 1], and mean widths, per interval."""
    counts = {"betting": 0, "t": 0, "t_outside": 0, "betting_outside": 0}
    widths = {"betting": 0.0, "t": 0.0}
    for _ in range(reps):
        rewards, clusters = world.draw(rng)
        r = result(rewards, "x", clusters)
        lo, hi = r.ci95 if r.ci95 is not None else (0.0, 1.0)
        counts["betting"] += lo <= world.true_mean <= hi
        counts["betting_outside"] += lo < 0.0 or hi > 1.0
        widths["betting"] += (hi - lo) / reps
        if r.ci95_t is not None:
            tlo, thi = r.ci95_t
            counts["t"] += tlo <= world.true_mean <= thi
            counts["t_outside"] += tlo < 0.0 or thi > 1.0
            widths["t"] += (thi - tlo) / reps
    return counts, widths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000, help="replicates per cell")
    parser.add_argument("--seed", type=int, default=20240601)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    reps = args.reps
    t0 = time.perf_counter()

    print(f"Monte Carlo through aggregate/decide, {reps} replicates per cell (± = MC SE)\n")
    print("per-call false accept, candidate == current best, 30 tasks × 3 trials:")
    fa_k = false_accept(rng, reps, GateConfig(k_se=1.0))
    print(f"  paired, k_se = 1      {rate(fa_k, reps)}   (P(t29 > 1) = {sps.t.sf(1, 29):.1%})")
    fa_a = false_accept(rng, reps, GateConfig(alpha=0.05))
    print(f"  paired, alpha = 0.05  {rate(fa_a, reps)}   (target 5 %)")

    mde, hits = power_at_mde(rng, reps)
    print(f"\npower when the true gain is the reported MDE ({mde:.4f}), alpha = 0.05:")
    print(f"  paired                {rate(hits, reps)}   (target 80 %)")

    print("\n95% interval coverage, mean width, and how often it leaves [0, 1]:")
    print(
        f"  {'world':42} {'betting (reported)':>18} {'width':>6} {'outside':>8} "
        f"{'t':>16} {'width':>6} {'outside':>8}"
    )
    worlds = [binary_skewed(8, 1), binary_skewed(30, 3), four_clusters(), continuous()]
    for world in worlds:
        c, w = coverage(rng, world, reps)
        print(
            f"  {world.name:42} {rate(c['betting'], reps):>18} {w['betting']:>6.3f} "
            f"{c['betting_outside'] / reps:>8.1%} {rate(c['t'], reps):>16} {w['t']:>6.3f} "
            f"{c['t_outside'] / reps:>8.1%}"
        )
    print(f"\n({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
