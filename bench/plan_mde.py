"""``plan``'s printed MDE against the promotion rate of the gate it prices.

Run: ``.venv/bin/python bench/plan_mde.py [--calls N] [--quick]`` (2,000 gate calls a gain;
``--quick`` 400). No Prefect, no target: a project whose only stored val result is the best's
(a search before its first paired comparison) gets the real ``plan_sample_size`` MDE at
alpha_1 (on each of 5 such results: their median and range; one result's variances are a
noisy measurement); then gate calls are simulated from the world itself (not from plan's
model) and decided by the gate's own rules: the staged screen on the paired z after each round
(:func:`honesteval.stats.staged_verdicts`, the default bar and stops), then the confirmation
in rounds on fresh trials (:func:`honesteval.stats.promoted_paths` at alpha_1, the default
budget of 3 × the screen's trials).

Worlds: task pass rates (or mean rewards) spread evenly over [0.2, 0.8], so task difficulty is
most of a candidate's between-task variance and cancels in a pair; rewards continuous (Beta,
concentration 8: within-task SD about 0.15) or binary; the candidate gains alike on every
task (as far as the reward range allows; the gains are mean gains). Printed: plan's MDE, the
gate's promotion rate at it and at ±0.1 (MC SE beside), and the
gain the gate promotes with 80 % probability (linear between the grid's gains around it).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import make_project, simulated_result

from honesteval.gating.power import plan_sample_size
from honesteval.models import GateConfig
from honesteval.project.loader import load_project
from honesteval.stats import (
    new_online_state,
    next_level,
    promoted_paths,
    screen_stopping,
    staged_rule,
)
from honesteval.stats._gate_power import paired_z
from honesteval.stats._screen_stop import staged_verdicts
from honesteval.store.state_dir import Store

CFG = GateConfig()
LEVEL = next_level(new_online_state(CFG.online_rule, CFG.search_alpha))  # alpha_1
CONCENTRATION = 8.0
GRID = np.round(np.arange(0.0, 0.61, 0.025), 3)
#: Pilot results plan is run on, a world: its MDE moves with what one result measured.
PILOTS = 5


def task_means(n_tasks: int) -> np.ndarray:
    return np.linspace(0.2, 0.8, n_tasks)


def candidate_means(means: np.ndarray, gain: float) -> np.ndarray:
    """Every task shifted alike, as far as its rewards allow, so that the mean gain is
    ``gain`` (a task near the top gains less, the others make up for it)."""
    low, high = gain, 1.0
    for _ in range(60):  # bisection on the shift
        mid = 0.5 * (low + high)
        if np.mean(np.clip(means + mid, 0.01, 0.99) - np.clip(means, 0.01, 0.99)) < gain:
            low = mid
        else:
            high = mid
    return np.clip(means + high, 0.01, 0.99)


def rewards(
    rng: np.random.Generator, means: np.ndarray, shape: tuple[int, ...], binary: bool
) -> np.ndarray:
    """Trial rewards with these per-task means (last axis), shaped ``shape`` + (tasks,)."""
    m = np.broadcast_to(np.clip(means, 0.01, 0.99), (*shape, means.size))
    if binary:
        return (rng.random(m.shape) < m).astype(float)
    return rng.beta(m * CONCENTRATION, (1 - m) * CONCENTRATION)


def plan_mde(n_tasks: int, trials: int, binary: bool, seed: int) -> float | None:
    """The real ``plan``'s MDE at alpha_1, on a project whose only val result is the best's."""
    root = make_project(n_tasks, "pass", name="plan-mde", trials=trials)
    rng = np.random.default_rng(seed)
    best = rewards(rng, task_means(n_tasks), (trials,), binary).T  # (tasks, trials)
    project = load_project(root)
    project.frozen_split()  # frozen before a result is stored, as a first run does
    Store(project.state_dir).write_result(simulated_result("c", best, 0))
    mde: float | None = plan_sample_size(root, 0.1)["mde_current"]
    return mde


def gate_power(
    n_tasks: int, trials: int, binary: bool, gain: float, calls: int, seed: int
) -> float:
    """P(promoted) of ``calls`` gate calls, a candidate ``gain`` better on every task."""
    rng = np.random.default_rng(seed)
    means = task_means(n_tasks)
    budget = CFG.confirm_budget(trials)
    cand = candidate_means(means, gain)
    screen = rewards(rng, cand, (calls, trials), binary) - rewards(
        rng, means, (calls, trials), binary
    )
    partial = np.cumsum(screen, axis=1) / np.arange(1, trials + 1)[None, :, None]
    z = paired_z(np.moveaxis(partial, 1, 0))  # (rounds, calls): the screen after each round
    rule = staged_rule(screen_stopping(CFG), trials)
    if rule is None:
        passed = z[-1] > CFG.k_se
    else:
        passed, _ = staged_verdicts(z, CFG.k_se, rule)
    confirm = rewards(rng, cand, (calls, budget), binary) - rewards(
        rng, means, (calls, budget), binary
    )
    promoted, _ = promoted_paths(confirm, LEVEL)
    return float(np.mean(passed & promoted))


def gain_at_80(powers: list[float]) -> float | None:
    """The gain promoted with 80 % probability, linear between the grid's gains around it."""
    for i in range(1, len(GRID)):
        if powers[i] >= 0.8 > powers[i - 1]:
            frac = (0.8 - powers[i - 1]) / (powers[i] - powers[i - 1])
            return float(GRID[i - 1] + frac * (GRID[i] - GRID[i - 1]))
    return None


def cell(p: float, calls: int) -> str:
    return f"{p:.3f} ± {np.sqrt(p * (1 - p) / calls):.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=2_000)
    parser.add_argument("--quick", action="store_true", help="400 gate calls a gain")
    args = parser.parse_args()
    calls = 400 if args.quick else args.calls
    tempfile.tempdir = tempfile.mkdtemp(prefix="honesteval-plan-mde-")
    t0 = time.perf_counter()
    print(f"{calls} gate calls a gain; alpha_1 = {LEVEL:.4g}\n")
    print(
        "| world | plan's MDE, median (range) | P(promote) at MDE − 0.1 | at MDE | at MDE + 0.1 "
        "| gain promoted 80 % | within 0.1 |"
    )
    print("|---|---|---|---|---|---|---|")
    for n_tasks, trials in ((12, 10), (7, 3)):
        for binary in (False, True):
            world = f"{n_tasks} × {trials} {'binary' if binary else 'continuous'}"
            pilots = [plan_mde(n_tasks, trials, binary, seed=p) for p in range(PILOTS)]
            powers = [gate_power(n_tasks, trials, binary, g, calls, 7) for g in GRID]
            g80 = gain_at_80(powers)
            found = [m for m in pilots if m is not None]
            if len(found) < len(pilots):
                print(f"| {world} | none up to 1 in some pilot | | | | {g80} | |")
                continue
            mde = float(np.median(found))
            spread = f"{mde:.4f} ({min(found):.3f}–{max(found):.3f})"
            at = [
                cell(gate_power(n_tasks, trials, binary, g, calls, 7), calls) if g > 0 else "-"
                for g in (mde - 0.1, mde, mde + 0.1)
            ]
            close = "yes" if g80 is not None and abs(mde - g80) <= 0.1 else "NO"
            at80 = "above the grid" if g80 is None else f"{g80:.3f}"
            print(f"| {world} | {spread} | {' | '.join(at)} | {at80} | {close} |")
    print(f"\n{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
