"""The confirmation test through the real code: its level in the tails, its power, the MDE the
gate prints, the promoted gain's interval, and the trials the default confirmation's bet needs.

Run: ``python bench/confirm_power.py`` (a few minutes on 2 cores), ``--quick`` for a smaller
run, ``--only`` one table (``--only bet --quick``: the bet's table in the issue's worlds). No
Prefect: trials are simulated with numpy. Tables 1–2 call the confirmation's test
(``confirmation_log_e``) directly. Tables 3–5 make many gate calls per row: their verdicts are
vectorised (the screen's paired rule of ``decide`` and the real ``confirmation_log_e`` at the
ledger's alpha_j), and the first calls of every row also go through the real ``aggregate``,
``decide`` and ``gating.confirm_decision`` (and ``drift_report``), which must agree, or the run
stops. The printed MDE is the real ``gating.gate_power`` on real results; the promoted gain's
interval the real ``selective_gain`` (what ``confirm_decide`` reports as ``gain_ci95``).

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

6. The bet of the default confirmation (``--only bet``; issue 55). Trials to promote in rounds
   of one fresh paired trial a task, until the trial-level e-process (the real
   ``stats._eprocess.log_capital``) reaches 1/alpha_1, against a one-sided fixed-n paired z
   test at the same level and 80 % power: the issue's three binary worlds, then (without
   ``--quick``) binary, skewed (Beta(m, 1 − m)) and heavy-tailed (the mean ± 0.05, one trial in
   ten a 0/1 draw) rewards on 7–50 tasks at the z test's MDE for 30 rounds and twice it. Bets:
   aGRAPA as it was (first 0.2, cap 0.8), ONS, aGRAPA started from an independent screen of
   10 trials a task, the mixture over 16 bets, the mixture the gate runs (0.1, 0.2, 0.4, 0.8),
   and the best constant bet in hindsight (not a valid strategy: a bound for constant bets).
   Then the level of the real stopping rule (``promoted_paths``) in mean-zero worlds at
   1e−2 … 1e−4 (``bench/small_val_gate.py``'s table).

References: Waudby-Smith & Ramdas (2024), JRSS-B 86(1); Lee, Sun, Sun & Taylor (2016), Ann.
Statist. 44(3); Xu & Ramdas (2024), AISTATS; Cutkosky & Orabona (2018), COLT; Shekhar &
Ramdas (2023), IEEE Trans. Inf. Theory 70(3); Chugg et al. (2023), NeurIPS.
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
from small_val_gate import level_table as rounds_level_table

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
from honesteval.stats._eprocess import log_capital

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


# 6. the bet: trials to promote -------------------------------------------------------------------
#
# The default confirmation (rounds of one fresh paired trial a task, the trial-level e-process of
# ``stats._eprocess``) against a one-sided fixed-n paired z test at the same level and 80 % power
# (a lower reference: it knows the variance and is not valid at a data-chosen stop). Each bet
# below is one bet a round over the weak null Σ_t μ_t ≤ 0, predictable; "mixture (now)" is the
# real ``log_capital`` the gate runs, the others are written here to compare.

Z80 = sps.norm.isf(0.2)
#: The first confirmation's level (LORD++ at search_alpha 0.05), as in the issue.
BET_ALPHA = 0.010937
#: The screen's trials a task whose mean and variance the screen-informed bet starts from.
SCREEN_TRIALS = 10
BET_GRID_SEEN = np.arange(0.05, 0.951, 0.05)  # the constant bets the hindsight oracle picks from
FINE_GRID = np.linspace(0.05, 0.8, 16)


@dataclass(frozen=True)
class RewardLaw:
    """A family of reward laws on [0, 1] with a given mean: ``draw`` rewards, ``var`` their
    variance (exact), ``top`` the largest mean the candidate may reach."""

    name: str
    top: float

    def draw(
        self, rng: np.random.Generator, mean: np.ndarray, shape: tuple[int, ...]
    ) -> np.ndarray:
        m = np.broadcast_to(mean, shape)
        if self.name == "binary":
            return (rng.random(shape) < m).astype(float)
        if self.name == "skewed":  # Beta(m, 1 − m): U-shaped, skewed unless m = 1/2
            return rng.beta(m, 1.0 - m)
        # heavy-tailed: the mean ± 0.05 nine times in ten, a 0/1 draw one time in ten
        jitter = m + rng.uniform(-0.05, 0.05, shape)
        return np.where(rng.random(shape) < 0.1, (rng.random(shape) < m).astype(float), jitter)

    def var(self, mean: np.ndarray) -> np.ndarray:
        base = mean * (1.0 - mean)
        if self.name == "binary":
            return base
        if self.name == "skewed":
            return base / 2.0
        out: np.ndarray = 0.9 * (0.1**2 / 12) + 0.1 * base
        return out


LAWS = {
    law.name: law
    for law in (
        RewardLaw("binary", 1.0),
        RewardLaw("skewed", 0.98),
        RewardLaw("heavy-tailed", 0.95),
    )
}


def fixed_n(law: RewardLaw, tasks: int, gain: float) -> tuple[int, float]:
    """The one-sided paired z test's trials at 80 % power and BET_ALPHA (the world's mean gain
    and per-trial variance over a large sample of tasks), and the world's mean gain (less than
    ``gain`` where the candidate's rate is capped)."""
    p = np.random.default_rng(0).uniform(0.2, 0.8, 400_000)
    q = np.minimum(p + gain, law.top)
    mean, var = float(np.mean(q - p)), float(np.mean(law.var(p) + law.var(q)))
    n = (sps.norm.isf(BET_ALPHA) + Z80) ** 2 * var / mean**2
    return math.ceil(n), mean


