"""The default confirmation's level when a target's randomness ignores the task.

Run: ``.venv/bin/python bench/round_dependence.py [--draws N] [--quick]`` (20,000
confirmations a cell; ``--quick`` runs 2,000). No Prefect: the seeds come from the real seed
contract (:func:`honesteval.models.trial_seed`) and each simulated confirmation is decided by
the gate's own rule (:func:`honesteval.stats.promoted_paths`: promote at the first round whose
evidence reaches 1/alpha_j, stop for futility, stop at the budget).

The world ("shared draw"): a target seeded by the seed and the side only, as
``random.Random(seed)`` ignoring the task would be, so two trials at one seed draw the same
number whatever their tasks. Trial reward on task t: 1 when the draw u(seed, side) is below
the task's pass rate p_t (12 tasks from 0.2 to 0.8), or the draw itself (continuous rewards).
The candidate is the best in law (the null): a false promotion is any promotion. 12 tasks ×
30 rounds, at alpha_j = 1e−2 and 1e−3, under

* ``shared`` seeds: trial r of every task at ``base_seed + r`` (the confirmations' contract
  before issue 57): a round's 12 trials draw one number a side, so the round's deltas are one
  delta 12 times, and the e-process (a product over the round's tasks) bets 12 times on it;
* ``per_task`` seeds (today's): each task its own seeds, the same on both sides of the pair.

Power beside it: the candidate passes with p_t + gain on every task (binary), per-task seeds.

``--part shock``: the world per-task seeds do not fix, a mean-zero shock shared by every task
of a round on the candidate's side (a provider that drifts between rounds: its pass rate is
p_t ± shock in a round, each sign with probability 1/2; the best's p_t; pass rates 0.3–0.7,
trials otherwise independent). Today's capital, a product over the round's tasks, against a
capital valid under any dependence within a round: the same bet on the round's *mean* delta,
E = Π_r (1 + λ_r·m_r), which is the gate's rule with one observation a round
(``promoted_paths`` on m_r; given the past m_r ∈ [−1, 1] has mean ≤ 0 under the null, which
is all the proof needs). Its power cost beside today's at 7, 12 and 50 tasks (no shock).

A third capital is valid under shocks up to a known size s (mean zero, |shock| ≤ s, the
tasks independent given the round's shock): each gambler's round factor Π_t (1 + λ d_t)
divided by M(λ) = ((1 + λs)^T + (1 − λs)^T) / 2, the most E[Π_t (1 + λ d_t)] reaches under
the null (Π_t (1 + λμ_t + λε) ≤ (1 + λε)^T by AM-GM when Σ_t μ_t ≤ 0, and (1 + λε)^T is
convex in ε, so a two-point ±s shock is the worst). It is run "guarding against" the world's
own shock size (the most favourable choice) and decided at its first crossing with no
futility stop (so its rates are upper bounds). Why no capital can do much better: a round of
a ±s world is half the time, trial by trial, a round in which the candidate truly gains s, so
a round factor f with E[f] ≤ 1 in that world has E[f] ≤ 2 on a true gain of s: on gains up
to s, any valid capital needs ≥ log(1/alpha_j)/log 2 rounds (7 at 1e−2, 10 at 1e−3).

Each rate carries its Monte Carlo SE sqrt(p(1 − p)/R); "holds" says whether it is at most
alpha_j + 2 SE.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from scipy.special import logsumexp

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from honesteval.models import Seeding, trial_seed
from honesteval.stats import promoted_paths
from honesteval.stats._eprocess import BET_GRID

TASKS = 12
ROUNDS = 30
LEVELS = (1e-2, 1e-3)
#: The first confirmation's base seed; confirmation i starts SPACING seeds further on, so the
#: shared seeds of two confirmations never meet (their draws are independent).
FIRST_BASE = 10**9
SPACING = 1000


def confirmation_seeds(draws: int, seeding: Seeding, tasks: int = TASKS) -> np.ndarray:
    """(draws, rounds, tasks) seeds of ``draws`` confirmations, as the gate plans them."""
    ids = [f"t{t:02d}" for t in range(tasks)]
    out = np.empty((draws, ROUNDS, tasks), dtype=np.uint64)
    for i in range(draws):
        base = FIRST_BASE + SPACING * i
        out[i] = [[trial_seed(base, t, r, seeding) for t in ids] for r in range(ROUNDS)]
    return out


def draw(seeds: np.ndarray, side: int) -> np.ndarray:
    """u(seed, side) in [0, 1): a target's draw that depends on the seed and side alone
    (splitmix64 of 2·seed + side, vectorised)."""
    with np.errstate(over="ignore"):
        z = seeds * np.uint64(2) + np.uint64(side) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(float) / 2.0**53


def shared_draw_deltas(seeds: np.ndarray, *, binary: bool, gain: float = 0.0) -> np.ndarray:
    """candidate − best on every trial of the shared-draw world, (draws, rounds, tasks)."""
    best, cand = draw(seeds, 0), draw(seeds, 1)
    if not binary:
        return cand - best
    pass_rate = np.linspace(0.2, 0.8, seeds.shape[-1])
    return (cand < np.minimum(pass_rate + gain, 1.0)).astype(float) - (best < pass_rate)


def promotion_rate(deltas: np.ndarray, level: float) -> tuple[float, float]:
    """(share promoted, its MC SE) of these confirmations through the gate's rule."""
    promoted, _ = promoted_paths(deltas, level)
    p = float(promoted.mean())
    return p, float(np.sqrt(p * (1 - p) / promoted.size))


