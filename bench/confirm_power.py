"""The confirmation test through the real code: its level in the tails, its power, the MDE the
gate prints, and the promoted gain's interval.

Run: ``python bench/confirm_power.py`` (a few minutes on 2 cores), ``--quick`` for a smaller
run, ``--only`` one table. No Prefect: trials are simulated with numpy. Tables 1–2 call the
confirmation's test (``confirmation_log_e``) directly. Tables 3–5 make many gate calls per row:
their verdicts are vectorised (the screen's paired rule of ``decide`` and the real
``confirmation_log_e`` at the ledger's alpha_j), and the first calls of every row also go
through the real ``aggregate``, ``decide`` and ``gating.confirm_decision`` (and
``drift_report``), which must agree, or the run stops. The printed MDE is the real
``gating.gate_power`` on real results; the promoted gain's interval the real
``selective_gain`` (what ``confirm_decide`` reports as ``gain_ci95``).

1. Level. Per-task paired deltas of n = 50 tasks, K = 9 trials a side (binary rewards),
   under a mean-zero null: *skewed* (a candidate +0.05 better on 90 % of the tasks and 0.45
   worse on 10 %) and *symmetric* (±0.05 on half the tasks each). Rejection rate / alpha at
   1e−3, 1e−4, 1e−5 for today's t bar and the betting e-value. Rare events by importance
   sampling: the count of "worse" (skewed) or "+" (symmetric) tasks is drawn from a tilted
   binomial and each draw weighted by the likelihood ratio; MC SE from the weighted draws.
2. Power cost. The confirmation alone (n = 50, K = 9, task effects as in the search bench) at
   alpha_1 and alpha_10: P(reject) of the t bar and of the e-value at several true gains.
3. The printed MDE. Worlds of 100 tasks (pass probabilities U(0.2, 0.7)), every task gaining
   alike (ω = 0) or task-specific effects (ω = 0.08); in each, a pilot screen of the world's
   candidate at gain 0 prints the MDE (``gate_power``) at j = 1 and j = 10, then a candidate
   whose true mean gain equals it goes through the screen and the confirmation at that j.
   Target: promoted 80 % ± 5 %.
4. The promoted gain. True gain 0.06 (n = 200 tasks) at j = 1 and j = 10: how often the
   reported 95 % interval holds among promotions (target ≥ 94 %), and of a plain t interval.
5. The drift check's reference. After a promotion at j = 1 and j = 10 (100 tasks, true gain
   0.10, the world unchanged afterwards), the share of nightly checks (5 % two-sided) that cry
   "drifted": against the confirmation run that promoted (selected), and against the first
   re-run after it (unselected, what ``reevaluate-best`` uses).

References: Waudby-Smith & Ramdas (2024), JRSS-B 86(1); Lee, Sun, Sun & Taylor (2016), Ann.
Statist. 44(3); Xu & Ramdas (2024), AISTATS.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from multiprocessing import Pool

import numpy as np
from _common import paired_screen_passes, simulated_result
from scipy import stats as sps

from honesteval.gating.ledger import Confirmation, confirm_decision, staged
from honesteval.gating.power import gate_power
from honesteval.models import GateConfig, GateDecision, OnlineState, SplitResult
from honesteval.stats import (
    DRIFT_ALPHA,
    GateDesign,
    advance,
    confirmation_log_e,
    decide,
    drift_report,
    new_online_state,
    next_level,
    promotion_mde,
    selective_gain,
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


def counts_result(name: str, counts: np.ndarray, k: int, seed: int) -> SplitResult:
    """The real aggregate over per-task success counts (k binary trials a task)."""
    return result(name, (np.arange(k)[None, :] < counts[:, None]).astype(float), seed)


@dataclass(frozen=True)
class Calls:
    """Many gate calls of one candidate (true pass rates ``q``) against the best (``p``), the
    screen's and the confirmation's trials as per-task success counts."""

    screen_best: np.ndarray
    screen_cand: np.ndarray
    confirm_best: np.ndarray
    confirm_cand: np.ndarray
    k: int
    kc: int

    @staticmethod
    def draw(
        rng: np.random.Generator, p: np.ndarray, q: np.ndarray, calls: int, k: int, kc: int
    ) -> Calls:
        shape = (calls, p.size)
        return Calls(
            rng.binomial(k, p, shape),
            rng.binomial(k, q, shape),
            rng.binomial(kc, p, shape),
            rng.binomial(kc, q, shape),
            k,
            kc,
        )

    def confirm_deltas(self) -> np.ndarray:
        deltas: np.ndarray = (self.confirm_cand - self.confirm_best) / self.kc
        return deltas

    def promoted(self, level: float) -> np.ndarray:
        """The gate's verdicts, vectorised: the screen's paired rule (exact, as ``decide``
        without missing data or clusters) and the confirmation's
        betting e-value (the real ``confirmation_log_e`` that ``confirm_decide`` calls)."""
        screen = paired_screen_passes(self.screen_cand, self.screen_best, CFG.k_se)
        x = self.confirm_deltas()
        log_e = np.concatenate(
            [confirmation_log_e(c, level) for c in np.array_split(x, max(1, x.shape[0] // 200))]
        )
        passed: np.ndarray = screen & (log_e >= math.log(1.0 / level))
        return passed

    def through_the_gate(self, i: int, j: int) -> GateDecision:
        """Call i through the real ``decide`` and ``confirm_decision`` (the check that the
        vectorised verdicts are the gate's)."""
        best = counts_result("best", self.screen_best[i], self.k, 0)
        cand = counts_result("cand", self.screen_cand[i], self.k, 0)
        screen = staged(decide(best, cand, CFG), CFG)
        if not screen.accept:
            return screen
        cur_c = counts_result("best", self.confirm_best[i], self.kc, 7)
        new_c = counts_result("cand", self.confirm_cand[i], self.kc, 7)
        return confirm_decision(screen, Confirmation(cur_c, new_c, CFG), state_at(j))


def check_against_the_gate(calls: Calls, promoted: np.ndarray, j: int, count: int) -> None:
    for i in range(min(count, promoted.size)):
        real = calls.through_the_gate(i, j).accept
        if real != bool(promoted[i]):
            raise AssertionError(f"vectorised verdict {promoted[i]} != the gate's {real}")


#: The printed-MDE worlds: the SD ω of the per-task effects around the mean gain (0: every
#: task gains alike; 0.08: task-specific, uniform on ±0.08·√3, centred).
MDE_WORLDS = (0.0, 0.08)
MDE_CAP = 0.3  # pass rates p + gain + pattern are clipped to [0, 1]: the true gain is then
# below the MDE (never with ω = 0, p ≤ 0.7), which only makes the target harder


def task_pattern(rng: np.random.Generator, n: int, omega: float) -> np.ndarray:
    z = rng.uniform(-1.0, 1.0, n)
    z -= z.mean()
    pattern: np.ndarray = omega * math.sqrt(3.0) * z
    return pattern


#: Worlds per row that also compute the MDE from the true variances (it varies little).
TRUE_VARIANCE_WORLDS = 8


def mde_world(job: tuple[np.random.SeedSequence, float, int, int, int]) -> list[float]:
    """One world: the MDE the real ``gate_power`` prints on a pilot screen (the world's
    candidate at gain 0), at j = 1 and (nine confirmations on) j = 10, and the MDE the same
    simulation gives with the world's true variances; then ``calls`` gate calls of a candidate
    whose true mean gain is each. Returns, per j, [printed MDE, promoted, MDE from the true
    variances, promoted] (nan where an MDE is none or above MDE_CAP)."""
    seed, omega, n, calls, index = job
    check = index < 2
    rng = np.random.default_rng(seed)
    k, kc = 3, 9
    p = rng.uniform(0.2, 0.7, n)
    pattern = task_pattern(rng, n, omega)
    q = np.clip(p + pattern, 0.0, 1.0)
    best = counts_result("best", rng.binomial(k, p), k, 0)
    pilot = counts_result("pilot", rng.binomial(k, q), k, 0)
    screen = staged(decide(best, pilot, CFG), CFG)
    printed = gate_power(screen, best, pilot, CFG, state_at(1))
    out: list[float] = []
    for j, mde in ((1, printed.mde), (10, printed.mde_later)):
        level = next_level(state_at(j))
        true_variances = GateDesign(
            omega2=round(float(np.var(q - p)), 8),
            sigma2=round(float(np.mean(p * (1 - p) + q * (1 - q))), 8),
            n_obs=n,
            screen_trials=float(k),
            confirm_trials=float(kc),
            screen_bar=CFG.k_se,
            level=level,
        )
        known = promotion_mde(true_variances) if index < TRUE_VARIANCE_WORLDS else math.inf
        for gain in (mde, known):
            if gain is None or gain > MDE_CAP:
                out += [math.nan, math.nan]
                continue
            gate = Calls.draw(rng, p, np.clip(p + gain + pattern, 0.0, 1.0), calls, k, kc)
            promoted = gate.promoted(level)
            if check:
                check_against_the_gate(gate, promoted, j, 3)
            out += [gain, float(promoted.mean())]
    return out


def mde_table(seed: int, worlds: int, calls: int, n: int, workers: int) -> None:
    print(
        f"3. a true gain equal to the printed MDE ({n} tasks, pass rates U(0.2, 0.7), screen "
        f"3 trials, confirmation 9; {worlds} worlds a row, each: one pilot screen of the "
        f"world's candidate at gain 0 prints the MDE (the real gate_power), then {calls} gate"
        " calls of that candidate at gain = the MDE; ± over worlds; last two columns: the MDE"
        f" the same simulation gives with the world's true variances, first {TRUE_VARIANCE_WORLDS}"
        " worlds)"
    )
    print(
        f"{'ω':>5} {'j':>3} {'printed MDE, mean (range)':>27} {'promoted':>14} "
        f"{'true-variance MDE':>18} {'promoted':>14}"
    )
    seeds = np.random.SeedSequence(seed).spawn(worlds * len(MDE_WORLDS))
    jobs = [
        (seeds[w * worlds + i], omega, n, calls, i)
        for w, omega in enumerate(MDE_WORLDS)
        for i in range(worlds)
    ]
    with Pool(workers) as pool:
        rows = np.array(pool.map(mde_world, jobs))

    def cell(block: np.ndarray, col: int) -> tuple[np.ndarray, np.ndarray, int]:
        ok = ~np.isnan(block[:, col])
        return block[ok, col], block[ok, col + 1], int((~ok).sum())

    for w, omega in enumerate(MDE_WORLDS):
        block = rows[w * worlds : (w + 1) * worlds]
        for col, j in ((0, 1), (4, 10)):
            mdes, power, left = cell(block, col)
            tmdes, tpower, tleft = cell(block, col + 2)
            tleft -= max(0, worlds - TRUE_VARIANCE_WORLDS)
            note = f"  ({left}/{tleft} worlds left out: no MDE ≤ {MDE_CAP})" if left + tleft else ""
            print(
                f"{omega:>5.2f} {j:>3} {mdes.mean():>8.4f} ({mdes.min():.4f}–{mdes.max():.4f})"
                f"{'':4} {fmt(power.mean(), power.std(ddof=1) / math.sqrt(power.size)):>14} "
                f"{tmdes.mean():>18.4f} "
                f"{fmt(tpower.mean(), tpower.std(ddof=1) / math.sqrt(tpower.size)):>14}{note}"
            )
    print()


def _selective(job: tuple[np.ndarray, float]) -> tuple[float, tuple[float, float]] | None:
    return selective_gain(*job)


def coverage_table(
    rng: np.random.Generator, calls: int, n: int, gain: float, workers: int, checked: int = 3
) -> None:
    """The promoted gain's interval: the gate's verdicts vectorised (:meth:`Calls.promoted`),
    each promotion's interval by the real ``selective_gain`` (what ``confirm_decide`` reports
    as ``gain_ci95``), the first ``checked`` promotions through the real ``confirm_decision``
    to check they are the same."""
    k, kc = 3, 9
    p = rng.uniform(0.2, 0.7, n)
    print(
        f"4. the promoted gain: true gain {gain} on {n} tasks (pass rates U(0.2, 0.7)), screen "
        f"{k} trials, confirmation {kc}; {calls} gate calls at j = 1, {2 * calls} at j = 10"
    )
    print(
        f"{'j':>3} {'promoted':>9} {'mean raw Δ':>11} {'mean estimate':>14} "
        f"{'reported CI covers':>19} {'plain t CI covers':>18}"
    )
    for j in (1, 10):
        level = next_level(state_at(j))
        # j = 10 promotes about a third as often: twice the calls for similar MC errors
        gate = Calls.draw(rng, p, p + gain, calls * (1 if j == 1 else 2), k, kc)
        promoted = np.flatnonzero(gate.promoted(level))
        x = gate.confirm_deltas()[promoted]
        with Pool(workers) as pool:
            gains = pool.map(_selective, [(xi, level) for xi in x], chunksize=64)
        for i, g in zip(promoted[:checked], gains, strict=False):
            real = gate.through_the_gate(int(i), j)
            same = real.gain_ci95 is not None and g is not None
            assert real.accept and same and np.allclose(real.gain_ci95, g[1], atol=1e-9)
        cov = np.array([g is not None and g[1][0] <= gain <= g[1][1] for g in gains], float)
        half = sps.t.ppf(0.975, n - 1) * x.std(axis=1, ddof=1) / math.sqrt(n)
        raw = x.mean(axis=1)
        tcov = np.abs(raw - gain) <= half
        est = np.mean([g[0] for g in gains if g is not None])
        m = promoted.size
        print(
            f"{j:>3} {m:>9} {raw.mean():>11.4f} {est:>14.4f} "
            f"{fmt(cov.mean(), math.sqrt(cov.mean() * (1 - cov.mean()) / m), 4):>19} "
            f"{fmt(tcov.mean(), math.sqrt(tcov.mean() * (1 - tcov.mean()) / m), 4):>18}"
        )
    print()


def drift_alarms(stored: np.ndarray, fresh: np.ndarray, kc: int) -> np.ndarray:
    """The nightly check, vectorised: a two-sided paired t-test at 5 % on per-task means (the
    rule of the real ``drift_report``)."""
    d = (fresh - stored) / kc
    n = d.shape[1]
    bar = sps.t.ppf(1 - DRIFT_ALPHA / 2, n - 1) * d.std(axis=1, ddof=1) / math.sqrt(n)
    alarms: np.ndarray = np.abs(d.mean(axis=1)) > bar
    return alarms


def drift_table(rng: np.random.Generator, calls: int, n: int, gain: float) -> None:
    k, kc = 3, 9
    p = rng.uniform(0.2, 0.7, n)
    print(
        f"5. drift alarms after a promotion ({n} tasks, true gain {gain}, {calls} gate calls a "
        "row; the world unchanged afterwards, so every alarm is false: a 5 % test)"
    )
    print(
        f"{'j':>3} {'promotions':>10} {'vs the confirmation run':>24} {'vs the first re-run':>20}"
    )
    for j in (1, 10):
        gate = Calls.draw(rng, p, p + gain, calls, k, kc)
        promoted = np.flatnonzero(gate.promoted(next_level(state_at(j))))
        stored = gate.confirm_cand[promoted]  # the promoted run: the confirmation's
        nights = rng.binomial(kc, p + gain, (2, promoted.size, n))
        old = drift_alarms(stored, nights[0], kc)
        new = drift_alarms(nights[0], nights[1], kc)
        for i in range(min(3, promoted.size)):  # the vectorised rule is drift_report's
            runs = [
                counts_result("cand", r, kc, 100 + t)
                for t, r in enumerate((stored[i], nights[0][i], nights[1][i]))
            ]
            assert (drift_report(runs[0], runs[1], CFG).status == "drifted") == old[i]
            assert (drift_report(runs[1], runs[2], CFG).status == "drifted") == new[i]
        cells = [
            fmt(a.mean(), math.sqrt(a.mean() * (1 - a.mean()) / max(a.size, 1)))
            for a in (old.astype(float), new.astype(float))
        ]
        print(f"{j:>3} {promoted.size:>10} {cells[0]:>24} {cells[1]:>20}")
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a smaller run (~1 min)")
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("--only", choices=["level", "power", "mde", "interval", "drift"], default=None)
    ap.add_argument("--workers", type=int, default=2, help="processes (MDE and interval)")
    ap.add_argument("--worlds", type=int, default=None, help="MDE: worlds a row (80; --quick 20)")
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
        mde_table(ns.seed, ns.worlds or 20 * scale, 200, 100, ns.workers)
    if ns.only in (None, "interval"):
        coverage_table(rng, 1_500 * scale, 200, 0.06, ns.workers)
    if ns.only in (None, "drift"):
        drift_table(rng, 2_000 * scale, 100, 0.10)
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
