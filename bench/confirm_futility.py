"""The confirmation's verdicts when the candidate is no better, and when only the budget or
missing trials stand in the way: this code against the code before issue 52, through the real
``rounds_decide``.

Run: ``python bench/confirm_futility.py`` (``--calls N``, default 2,000: the equal and worse
7 × 3 worlds run N confirmations each, the others a tenth of N, the noise-free one 1 %;
``--quick`` is ``--calls 300``). It measures the code of this checkout ("after") and, in a
second process, the code of ``--before`` (a git revision, default the project before issue
52: its ``src`` is taken with ``git archive``). No Prefect: each confirmation runs as
``run_confirmation_job`` runs it, one round at a time, each round's results built by the
real ``aggregate`` and decided by the real ``rounds_decide`` at alpha_1 = 1/91.43 (the
ledger's first level), until the decision says it stopped. Both versions see the same draws
(the same seed per call), so their difference is the rule's alone; its MC SE is that of the
paired per-call difference.

Worlds (T val tasks, the budget 3 × the screen's K trials, the gate's default):

- null, equal (7 × 3): binary rewards, each task's pass rate U(0.2, 0.8), the candidate's the
  same;
- null, worse (7 × 3): the candidate's rates 0.05 lower;
- null, skewed (12 × 5): the candidate +0.045 on 11 tasks and −0.495 on one (mean gain 0),
  rates U(0.55, 0.9);
- null, equal with 8 % missing (10 × 5): as "equal", each trial of either side missing (an
  infrastructure error) with probability 0.08;
- null, worse, bounded continuous (9 × 4): rewards clip(rate + N(0, 0.2²)), the candidate's
  rate 0.05 lower;
- gain +0.1 everywhere, no noise (5 × 2): the issue's first case;
- gain +0.15 with 8 % missing (10 × 3): binary rates U(0.2, 0.7), the candidate +0.15.

Prints each world's ACCEPT / REJECT / INDECISIVE shares before and after with MC SE
sqrt(p(1 − p)/n), the mean rounds run, and REJECT(after) − REJECT(before) ± its MC SE. A null
world must reject at least as often after as before (within 2 MC SE), and accept no more
often (futility is a stopping rule: the level is unchanged).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from multiprocessing import Pool
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.gate_helpers: results through the real aggregate
#: The project before issue 52 (its futility counted missing trials at the worst case).
BEFORE = "fb29757"
LEVEL = 1 / 91.43
VERDICTS = ("ACCEPT", "REJECT", "INDECISIVE")


@dataclass(frozen=True)
class World:
    name: str
    tasks: int
    screen_trials: int
    null: bool
    kind: str  # binary | continuous | constant
    low: float = 0.2
    high: float = 0.8
    shift: float = 0.0
    missing: float = 0.0
    skewed: bool = False
    #: this share of ``--calls`` (the equal and worse worlds the criterion is on run all)
    share: float = 1.0

    @property
    def budget(self) -> int:
        return 3 * self.screen_trials

    def draw(self, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Both sides' rewards (budget, tasks), NaN where a trial is missing."""
        shape = (self.budget, self.tasks)
        if self.kind == "constant":
            cur = np.full(shape, 0.5)
            return cur, cur + self.shift
        rates = rng.uniform(self.low, self.high, self.tasks)
        shift = np.full(self.tasks, self.shift)
        if self.skewed:
            shift = np.array([0.045] * (self.tasks - 1) + [-0.045 * (self.tasks - 1)])
        if self.kind == "binary":
            cur = (rng.random(shape) < rates).astype(float)
            cand = (rng.random(shape) < np.clip(rates + shift, 0, 1)).astype(float)
        else:
            cur = np.clip(rates + rng.normal(0, 0.2, shape), 0, 1)
            cand = np.clip(rates + shift + rng.normal(0, 0.2, shape), 0, 1)
        for side in (cur, cand):
            side[rng.random(shape) < self.missing] = np.nan
        return cur, cand


WORLDS = [
    World("null, equal", 7, 3, True, "binary"),
    World("null, worse", 7, 3, True, "binary", shift=-0.05),
    World("null, skewed", 12, 5, True, "binary", low=0.55, high=0.9, skewed=True, share=0.1),
    World("null, equal, 8% missing", 10, 5, True, "binary", missing=0.08, share=0.1),
    World(
        "null, worse, continuous",
        9,
        4,
        True,
        "continuous",
        low=0.3,
        high=0.7,
        shift=-0.05,
        share=0.1,
    ),
    World("gain +0.1, no noise", 5, 2, False, "constant", shift=0.1, share=0.01),
    World(
        "gain +0.15, 8% missing",
        10,
        3,
        False,
        "binary",
        high=0.7,
        shift=0.15,
        missing=0.08,
        share=0.1,
    ),
]


