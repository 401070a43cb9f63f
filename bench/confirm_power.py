"""The confirmation test through the real code: its level in the tails, its power, the MDE the
gate prints, and the promoted gain's interval.

Run: ``python bench/confirm_power.py`` (a few minutes on 2 cores), ``--quick`` for a smaller
run. No Prefect: trials are simulated with numpy; results go through the real ``aggregate``,
screens through the real ``decide``, confirmations through the real ``gating.confirm_decision``
(the betting e-value at the ledger's alpha_j), the printed MDE through the real
``gating.gate_power``.

1. Level. Per-task paired deltas of n = 50 tasks, K = 9 trials a side (binary rewards),
   under a mean-zero null: *skewed* (a candidate +0.05 better on 90 % of the tasks and 0.45
   worse on 10 %) and *symmetric* (±0.05 on half the tasks each). Rejection rate / alpha at
   1e−3, 1e−4, 1e−5 for today's t bar and the betting e-value. Rare events by importance
   sampling: the count of "worse" (skewed) or "+" (symmetric) tasks is drawn from a tilted
   binomial and each draw weighted by the likelihood ratio; MC SE from the weighted draws.
2. Power cost. The confirmation alone (n = 50, K = 9, task effects as in the search bench) at
   alpha_1 and alpha_10: P(reject) of the t bar and of the e-value at several true gains.
3. The printed MDE. A world of n tasks (pass probabilities U(0.2, 0.7)); a pilot screen of an
   equal candidate prints the MDE (``gate_power`` on it); then a candidate whose true mean gain
   equals that MDE goes through the real screen and confirmation at j = 1 and j = 10.
   Target: promoted 80 % ± 5 %.
4. The promoted gain. True gain 0.06 (n = 200 tasks) at j = 1 and j = 10: coverage of the
   reported 95 % interval among promotions (target ≥ 94 %), and of today's t interval.
5. The drift check's reference. After a promotion at j = 10 (100 tasks, true gain 0.10, the
   world unchanged afterwards), the share of nightly checks (the real ``drift_report``, 5 %
   two-sided) that cry "drifted": against the confirmation run that promoted (selected), and
   against the first re-run after it (unselected, what ``reevaluate-best`` now uses).

References: Waudby-Smith & Ramdas (2024), JRSS-B 86(1); Lee, Sun, Sun & Taylor (2016), Ann.
Statist. 44(3); Xu & Ramdas (2024), AISTATS.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time
from datetime import UTC, datetime

import numpy as np
from _common import simulated_result
from scipy import stats as sps

from honesteval.ledger.gate_ledger import Confirmation, confirm_decision, gate_power, staged
from honesteval.models import GateConfig, OnlineState, SplitResult
from honesteval.stats import (
    advance,
    confirmation_log_e,
    decide,
    drift_report,
    gain_ci95,
    new_online_state,
    next_level,
)

CFG = GateConfig()


def state_at(j: int) -> OnlineState:
    """The ledger before confirmation j when none of the j − 1 before it promoted."""
    s = new_online_state()
    for _ in range(j - 1):
        s = advance(s, next_level(s), False)
    return s


def result(name: str, rewards: np.ndarray, seed: int) -> SplitResult:
    """The real aggregate over simulated trial rewards (tasks × trials)."""
    result: SplitResult = simulated_result(name, rewards, seed)
    return result


def fmt(m: float, se: float, digits: int = 3) -> str:
    return f"{m:.{digits}f} ± {se:.{digits}f}"


# 1. level -------------------------------------------------------------------------------------


def null_deltas(
    rng: np.random.Generator, draws: int, n: int, k_trials: int, world: str, tilt: float
) -> tuple[np.ndarray, np.ndarray]:
    """(deltas, importance weights) of a mean-zero world, the special tasks' count tilted."""
    base = 0.6
    if world == "skewed":
        up, down, q = 0.05, -0.45, 0.1  # 0.9·0.05 = 0.1·0.45: mean zero
    else:
        up, down, q = 0.05, -0.05, 0.5
    special = rng.binomial(n, tilt, draws)  # tasks at `down` (skewed) or `up` (symmetric)
    if world == "skewed":
        weights = sps.binom.pmf(special, n, q) / sps.binom.pmf(special, n, tilt)
        is_special = np.arange(n)[None, :] < special[:, None]
        theta = np.where(is_special, down, up)
    else:
        weights = sps.binom.pmf(special, n, q) / sps.binom.pmf(special, n, tilt)
        is_special = np.arange(n)[None, :] < special[:, None]
        theta = np.where(is_special, up, down)
    cand = rng.binomial(k_trials, base + theta) / k_trials
    cur = rng.binomial(k_trials, np.full_like(theta, base)) / k_trials
    return cand - cur, weights


