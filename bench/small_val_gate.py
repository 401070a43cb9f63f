"""Issue 33: does the default gate promote a real gain at the sizes users have, and does the
confirmation in rounds keep its level?

``python bench/small_val_gate.py`` (``--quick`` for a smaller run; ``--only power|level``).

**Power, through the real API** (``honesteval.gate(..., orchestration="local")``): a fresh
project per repetition, binary rewards, each val task's success rate drawn in [0.2, 0.8], the
candidate adding the gain to every task's rate (capped at 1), its draws independent of the
best's (each side draws its own uniform per task and seed), the default config (staged screen,
confirmation in rounds at j = 1, ``search_alpha`` 0.05). It reports the share promoted with its
binomial MC standard error, the verdicts (ACCEPT / REJECT / INDECISIVE), the mean confirmation
trials per promotion against the 3× fixed confirmation it replaces (2 sides × tasks × 3 ×
the screen's trials), and with ``--with-null`` beside each power row the same world with no
gain (promoted at most alpha_1 = 0.0109 of the time).

**Level, through the real e-process** (``honesteval.stats.promoted_paths``, the stopping rule
the gate runs, and ``trial_log_e``'s running maximum): mean-zero worlds that are not "no gain on
any task" (half the tasks +0.3, half −0.3; the whole gain on one task; a small gain on most
tasks and a large loss on a few; tasks in clusters sharing their rates), 12 tasks × 30 rounds,
binary rewards, at alpha 1e−2 and 1e−3 by direct simulation: rejection rate ÷ alpha with its MC
standard error. (1e−4 needs ~10⁷ paths a world: left out; the level is a theorem, the exact
enumeration in ``tests/unit/test_eprocess.py`` checks it.)
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
    p = verdicts["ACCEPT"] / reps
    return {
        "promoted": p,
        "se": math.sqrt(max(p * (1 - p), 1e-12) / reps),
        "verdicts": verdicts,
        "confirm_trials": float(np.mean(trials)) if trials else None,
        "fixed_trials": 2 * n * 3 * k,
    }


def power_table(reps: int, with_null: bool) -> None:
    print(f"## Power through the real gate ({reps} fresh projects a row, j = 1)\n")
    print(
        "| val tasks × trials | gain | promoted ± MC SE | ACCEPT / REJECT / INDECISIVE "
        "| confirmation trials per promotion (fixed 3×) | no gain: promoted ± MC SE |"
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
            f"| {n} × {k} | +{gain:g} | {real['promoted']:.3f} ± {real['se']:.3f} | "
            f"{v['ACCEPT']} / {v['REJECT']} / {v['INDECISIVE']} | {per_text} | "
            + ("—" if null is None else f"{null['promoted']:.3f} ± {null['se']:.3f}")
            + " |",
            flush=True,
        )
        print(f"<!-- row took {time.time() - t0:.0f} s -->", file=sys.stderr)


def _world(name: str, rng: np.random.Generator, draws: int, tasks: int) -> np.ndarray:
    """(best rate, candidate rate) per draw and task: mean gain 0 over the tasks."""
    if name == "half +0.3, half −0.3":
        p = rng.uniform(0.35, 0.65, (draws, tasks))
        return np.stack([p, p + np.where(np.arange(tasks) % 2 == 0, 0.3, -0.3)])
    if name == "one task +0.55, the rest −0.05":
        p = rng.uniform(0.2, 0.8, (draws, tasks))
        p[:, 0] = rng.uniform(0.2, 0.45, draws)
        return np.stack([p, p + np.where(np.arange(tasks) == 0, 0.55, -0.05)])
    if name == "skewed: +0.05 on 10, −0.25 on 2":
        p = rng.uniform(0.3, 0.7, (draws, tasks))
        return np.stack([p, p + np.where(np.arange(tasks) < 10, 0.05, -0.25)])
    # clustered: 3 clusters of 4 tasks share a rate; the gain ±0.2 by cluster, mean 0
    rate = rng.uniform(0.3, 0.7, (draws, 3)).repeat(4, axis=1)
    shift = np.array([0.2, -0.1, -0.1]).repeat(4)
    return np.stack([rate, rate + shift])


LEVEL_WORLDS = [
    "half +0.3, half −0.3",
    "one task +0.55, the rest −0.05",
    "skewed: +0.05 on 10, −0.25 on 2",
    "clustered: 3 clusters of 4, ±0.2 by cluster",
]


def level_table(draws: int) -> None:
    tasks, rounds, chunk = 12, 30, 10_000
    print(f"\n## Level of the confirmation in rounds ({draws:,} paths a world, 12 × 30)\n")
    print("| world | alpha 1e−2: rate ÷ alpha | alpha 1e−3: rate ÷ alpha |")
    print("|---|---|---|")
    for w, name in enumerate(LEVEL_WORLDS):
        rng = np.random.default_rng(7 + w)
        hits = {0.01: 0, 0.001: 0}
        for _ in range(draws // chunk):
            best, cand = _world(name, rng, chunk, tasks)
            assert np.allclose((cand - best).sum(axis=-1), 0.0)
            u = rng.random((2, chunk, rounds, tasks))
            d = (u[1] < cand[:, None, :]).astype(float) - (u[0] < best[:, None, :])
            for alpha in hits:
                promoted, _ = promoted_paths(d, alpha)
                hits[alpha] += int(promoted.sum())
        cells = []
        for alpha, h in hits.items():
            rate = h / draws
            se = math.sqrt(max(rate * (1 - rate), alpha * (1 - alpha)) / draws)
            cells.append(f"{rate / alpha:.3f} ± {se / alpha:.3f}")
        print(f"| {name} | {cells[0]} | {cells[1]} |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="20 projects a row, 100,000 paths")
    ap.add_argument("--only", choices=["power", "level"])
    ap.add_argument("--reps", type=int, default=None, help="projects a power row")
    ap.add_argument("--with-null", action="store_true", help="each power row with no gain too")
    args = ap.parse_args()
    reps = args.reps or (20 if args.quick else 100)
    if args.only in (None, "power"):
        power_table(reps, args.with_null)
    if args.only in (None, "level"):
        level_table(100_000 if args.quick else 1_000_000)


if __name__ == "__main__":
    main()
