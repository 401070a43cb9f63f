"""The staged screen's cost per gate call, at the printed MDE and at no gain.

Run: ``python bench/screen_per_call.py`` (``--calls N`` a cell, default 20,000; ``--quick``
4,000). No Prefect: one gate call is a screen of K rounds of one binary trial a task, then
(if it passed) the default confirmation in rounds on fresh trials, budget 3K, at alpha_1. The
screen's verdicts are the real rule (``staged_verdicts`` on the paired z = Δ/SE of the rounds
so far, as ``decide`` computes it without clusters; unstaged: the full screen's z above the
bar 1), the confirmation is the real ``promoted_paths``. Staged and unstaged arms score the
same trials (common random numbers), so their difference has a paired MC SE.

Worlds: binary rewards, task pass rates U(0.2, 0.7), the candidate +g on every task, at
12 tasks × 10 trials and 7 × 3. The true gain g is the MDE the gate prints for that design
(the real ``promotion_mde`` of the staged two-stage gate with the world's variances: no gain
spread, within-trial variance 2·E[p(1 − p)] = 0.4533), and 0.

Prints per cell: P(promote) unstaged and staged at each futility threshold (efficacy 0.9),
their paired difference, and the candidate's screen trials and all trials (screen plus both
sides of the confirmation) per call, staged over unstaged, each ± one MC SE.

References: Lan, Simon & Halperin (1982), Sequential Analysis 1(3); Waudby-Smith & Ramdas
(2024), JRSS-B 86(1).
"""

from __future__ import annotations

import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
from _common import run_size

from honesteval.stats import GateDesign, new_online_state, next_level, promoted_paths
from honesteval.stats import promotion_mde as printed_mde
from honesteval.stats._gate_power import paired_z
from honesteval.stats._screen_stop import ScreenStopping, staged_verdicts

SIGMA2 = 2 * (0.45 - (0.7**3 - 0.2**3) / 1.5)  # 2·E[p(1 − p)], p ~ U(0.2, 0.7)
BAR = 1.0  # the screen's default bar, k_se = 1
EFFICACY = 0.9
FUTILITIES = (0.05, 0.02, 0.01, 0.001)


def mean_se(x: np.ndarray) -> str:
    return f"{x.mean():.3f} ± {x.std(ddof=1) / math.sqrt(x.size):.3f}"


def ratio_se(a: np.ndarray, b: np.ndarray) -> str:
    """mean(a)/mean(b) with its paired delta-method SE."""
    r = a.mean() / b.mean()
    return f"{r:.3f} ± {(a - r * b).std(ddof=1) / math.sqrt(a.size) / b.mean():.3f}×"


def calls(rng: np.random.Generator, n: int, tasks: int, trials: int, g: float, level: float):
    """One row per gate call: the screen's per-round z, and whether a confirmation promotes."""
    p = rng.uniform(0.2, 0.7, (n, 1, tasks))
    q = np.minimum(p + g, 1.0)

    def deltas(rounds: int) -> np.ndarray:
        shape = (n, rounds, tasks)
        return (rng.random(shape) < q).astype(float) - (rng.random(shape) < p)

    screen = np.cumsum(deltas(trials), axis=1) / np.arange(1, trials + 1)[None, :, None]
    z = paired_z(screen).T  # (rounds, calls)
    promoted, used = promoted_paths(deltas(3 * trials), level)
    return z, promoted, used


def cell(seed: int, tasks: int, trials: int, g: float, level: float, n: int) -> list[str]:
    z, confirmed, used = calls(np.random.default_rng(seed), n, tasks, trials, g, level)
    unstaged_pass = z[-1] > BAR
    base_promote = (unstaged_pass & confirmed).astype(float)
    base_screen = np.full(n, float(tasks * trials))
    base_total = base_screen + unstaged_pass * 2 * tasks * used
    rows = [f"    unstaged            P(promote) {mean_se(base_promote)}"]
    for futility in FUTILITIES:
        passed, rounds = staged_verdicts(z, BAR, ScreenStopping(futility, EFFICACY))
        promote = (passed & confirmed).astype(float)
        screen = tasks * rounds.astype(float)
        total = screen + passed * 2 * tasks * used
        rows.append(
            f"    staged, futility {futility:<4g} P(promote) {mean_se(promote)}  "
            f"staged − unstaged {mean_se(promote - base_promote)}  screen trials "
            f"{ratio_se(screen, base_screen)}  all trials {ratio_se(total, base_total)}"
        )
    return rows


def main() -> None:
    n = run_size(__doc__ or "", "calls", 20_000, 4_000)
    level = next_level(new_online_state())
    print(f"staged screen per call, alpha_1 = {level:.4g}, {n} calls a cell, efficacy {EFFICACY}")
    for index, (tasks, trials) in enumerate(((12, 10), (7, 3))):
        started = time.perf_counter()
        design = GateDesign(
            omega2=0.0,
            sigma2=SIGMA2,
            n_obs=tasks,
            screen_trials=trials,
            confirm_trials=3 * trials,
            screen_bar=BAR,
            level=level,
            screen_stopping=ScreenStopping(FUTILITIES[0], EFFICACY),
            rounds=True,
        )
        mde = printed_mde(design)
        if mde is None:
            print(f"{tasks}×{trials}: no gain up to 1 is promoted with 80 % power")
            continue
        for g in (mde, 0.0):
            label = f"the printed MDE {mde:.4f}" if g else "no gain"
            print(f"{tasks} tasks × {trials} trials, true gain {label}:")
            for row in cell(35_100 + index, tasks, trials, g, level, n):
                print(row)
        print(f"  [{time.perf_counter() - started:.0f} s]", flush=True)


if __name__ == "__main__":
    main()