def level_table(rng: np.random.Generator, draws: int) -> None:
    n, k = 50, 9
    print(f"1. level under a mean-zero null ({n} tasks, {k} trials a side, {draws} weighted draws)")
    print(f"{'world':10} {'alpha':>7} {'t bar: rate/alpha':>20} {'betting: rate/alpha':>20}")
    for world, tilt in (("skewed", 0.02), ("symmetric", 0.62)):
        x, w = null_deltas(rng, draws, n, k, world, tilt)
        mean, sd = x.mean(axis=1), x.std(axis=1, ddof=1)
        for alpha in (1e-3, 1e-4, 1e-5):
            q = sps.t.ppf(1 - alpha, n - 1)
            t_rej = np.where(sd == 0, mean > 0, mean > q * sd / math.sqrt(n))
            e_rej = np.concatenate(
                [
                    confirmation_log_e(chunk, alpha) >= math.log(1 / alpha)
                    for chunk in np.array_split(x, max(1, draws // 5000))
                ]
            )
            cells = []
            for rej in (t_rej, e_rej):
                vals = w * rej / alpha
                cells.append(fmt(vals.mean(), vals.std(ddof=1) / math.sqrt(draws), 2))
            print(f"{world:10} {alpha:>7.0e} {cells[0]:>20} {cells[1]:>20}")
    print()


# 2. power cost ---------------------------------------------------------------------------------


def power_table(rng: np.random.Generator, draws: int) -> None:
    n, k = 50, 9
    levels = {1: next_level(state_at(1)), 10: next_level(state_at(10))}
    print(f"2. power of the confirmation alone ({n} tasks, {k} trials a side, {draws} draws)")
    print(f"{'gain':>6} " + " ".join(f"{f'j={j} t':>9} {f'j={j} e':>9}" for j in levels))
    for gain in (0.05, 0.10, 0.15, 0.20, 0.25):
        p = rng.uniform(0.2, 0.7, (draws, n))
        x = (
            rng.binomial(k, np.minimum(p + gain, 1.0)) - rng.binomial(k, p)
        ) / k  # true gain = `gain` exactly while p + gain ≤ 1 (p ≤ 0.7, gain ≤ 0.3)
        mean, sd = x.mean(axis=1), x.std(axis=1, ddof=1)
        cells = []
        for level in levels.values():
            q = sps.t.ppf(1 - level, n - 1)
            cells.append(f"{np.mean(mean > q * sd / math.sqrt(n)):9.3f}")
            cells.append(f"{np.mean(confirmation_log_e(x, level) >= math.log(1 / level)):9.3f}")
        print(f"{gain:6.2f} " + " ".join(cells))
    print(f"   (MC SE ≤ {0.5 / math.sqrt(draws):.3f}; alpha_1 = {levels[1]:.3g}, ")
    print(f"    alpha_10 = {levels[10]:.3g})\n")


# 3. printed MDE and 4. the promoted gain --------------------------------------------------------


def gate_once(
    rng: np.random.Generator,
    p: np.ndarray,
    gain: float | np.ndarray,
    j: int,
    k: int,
    factor: int,
    promoted_run: list[SplitResult] | None = None,
) -> tuple[bool, float | None, tuple[float, float] | None, tuple[float, float] | None]:
    """One gate call through the real code: (promoted, estimate, reported CI, today's t CI);
    the confirmation's candidate run is appended to ``promoted_run`` on a promotion."""
    n = p.size
    best = result("best", (rng.random((n, k)) < p[:, None]).astype(float), 0)
    cand = result("cand", (rng.random((n, k)) < (p + gain)[:, None]).astype(float), 0)
    screen = staged(decide(best, cand, CFG), CFG)
    if not screen.accept:
        return False, None, None, None
    kc = k * factor
    cur_c = result("best", (rng.random((n, kc)) < p[:, None]).astype(float), 7)
    new_c = result("cand", (rng.random((n, kc)) < (p + gain)[:, None]).astype(float), 7)
    d = confirm_decision(screen, Confirmation(cur_c, new_c, CFG), state_at(j))
    if d.accept and promoted_run is not None:
        promoted_run.append(new_c)
    return d.accept, d.gain_estimate, d.gain_ci95, gain_ci95(cur_c, new_c)


def printed_mde(
    rng: np.random.Generator, p: np.ndarray, pattern: np.ndarray, j: int, k: int
) -> float | None:
    """The MDE ``gate`` prints for a pilot: the best against a candidate with the world's
    task effects and no mean gain (the real ``gate_power`` on their screen)."""
    n = p.size
    best = result("best", (rng.random((n, k)) < p[:, None]).astype(float), 0)
    pilot = result("pilot", (rng.random((n, k)) < (p + pattern)[:, None]).astype(float), 0)
    screen = staged(decide(best, pilot, CFG), CFG)
    return gate_power(screen, best, pilot, CFG, state_at(j)).mde


#: The printed-MDE worlds: the SD ω of the per-task effects around the mean gain (0: every
#: task gains alike; 0.08: task-specific, uniform on ±0.08·√3, centred, never clipped).
MDE_WORLDS = (0.0, 0.08)


def task_pattern(rng: np.random.Generator, n: int, omega: float) -> np.ndarray:
    z = rng.uniform(-1.0, 1.0, n)
    z -= z.mean()
    return omega * math.sqrt(3.0) * z


def mde_table(rng: np.random.Generator, worlds: int, gates: int, n: int) -> None:
    k, factor = 3, 3
    print(
        f"3. a true gain equal to the printed MDE ({n} tasks, pass rates U(0.2, 0.7), screen "
        f"{k} trials, confirmation {k * factor}; {worlds} worlds × {gates} gate calls a row;"
        " the MDE printed on a pilot screen of the world's candidate at gain 0)"
    )
    print(f"{'ω':>5} {'j':>3} {'printed MDE, mean (range)':>27} {'promoted':>14}")
    for omega in MDE_WORLDS:
        for j in (1, 10):
            per_world, mdes = [], []
            for _ in range(worlds):
                p = rng.uniform(0.2, 0.7, n)
                pattern = task_pattern(rng, n, omega)
                mde = printed_mde(rng, p, pattern, j, k)
                if mde is None or mde > 0.15:  # keeps p + gain + pattern inside [0, 1]
                    continue
                mdes.append(mde)
                per_world.append(
                    np.mean(
                        [gate_once(rng, p, mde + pattern, j, k, factor)[0] for _ in range(gates)]
                    )
                )
            arr = np.asarray(per_world)
            print(
                f"{omega:>5.2f} {j:>3} {np.mean(mdes):>8.4f} ({min(mdes):.4f}–{max(mdes):.4f})"
                f"{'':4} {fmt(arr.mean(), arr.std(ddof=1) / math.sqrt(arr.size)):>14}"
                + (
                    f"  ({worlds - arr.size} worlds above 0.15 left out)"
                    if arr.size < worlds
                    else ""
                )
            )
    print()


def coverage_table(rng: np.random.Generator, gates: int, n: int, gain: float) -> None:
    k, factor = 3, 3
    print(f"4. the promoted gain: true gain {gain} on {n} tasks, {gates} gate calls per row")
    print(
        f"{'j':>3} {'promoted':>9} {'mean raw Δ':>11} {'mean estimate':>14} "
        f"{'new CI covers':>14} {'t CI covers':>12}"
    )
    p = rng.uniform(0.2, 0.7, n)
    for j in (1, 10):
        rows = [gate_once(rng, p, gain, j, k, factor) for _ in range(gates)]
        promoted = [r for r in rows if r[0]]
        m = len(promoted)
        if m < 2:
            print(f"{j:>3} {m:>9} (too few promotions)")
            continue
        cov = np.array([r[2][0] <= gain <= r[2][1] for r in promoted], dtype=float)
        tcov = np.array([r[3][0] <= gain <= r[3][1] for r in promoted], dtype=float)
        raw = np.mean([(r[3][0] + r[3][1]) / 2 for r in promoted])
        est = np.mean([r[1] for r in promoted])
        se = math.sqrt(cov.mean() * (1 - cov.mean()) / m)
        tse = math.sqrt(tcov.mean() * (1 - tcov.mean()) / m)
        print(
            f"{j:>3} {m:>9} {raw:>11.4f} {est:>14.4f} {fmt(cov.mean(), se):>14} "
            f"{fmt(tcov.mean(), tse):>12}"
        )
    print()


def drift_table(rng: np.random.Generator, gates: int, n: int, gain: float) -> None:
    k, factor = 3, 3
    p = rng.uniform(0.2, 0.7, n)
    print(
        f"5. drift alarms after a promotion ({n} tasks, true gain {gain}, {gates} gate calls a "
        "row; the world unchanged afterwards: a 5 % test)"
    )
    print(
        f"{'j':>3} {'promotions':>10} {'vs the confirmation run':>24} {'vs the first re-run':>20}"
    )
    for j in (1, 10):
        old, new = [], []
        for _ in range(gates):
            runs: list[SplitResult] = []
            gate_once(rng, p, gain, j, k, factor, runs)
            if not runs:
                continue
            kc = k * factor
            nights = [
                result("cand", (rng.random((n, kc)) < (p + gain)[:, None]).astype(float), 100 + i)
                for i in range(2)
            ]
            old.append(drift_report(runs[0], nights[0], CFG).status == "drifted")
            new.append(drift_report(nights[0], nights[1], CFG).status == "drifted")
        cells = []
        for xs in (old, new):
            arr = np.asarray(xs, dtype=float)
            cells.append(
                fmt(arr.mean(), math.sqrt(arr.mean() * (1 - arr.mean()) / max(arr.size, 1)))
            )
        print(f"{j:>3} {len(old):>10} {cells[0]:>24} {cells[1]:>20}")
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a smaller run (~1 min)")
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("--only", choices=["level", "power", "mde", "coverage", "drift"], default=None)
    ns = ap.parse_args()
    rng = np.random.default_rng(ns.seed)
    scale = 1 if ns.quick else 4
    t0 = time.perf_counter()
    print(
        f"confirm_power {datetime.now(UTC):%Y-%m-%d}, {platform.machine()} {os.cpu_count()} "
        f"cores{' (--quick)' if ns.quick else ''}\n"
    )
    if ns.only in (None, "level"):
        level_table(rng, 20_000 * scale)
    if ns.only in (None, "power"):
        power_table(rng, 1_000 * scale)
    if ns.only in (None, "mde"):
        mde_table(rng, 40 * scale, 5, 100)
    if ns.only in (None, "coverage"):
        coverage_table(rng, 300 * scale, 200, 0.06)
    if ns.only in (None, "drift"):
        drift_table(rng, 300 * scale, 100, 0.10)
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