def fixed_n_mde(law: RewardLaw, tasks: int, rounds: int = 30) -> float:
    """The gain a fixed-n z test of ``rounds`` trials a task finds with 80 % power."""
    low, high = 1e-4, law.top - 0.2
    while high - low > 1e-4:
        mid = (low + high) / 2
        low, high = (mid, high) if fixed_n(law, tasks, mid)[0] > rounds * tasks else (low, mid)
    return high


def _prior_sums(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Σd and Σd² of the rounds before each round: (draws, rounds)."""
    s1, s2 = np.cumsum(d.sum(axis=-1), axis=-1), np.cumsum((d * d).sum(axis=-1), axis=-1)
    zero = np.zeros((d.shape[0], 1))
    return np.hstack([zero, s1[:, :-1]]), np.hstack([zero, s2[:, :-1]])


def _one_bet_log_e(d: np.ndarray, bets: np.ndarray) -> np.ndarray:
    return np.cumsum(np.log1p(bets[..., None] * d).sum(axis=-1), axis=-1)


def agrapa_log_e(d: np.ndarray, screen: np.ndarray) -> np.ndarray:
    """The bet before this issue: λ_1 = 0.2, then clip(m/(v + m²), 0, 0.8) = clip(Σd/Σd²)."""
    s1, s2 = _prior_sums(d)
    with np.errstate(divide="ignore", invalid="ignore"):
        bets = np.clip(np.where(s2 > 0, s1 / s2, 0.0), 0.0, 0.8)
    bets[:, 0] = 0.2
    return _one_bet_log_e(d, bets)


def screen_agrapa_log_e(d: np.ndarray, screen: np.ndarray) -> np.ndarray:
    """aGRAPA started from the screen (its trials independent of the confirmation's): the
    screen's Σd and Σd², at half their weight, added to the confirmation's earlier rounds."""
    s1, s2 = _prior_sums(d)
    weight = 0.5
    s1 = s1 + weight * screen.sum(axis=(1, 2))[:, None]
    s2 = s2 + weight * (screen * screen).sum(axis=(1, 2))[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        bets = np.clip(np.where(s2 > 0, s1 / s2, 0.0), 0.0, 0.8)
    return _one_bet_log_e(d, bets)


def ons_log_e(d: np.ndarray, screen: np.ndarray) -> np.ndarray:
    """Online Newton step on the round's log-factor (Cutkosky & Orabona 2018, as in
    Waudby-Smith & Ramdas 2024 §5.3): λ_1 = 0.2, λ ← clip(λ − 2/(2 − log 3)·g/(1 + Σg²))."""
    draws, rounds, _ = d.shape
    bets, bet, acc = np.empty((draws, rounds)), np.full(draws, 0.2), np.ones(draws)
    for r in range(rounds):
        bets[:, r] = bet
        g = -(d[:, r] / (1.0 + bet[:, None] * d[:, r])).sum(axis=-1)
        acc += g * g
        bet = np.clip(bet - 2.0 / (2.0 - math.log(3.0)) * g / acc, 0.0, 0.8)
    return _one_bet_log_e(d, bets)


def mixture_log_e(d: np.ndarray, screen: np.ndarray) -> np.ndarray:
    """The default confirmation's capital: the real ``log_capital`` (bets 0.1, 0.2, 0.4, 0.8)."""
    return log_capital(d)


def fine_mixture_log_e(d: np.ndarray, screen: np.ndarray) -> np.ndarray:
    """The same mixture over a finer grid: 16 bets 0.05, 0.10, …, 0.80."""
    gamblers = np.stack([_one_bet_log_e(d, np.full(d.shape[:2], b)) for b in FINE_GRID])
    out: np.ndarray = np.logaddexp.reduce(gamblers, axis=0) - math.log(FINE_GRID.size)
    return out


BETS = {
    "aGRAPA (before)": agrapa_log_e,
    "ONS": ons_log_e,
    "aGRAPA + screen": screen_agrapa_log_e,
    "mixture of 16": fine_mixture_log_e,
    "mixture (now)": mixture_log_e,
}
CHOSEN, BEFORE = "mixture (now)", "aGRAPA (before)"


def crossing_rounds(log_e: np.ndarray) -> np.ndarray:
    """The first round with E ≥ 1/alpha per draw (inf: none within the rounds simulated)."""
    hit = log_e >= math.log(1.0 / BET_ALPHA)
    return np.where(hit.any(axis=-1), hit.argmax(axis=-1) + 1.0, np.inf)


def bet_world(
    law: RewardLaw, tasks: int, gain: float, draws: int, rounds: int, seed: int
) -> dict[str, np.ndarray]:
    """Rounds to promote per draw for every bet (and the best constant bet in hindsight)."""
    rng = np.random.default_rng(seed)
    out: dict[str, list[np.ndarray]] = {name: [] for name in BETS}
    constant: list[np.ndarray] = []
    for size in np.diff(
        np.linspace(0, draws, max(2, draws * rounds * tasks // 2_000_000 + 2), dtype=int)
    ):
        p = rng.uniform(0.2, 0.8, (size, 1, tasks))
        q = np.minimum(p + gain, law.top)
        d = law.draw(rng, q, (size, rounds, tasks)) - law.draw(rng, p, (size, rounds, tasks))
        screen = law.draw(rng, q, (size, SCREEN_TRIALS, tasks)) - law.draw(
            rng, p, (size, SCREEN_TRIALS, tasks)
        )
        for name, bet in BETS.items():
            out[name].append(crossing_rounds(bet(d, screen)))
        constant.append(
            np.stack(
                [crossing_rounds(_one_bet_log_e(d, np.full(d.shape[:2], b))) for b in BET_GRID_SEEN]
            )
        )
    result = {name: np.concatenate(v) for name, v in out.items()}
    each = np.concatenate(constant, axis=1)  # (constant bets, draws)
    q80 = np.quantile(each, 0.8, axis=1, method="higher")
    result["best constant (hindsight)"] = each[int(np.argmin(q80))]
    return result


def quantile_cell(rounds_to_promote: np.ndarray, tasks: int, q: float) -> str:
    """The q-quantile in paired trials (rounds), with the order statistics' 95 % interval."""
    x = np.sort(rounds_to_promote)
    n = x.size
    half = 1.96 * math.sqrt(n * q * (1 - q))
    lo, mid, hi = (x[min(n - 1, max(0, math.ceil(n * q + s) - 1))] for s in (-half, 0, half))

    def trials(v: float) -> str:
        return "never" if math.isinf(v) else f"{v * tasks:.0f}"

    return f"{trials(mid)} ({trials(lo)}–{trials(hi)})"


def bet_row(name: str, rounds_to_promote: np.ndarray, tasks: int, n_fixed: int) -> str:
    target = math.floor(1.5 * n_fixed / tasks)  # rounds within 1.5 × the fixed-n trials
    within = float(np.mean(rounds_to_promote <= target))
    se = math.sqrt(within * (1 - within) / rounds_to_promote.size)
    q80 = float(np.quantile(rounds_to_promote, 0.8, method="higher"))
    ratio = "—" if math.isinf(q80) else f"{q80 * tasks / n_fixed:.2f}×"
    return (
        f"| {name} | {quantile_cell(rounds_to_promote, tasks, 0.5)} | "
        f"{quantile_cell(rounds_to_promote, tasks, 0.8)} | {ratio} | {fmt(within, se)} |"
    )


def _round_counts(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """P(N₊ = i, N₋ = j) for one round of binary paired trials on tasks with rates p (best)
    and q (candidate): N₊ the trials with Δ = +1, N₋ those with Δ = −1."""
    law = np.ones((1, 1))
    for pt, qt in zip(p, q, strict=True):
        up, down = qt * (1 - pt), pt * (1 - qt)
        grown = np.zeros((law.shape[0] + 1, law.shape[1] + 1))
        grown[:-1, :-1] += law * (1 - up - down)
        grown[1:, :-1] += law * up
        grown[:-1, 1:] += law * down
        law = grown
    return law


def deadline_bound(
    tasks: int, gain: float, rounds: int, draws: int, seed: int
) -> tuple[float, float]:
    """The best P(promoted within ``rounds``) of any one-bet-a-round bet
    Π_r Π_t (1 + λ_r d_{t,r}), λ_r chosen after each round with the task rates known (± its MC
    SE over ``draws`` draws of the rates; binary rewards, as the issue's worlds): dynamic
    programming over the log capital, backwards from the last round, each round's best λ
    among 45 in [0, 0.99], the log capital rounded up to a grid of 901 points (optimistic)."""
    bar = math.log(1.0 / BET_ALPHA)
    bets = np.linspace(0.0, 0.99, 45)
    grid = np.linspace(-10.0, bar, 901)
    rng = np.random.default_rng(seed)
    values = []
    for _ in range(draws):
        p = rng.uniform(0.2, 0.8, tasks)
        law = _round_counts(p, np.minimum(p + gain, 1.0))
        ups, downs = np.nonzero(law > 1e-15)
        steps = ups * np.log1p(bets)[:, None] + downs * np.log1p(-bets)[:, None]  # (bets, …)
        value = (grid >= bar).astype(float)
        for _ in range(rounds):
            after = grid[:, None, None] + steps[None]
            above = np.minimum(np.searchsorted(grid, after), grid.size - 1)
            reached = np.where(after >= bar, 1.0, np.where(after < grid[0], 0.0, value[above]))
            value = (reached * law[ups, downs]).sum(axis=-1).max(axis=-1)
        values.append(value[np.searchsorted(grid, 0.0)])
    return float(np.mean(values)), float(np.std(values) / math.sqrt(draws))


def bet_table(draws: int, survey: bool, seed: int) -> None:
    """The issue's three worlds, then (``survey``) every law × 7–50 tasks × the fixed-n MDE
    at 30 rounds and twice it."""
    worlds = [("binary", t, g, None) for t, g in ((12, 0.2), (7, 0.5), (20, 0.1))]
    if survey:
        for law in LAWS:
            for tasks in (7, 12, 20, 50):
                mde = fixed_n_mde(LAWS[law], tasks)
                worlds += [(law, tasks, mde, "MDE"), (law, tasks, 2 * mde, "2× MDE")]
    print(
        f"6. trials to promote: the confirmation's bets at alpha_1 = {BET_ALPHA} ({draws} draws "
        "a world; best-side rates U(0.2, 0.8), the candidate's + gain (capped); trials in "
        "pairs, rounds × tasks; (…–…): the order statistics' 95 % interval; last column: "
        "P(promoted within 1.5 × the fixed-n trials) ± MC SE, the target is ≥ 0.8)"
    )
    for i, (law, tasks, gain, label) in enumerate(worlds):
        n_fixed, mean = fixed_n(LAWS[law], tasks, gain)
        rounds = math.ceil(4 * n_fixed / tasks) + 5
        got = bet_world(LAWS[law], tasks, gain, draws, rounds, seed + i)
        what = f" ({label})" if label else ""
        print(
            f"\n{law}, {tasks} tasks × gain {gain:+.3f}{what}, mean gain {mean:.3f}: fixed-n z "
            f"test {n_fixed} paired trials; 1.5× = {math.floor(1.5 * n_fixed / tasks)} rounds"
        )
        print("| bet | median trials | 80th percentile | 80th / fixed | within 1.5× |")
        print("|---|---|---|---|---|")
        for name, rounds_to_promote in got.items():
            print(bet_row(name, rounds_to_promote, tasks, n_fixed), flush=True)
        if label is None:  # the three worlds: can any one-bet-a-round bet get there?
            within = math.floor(1.5 * n_fixed / tasks)
            # 60 draws of the rates (20 at 20 tasks, ~13 s a draw); --quick: 10 (4)
            dp_draws = (10 if draws < 2_000 else 60) // (3 if tasks >= 20 else 1)
            bound, se = deadline_bound(tasks, gain, within, dp_draws, seed)
            print(
                f"any one-bet-a-round bet, adaptive and knowing the rates: P(promoted within "
                f"{within} rounds) ≤ {bound:.3f} ± {se:.3f} (dynamic programming, mean over "
                f"{dp_draws} draws of the rates ± MC SE)"
            )
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a smaller run (~1 min)")
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument(
        "--only", choices=["level", "power", "mde", "interval", "drift", "bet"], default=None
    )
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
    if ns.only in (None, "bet"):
        bet_table(1_000 if ns.quick else 2_000, survey=not ns.quick, seed=ns.seed)
        rounds_level_table(5_000 * scale)
    print(f"({time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