def confirm(world: World, call: int) -> tuple[str, int]:
    """One confirmation as the gate runs it: (verdict, rounds run)."""
    from tests.gate_helpers import rounds_result  # the real aggregate; NaN a missing trial

    from honesteval.models import GateConfig
    from honesteval.stats import rounds_decide

    cur, cand = world.draw(np.random.default_rng([52, WORLDS.index(world), call]))
    cfg = GateConfig()
    for k in range(1, world.budget + 1):
        d = rounds_decide(
            rounds_result(cur[:k], "best"), rounds_result(cand[:k], "new"), cfg, LEVEL, world.budget
        )
        if d.confirm_stop is not None:
            break
    verdict = "INDECISIVE" if d.indecisive else "ACCEPT" if d.accept else "REJECT"
    return verdict, k


def _one(args: tuple[int, int]) -> tuple[str, int]:
    return confirm(WORLDS[args[0]], args[1])


def measure(calls: int, workers: int) -> dict[str, list[tuple[str, int]]]:
    """Every world's per-call (verdict, rounds), with the code importable now."""
    with Pool(workers) as pool:
        return {
            w.name: pool.map(_one, [(i, c) for c in range(max(1, round(calls * w.share)))])
            for i, w in enumerate(WORLDS)
        }


def start_before(rev: str, calls: int, workers: int, tmp: Path) -> subprocess.Popen[str]:
    """:func:`measure` in a process that imports ``rev``'s src (extracted into ``tmp``),
    started now: it runs while this process measures the code after."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", rev, "src"], check=True, capture_output=True
    ).stdout
    archive_path = tmp / "src.tar"
    archive_path.write_bytes(archive)
    with tarfile.open(archive_path) as tar:
        tar.extractall(tmp, filter="data")
    env = {**os.environ, "PYTHONPATH": str(tmp / "src")}
    return subprocess.Popen(
        [sys.executable, __file__, "--measure", "--calls", str(calls), "--workers", str(workers)],
        stdout=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip


def finished(process: subprocess.Popen[str]) -> dict[str, list[tuple[str, int]]]:
    out, _ = process.communicate()
    if process.returncode != 0:
        raise SystemExit(f"the measurement of the code before failed (exit {process.returncode})")
    return {k: [tuple(x) for x in v] for k, v in json.loads(out).items()}  # type: ignore[misc]


def share(outcomes: list[tuple[str, int]], verdict: str) -> tuple[float, float]:
    p = sum(v == verdict for v, _ in outcomes) / len(outcomes)
    return p, math.sqrt(p * (1 - p) / len(outcomes))


def paired_difference(
    after: list[tuple[str, int]], before: list[tuple[str, int]], verdict: str
) -> tuple[float, float]:
    """Mean and MC SE of 1[after = verdict] − 1[before = verdict] over the same calls."""
    d = np.array(
        [(a == verdict) - (b == verdict) for (a, _), (b, _) in zip(after, before, strict=True)]
    )
    return float(d.mean()), float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else 0.0


def report(after: dict, before: dict, rev: str, calls: int) -> None:
    print(f"--calls {calls}; alpha_1 = 1/91.43; before = {rev}, after = this code")
    head = "world (T × K, budget 3K), calls       | code   | ACCEPT          | REJECT          "
    print(head + "| INDECISIVE      | rounds")
    for w in WORLDS:
        for label, runs in (("before", before[w.name]), ("after", after[w.name])):
            cells = " | ".join(
                f"{p:.4f} ± {se:.4f}" for p, se in (share(runs, v) for v in VERDICTS)
            )
            rounds = np.mean([k for _, k in runs])
            name = f"{w.name} ({w.tasks} × {w.screen_trials}, {w.budget}), {len(runs)}"
            print(f"{name:38} | {label:6} | {cells} | {rounds:.2f}")
        diff, se = paired_difference(after[w.name], before[w.name], "REJECT")
        flag = "" if not w.null else ("  ok" if diff >= -2 * se else "  FEWER REJECTS")
        print(f"{'':38} | REJECT after − before: {diff:+.4f} ± {se:.4f} (paired MC SE){flag}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--quick", action="store_true", help="300 calls a world")
    parser.add_argument("--before", default=BEFORE, help="the git revision to compare with")
    parser.add_argument("--workers", type=int, default=2, help="processes per version")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    calls = 300 if args.quick else args.calls
    if args.measure:  # the second process: the code on PYTHONPATH, as JSON
        print(json.dumps(measure(calls, args.workers)))
        return
    sys.path.insert(0, str(REPO / "src"))
    with tempfile.TemporaryDirectory(prefix="honesteval-before-") as tmp:
        before_run = start_before(args.before, calls, args.workers, Path(tmp))
        after = measure(calls, args.workers)
        before = finished(before_run)
    report(after, before, args.before, calls)


if __name__ == "__main__":
    main()