def rate_cell(p: float, se: float) -> str:
    return f"{p:.5f} ± {se:.5f}"


#: Draws a chunk of the shock section (draws × rounds × 50 tasks stay a few hundred MB).
CHUNK = 2_000


def shock_deltas(
    rng: np.random.Generator, draws: int, tasks: int, shock: float, gain: float = 0.0
) -> np.ndarray:
    """candidate − best, (draws, rounds, tasks): binary trials, the candidate's pass rate
    p_t + gain ± shock in each round (one sign for every task of the round)."""
    pass_rate = np.linspace(0.3, 0.7, tasks)
    sign = np.where(rng.random((draws, ROUNDS, 1)) < 0.5, -1.0, 1.0)
    cand = rng.random((draws, ROUNDS, tasks)) < pass_rate + gain + shock * sign
    best = rng.random((draws, ROUNDS, tasks)) < pass_rate
    return cand.astype(float) - best


def guarded_log_e(deltas: np.ndarray, guard: float) -> np.ndarray:
    """log E after each round of the capital valid under round shocks up to ±``guard`` (see
    the module): the gate's gamblers, each round's factor divided by its worst null mean."""
    tasks = deltas.shape[-1]
    bets = BET_GRID[:, None, None]
    worst = np.log(((1 + bets * guard) ** tasks + (1 - bets * guard) ** tasks) / 2)
    rounds = np.log1p(bets[..., None] * deltas[None]).sum(axis=-1) - worst  # (K, draws, rounds)
    out: np.ndarray = logsumexp(np.cumsum(rounds, axis=-1), axis=0) - np.log(len(BET_GRID))
    return out


def shock_rates(
    rng: np.random.Generator,
    draws: int,
    tasks: int,
    shock: float,
    gain: float,
    level: float,
    guard: float,
) -> list[tuple[float, float]]:
    """(P(promote), MC SE) of today's capital, the round-mean capital (both through the
    gate's rule) and the capital guarding against ±``guard`` (first crossing), on the same
    draws."""
    hits = np.zeros(3, dtype=int)
    for start in range(0, draws, CHUNK):
        d = shock_deltas(rng, min(CHUNK, draws - start), tasks, shock, gain)
        hits[0] += int(promoted_paths(d, level)[0].sum())
        hits[1] += int(promoted_paths(d.mean(axis=-1, keepdims=True), level)[0].sum())
        hits[2] += int((guarded_log_e(d, guard).max(axis=-1) >= np.log(1 / level)).sum())
    rates = hits / draws
    return [(float(p), float(np.sqrt(p * (1 - p) / draws))) for p in rates]


