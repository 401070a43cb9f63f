"""Issue 33: does the default gate promote a real gain at the sizes users have, and does the
confirmation in rounds keep its level?

``python bench/small_val_gate.py`` (``--quick`` for a smaller run; ``--only power|level``).

**Power, through the real API** (``honesteval.gate(..., orchestration="local")``): a fresh
project per repetition, binary rewards, each val task's success rate drawn in [0.2, 0.8], the
candidate adding the gain to every task's rate (capped at 1), its draws independent of the
best's (each side draws its own uniform per task and seed), the default config (staged screen,
confirmation in rounds at j = 1, ``search_alpha`` 0.05). It reports the share promoted with
its exact 95 % Clopper–Pearson interval, the verdicts (ACCEPT / REJECT / INDECISIVE), the
mean confirmation trials per promotion against the 3× fixed confirmation it replaces
(2 sides × tasks × 3 × the screen's trials), and with ``--with-null`` beside each power row
the same world with no gain (promoted at most alpha_1 = 0.0109 of the time).

**Level, through the real e-process** (``honesteval.stats.promoted_paths``, the stopping rule
the gate runs: promote at the first crossing, futility, budget): mean-zero worlds that are not
"no gain on any task" (half the tasks +0.3, half −0.3; the whole gain on one task; a small
gain on most tasks and a large loss on two; clusters sharing their rates), binary
rewards, at 12 tasks × 30 rounds and 7 × 9 (the budgets of 12 × 10 and 7 × 3), at alpha 1e−2
by direct simulation and 1e−3, 1e−4 by importance sampling (each trial's law exponentially
tilted, every path weighted by its likelihood ratio up to its stopping round): rejection rate
÷ alpha with its MC standard error. ``tests/unit/test_eprocess.py`` checks the level exactly
by enumeration on small cases.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import share_text

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import honesteval
from honesteval.stats import promoted_paths

TARGET = """\
import random
from pathlib import Path


def run(task, candidate_dir, seed):
    gain = float((Path(candidate_dir) / "gain.txt").read_text())
    side = Path(candidate_dir).name
    u = random.Random(f"{task['id']}|{seed}|{side}").random()
    return u < min(1.0, task["input"] + gain)


def score(task, output):
    return {"reward": 1.0 if output else 0.0}
"""

POWER_ROWS = [  # (val tasks, trials, true gain on every task)
    (12, 10, 0.2),
    (12, 10, 0.1),
    (7, 3, 0.5),
    (7, 3, 0.3),
    (30, 3, 0.1),
]


def _project(rng: np.random.Generator, n_tasks: int, trials: int, gain: float) -> Path:
    root = Path(tempfile.mkdtemp(prefix="honesteval-smallval-"))
    rates = rng.uniform(0.2, 0.8, n_tasks)
    tasks = [{"id": f"t{i:02d}", "input": float(r)} for i, r in enumerate(rates)]
    (root / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    ids = [t["id"] for t in tasks]
    (root / "honesteval.yaml").write_text(
        json.dumps(
            {
                "name": "smallval",
                "tasks": "tasks.jsonl",
                "splits": {"train": [], "val": ids, "test": []},
                "adapter": {"kind": "python", "target": "target:run", "scorer": "target:score"},
                "trials": trials,
                "retries": 0,
                "max_concurrency": 4,
            }
        )
    )
    (root / "target.py").write_text(TARGET)
    for name, g in (("best", 0.0), ("cand", gain)):
        (root / "candidates" / name).mkdir(parents=True)
        (root / "candidates" / name / "gain.txt").write_text(f"{g}\n")
    return root


def _verdict(d: honesteval.GateDecision) -> str:
    return "ACCEPT" if d.accept else ("INDECISIVE" if d.indecisive else "REJECT")


def _row(n: int, k: int, gain: float, reps: int, seed: int) -> dict[str, object]:
    rng = np.random.default_rng(seed)
    verdicts: dict[str, int] = {"ACCEPT": 0, "REJECT": 0, "INDECISIVE": 0}
    trials: list[int] = []
    for _ in range(reps):
        root = _project(rng, n, k, gain)
        try:
            honesteval.gate(root, "best", orchestration="local")
            d = honesteval.gate(root, "cand", orchestration="local")
        finally:
            shutil.rmtree(root, ignore_errors=True)
        verdicts[_verdict(d)] += 1
        if d.accept and d.confirm_rounds is not None:
            trials.append(2 * n * d.confirm_rounds)
    return {
        "promoted": share_text(verdicts["ACCEPT"], reps),
        "verdicts": verdicts,
        "confirm_trials": float(np.mean(trials)) if trials else None,
        "fixed_trials": 2 * n * 3 * k,
    }


def power_table(reps: int, with_null: bool) -> None:
    print(f"## Power through the real gate ({reps} fresh projects a row, j = 1)\n")
    print(
        "| val tasks × trials | gain | promoted (95 % Clopper–Pearson) "
        "| ACCEPT / REJECT / INDECISIVE "
        "| confirmation trials per promotion (fixed 3×) | no gain: promoted (95 % CP) |"
    )
    print("|---|---|---|---|---|---|")
    for i, (n, k, gain) in enumerate(POWER_ROWS):
        t0 = time.time()
        real = _row(n, k, gain, reps, seed=1000 + i)
        null = _row(n, k, 0.0, reps, seed=2000 + i) if with_null else None
        v = real["verdicts"]
        assert isinstance(v, dict)
        per = real["confirm_trials"]
        per_text = "—" if per is None else f"{per:.0f} ({real['fixed_trials']})"
        print(
            f"| {n} × {k} | +{gain:g} | {real['promoted']} | "
            f"{v['ACCEPT']} / {v['REJECT']} / {v['INDECISIVE']} | {per_text} | "
            + ("—" if null is None else str(null["promoted"]))
            + " |",
            flush=True,
        )
        print(f"<!-- row took {time.time() - t0:.0f} s -->", file=sys.stderr)


def _world(name: str, rng: np.random.Generator, draws: int, tasks: int) -> np.ndarray:
    """(best rate, candidate rate) per draw and task: mean gain 0 over the tasks."""
    idx = np.arange(tasks)
    if name.startswith("half"):  # +0.3 on half the tasks, the rest share −0.3 (−0.225 at 7)
        up = tasks // 2
        p = rng.uniform(0.35, 0.65, (draws, tasks))
        return np.stack([p, p + np.where(idx < up, 0.3, -0.3 * up / (tasks - up))])
    if name.startswith("one task"):  # the whole gain on task 0: +0.05 × (tasks − 1) there
        p = rng.uniform(0.2, 0.8, (draws, tasks))
        p[:, 0] = rng.uniform(0.2, 0.4, draws)
        return np.stack([p, p + np.where(idx == 0, 0.05 * (tasks - 1), -0.05)])
    if name.startswith("skewed"):  # +0.05 on all but 2, a large loss on those 2
        p = rng.uniform(0.3, 0.7, (draws, tasks))
        return np.stack([p, p + np.where(idx < tasks - 2, 0.05, -0.025 * (tasks - 2))])
    # clustered: the tasks of a cluster share a rate; +0.2 on the first, the others pay it back
    sizes = (4, 4, 4) if tasks == 12 else (3, 2, 2)
    assert sum(sizes) == tasks
    rate = rng.uniform(0.3, 0.7, (draws, len(sizes))).repeat(sizes, axis=1)
    shift = np.where(idx < sizes[0], 0.2, -0.2 * sizes[0] / (tasks - sizes[0]))
    return np.stack([rate, rate + shift])


LEVEL_WORLDS = [
    "half the tasks +0.3, half −0.3",
    "one task +0.55, the rest −0.05",
    "skewed: +0.05 on all but 2, −0.25 on 2",
    "clustered: 3 clusters share a rate (4/4/4; 3/2/2 at 7), +0.2 on the first",
]
LEVEL_SIZES = [(12, 10), (7, 3)]  # (val tasks, screen trials): budget 3 × trials rounds
LEVEL_ALPHAS = [1e-2, 1e-3, 1e-4]


def tilt(best: np.ndarray, cand: np.ndarray, theta: float) -> tuple[np.ndarray, ...]:
    """The exponential tilt Q(d) ∝ P(d)·e^{θd} of each paired binary trial's law P (the two
    sides independent, success rates ``best`` and ``cand``): (Q(d = +1), Q(d = −1),
    log M(θ) = log E_P e^{θd}), elementwise."""
    up, down = cand * (1 - best), best * (1 - cand)  # P(d = +1), P(d = −1)
    m = up * math.exp(theta) + down * math.exp(-theta) + (1 - up - down)
    return up * math.exp(theta) / m, down * math.exp(-theta) / m, np.log(m)


def promotion_weights(d: np.ndarray, log_m: np.ndarray, theta: float, alpha: float) -> np.ndarray:
    """1{promoted}·LR_τ per path of deltas (draws, rounds, tasks) drawn under :func:`tilt`:
    the real ``promoted_paths`` decides, and the likelihood ratio dP/dQ of a path's first τ
    rounds (τ its stopping round) is exp(τ·Σ_t log M_t − θ·Σ_{r ≤ τ} d). The promotion is
    decided by those rounds alone, so E_Q[weight] = P(promote) exactly (θ = 0: direct)."""
    promoted, used = promoted_paths(d, alpha)
    s = np.cumsum(d.sum(axis=-1), axis=-1)[np.arange(d.shape[0]), used - 1]
    out: np.ndarray = np.where(promoted, np.exp(used * log_m.sum(axis=-1) - theta * s), 0.0)
    return out


def _level_cell(
    name: str, tasks: int, rounds: int, alpha: float, draws: int, seed: int
) -> tuple[float, float]:
    """(rejection rate ÷ alpha, its MC SE) by importance sampling through the real
    ``promoted_paths``; the tilt θ chosen by a separate pilot (fewest relative SE)."""
    rng = np.random.default_rng(seed)
    chunk = 10_000

    def weights(theta: float, n: int) -> np.ndarray:
        out = []
        for _ in range(max(1, n // chunk)):
            best, cand = _world(name, rng, chunk, tasks)
            assert np.allclose((cand - best).sum(axis=-1), 0.0)
            q_up, q_down, log_m = tilt(best, cand, theta)
            u = rng.random((chunk, rounds, tasks))
            d = (u < q_up[:, None, :]).astype(float) - (u > 1 - q_down[:, None, :])
            out.append(promotion_weights(d, log_m, theta, alpha))
        return np.concatenate(out)

    def rel_se(w: np.ndarray) -> float:
        return float(w.std() / w.mean()) if w.mean() > 0 else math.inf

    grid = [0.0] if alpha >= 1e-2 else [0.15, 0.3, 0.5, 0.8]
    theta = min(grid, key=lambda t: rel_se(weights(t, chunk))) if len(grid) > 1 else 0.0
    w = weights(theta, draws)
    return float(w.mean() / alpha), float(w.std() / math.sqrt(w.size) / alpha)


def level_table(draws: int) -> None:
    print(
        f"\n## Level of the confirmation in rounds ({draws:,} paths a cell; 1e−2 direct, "
        "1e−3 and 1e−4 importance-sampled)\n"
    )
    print(
        "| world | val tasks × rounds | "
        + " | ".join(f"alpha {a:.0e}: rate ÷ alpha" for a in LEVEL_ALPHAS)
        + " |"
    )
    print("|---|---|" + "---|" * len(LEVEL_ALPHAS))
    for w, name in enumerate(LEVEL_WORLDS):
        for tasks, trials in LEVEL_SIZES:
            rounds = 3 * trials
            cells = [
                "{:.3g} ± {:.2g}".format(
                    *_level_cell(name, tasks, rounds, a, draws, seed=7 + 100 * w + i + tasks)
                )
                for i, a in enumerate(LEVEL_ALPHAS)
            ]
            print(f"| {name} | {tasks} × {rounds} | " + " | ".join(cells) + " |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--quick", action="store_true", help="20 projects a row, 20,000 paths a level cell"
    )
    ap.add_argument("--only", choices=["power", "level"])
    ap.add_argument("--reps", type=int, default=None, help="projects a power row")
    ap.add_argument("--with-null", action="store_true", help="each power row with no gain too")
    args = ap.parse_args()
    reps = args.reps or (20 if args.quick else 100)
    if args.only in (None, "power"):
        power_table(reps, args.with_null)
    if args.only in (None, "level"):
        level_table(20_000 if args.quick else 100_000)


if __name__ == "__main__":
    main()