def shock_part(draws: int) -> None:
    rng = np.random.default_rng(57)
    print(f"Round shock, {ROUNDS} rounds, {draws} confirmations a cell")
    print(
        "| tasks | shock | alpha_j | today's (product) | holds | round-mean capital | holds "
        "| guarded against the shock | holds |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for tasks, shock in ((12, 0.15), (50, 0.10), (50, 0.20)):
        for level in LEVELS:
            rates = shock_rates(rng, draws, tasks, shock, 0.0, level, shock)
            cells = [
                f"{rate_cell(p, se)} | {'yes' if p <= level + 2 * se else 'NO'}" for p, se in rates
            ]
            print(f"| {tasks} | ±{shock} | {level:g} | {' | '.join(cells)} |")
    print(
        "\nPower without a shock (every task p_t + gain); the guarded capital guards against "
        "the shock the level table above needs at that many tasks"
    )
    print("| tasks | gain | alpha_j | today's | round-mean capital | guarded (±) |")
    print("|---|---|---|---|---|---|")
    for tasks, gain in (
        (7, 0.2),
        (7, 0.3),
        (12, 0.1),
        (12, 0.2),
        (12, 0.3),
        (50, 0.05),
        (50, 0.1),
        (50, 0.2),
        (50, 0.3),
    ):
        guard = 0.15 if tasks < 50 else 0.20
        for level in LEVELS:
            cells = [
                rate_cell(p, se)
                for p, se in shock_rates(rng, draws, tasks, 0.0, gain, level, guard)
            ]
            print(
                f"| {tasks} | +{gain} | {level:g} | {cells[0]} | {cells[1]} | "
                f"{cells[2]} (±{guard}) |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--draws", type=int, default=20_000)
    parser.add_argument("--quick", action="store_true", help="2,000 draws a cell")
    parser.add_argument("--part", choices=("draws", "shock", "all"), default="all")
    args = parser.parse_args()
    draws = 2_000 if args.quick else args.draws
    t0 = time.perf_counter()
    if args.part in ("shock", "all"):
        shock_part(draws)
        print(f"\n{time.perf_counter() - t0:.0f} s\n")
    if args.part == "shock":
        return
    seeds = {s: confirmation_seeds(draws, s) for s in ("shared", "per_task")}
    print(
        f"{draws} confirmations a cell, {TASKS} tasks × {ROUNDS} rounds (seeds in "
        f"{time.perf_counter() - t0:.0f} s)\n"
    )
    print("P(false promotion), candidate = best in law, a target seeded by seed and side only")
    print("| rewards | seeds | alpha_j | P(false promotion) | holds (≤ alpha_j + 2 SE) |")
    print("|---|---|---|---|---|")
    for binary in (True, False):
        for seeding in ("shared", "per_task"):
            deltas = shared_draw_deltas(seeds[seeding], binary=binary)
            for level in LEVELS:
                p, se = promotion_rate(deltas, level)
                kind = "binary" if binary else "continuous"
                holds = "yes" if p <= level + 2 * se else "NO"
                print(f"| {kind} | {seeding} | {level:g} | {rate_cell(p, se)} | {holds} |")
    print("\nPower, binary, per-task seeds (pass rate p_t + gain on every task)")
    print("| gain | alpha_j | P(promote) |")
    print("|---|---|---|")
    for gain in (0.1, 0.2):
        deltas = shared_draw_deltas(seeds["per_task"], binary=True, gain=gain)
        for level in LEVELS:
            print(f"| +{gain} | {level:g} | {rate_cell(*promotion_rate(deltas, level))} |")
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
