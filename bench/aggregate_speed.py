"""CPU time of ``honesteval.stats.aggregate`` at 1,000 / 10,000 / 100,000 tasks × 10 trials.

The input is built once per size (not timed): ``TaskTrials`` with skewed rewards (Beta(0.3,
0.6), two decimals), in two shapes: every trial ``ok``, and 5 % of trials missing or failed
(2 % ``failed``, 2 % ``infra_error``, 1 % ``scorer_error``: the failed-reward, pass^k-bounds
and unscored paths run too). Each call is timed with ``time.process_time`` (CPU of this
process, steadier than wall time on shared cores); the table prints min and median of every
call, and µs per task (flat across sizes when the cost is linear in the work).

``--compare-src DIR`` times another version's ``src`` (e.g. main's) in the same run: each
version runs in its own process (``PYTHONPATH=DIR``), the versions alternating for
``--rounds`` rounds of ``--repeats`` calls each, so both see the same load; the last column is
this version's median over the other's.

Run: .venv/bin/python bench/aggregate_speed.py [--repeats 7] [--rounds 2]
[--sizes 1000 10000 100000] [--compare-src DIR] (``--quick``: 1,000 and 10,000, 5 calls, 1 round)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")
TRIALS = 10
SHAPES = ("all ok", "5 % missing or failed")


def _inputs(n_tasks: int, shape: str) -> list:
    import numpy as np

    from honesteval.models import TaskTrials

    rng = np.random.default_rng(n_tasks)
    rewards = rng.beta(0.3, 0.6, size=(n_tasks, TRIALS)).round(2)
    if shape == "all ok":
        statuses = np.full((n_tasks, TRIALS), "ok")
    else:
        kinds = ["ok", "failed", "infra_error", "scorer_error"]
        statuses = rng.choice(kinds, p=[0.95, 0.02, 0.02, 0.01], size=(n_tasks, TRIALS))
    return [
        TaskTrials(
            id=f"t{i:06d}",
            statuses=row_status.tolist(),
            rewards=[
                r if s in ("ok", "failed") else None for s, r in zip(row_status, row, strict=True)
            ],
        )
        for i, (row_status, row) in enumerate(zip(statuses, rewards.tolist(), strict=True))
    ]


def worker(sizes: list[int], repeats: int) -> None:
    """Time ``aggregate`` in this process (whatever ``honesteval`` is on the path); JSON out."""
    from honesteval.stats import aggregate

    seconds: dict[str, list[float]] = {}
    for n_tasks in sizes:
        for shape in SHAPES:
            tasks = _inputs(n_tasks, shape)
            times = []
            for _ in range(repeats):
                start = time.process_time()
                aggregate(tasks, n_trials=TRIALS)
                times.append(time.process_time() - start)
            seconds[f"{n_tasks}|{shape}"] = times
    print(json.dumps(seconds))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--compare-src", help="another version's src folder, timed alike")
    parser.add_argument("--quick", action="store_true", help="1,000 and 10,000; 5 calls, 1 round")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.quick:
        args.sizes, args.repeats, args.rounds = [1000, 10000], 5, 1
    if args.worker:
        worker(args.sizes, args.repeats)
        return
    versions = {"this": SRC}
    if args.compare_src:
        versions["compare"] = str(Path(args.compare_src).resolve())
    times: dict[str, dict[str, list[float]]] = {v: {} for v in versions}
    command = [sys.executable, __file__, "--worker", "--repeats", str(args.repeats), "--sizes"]
    for round_ in range(args.rounds):
        order = list(versions) if round_ % 2 == 0 else list(reversed(versions))
        for version in order:
            env = {**os.environ, "PYTHONPATH": versions[version]}
            out = subprocess.run(
                [*command, *map(str, args.sizes)], env=env, capture_output=True, text=True
            )
            if out.returncode != 0:
                raise SystemExit(f"{version}: the worker failed:\n{out.stderr}")
            for key, xs in json.loads(out.stdout).items():
                times[version].setdefault(key, []).extend(xs)
        print(f"round {round_ + 1}: load {os.getloadavg()[0]:.1f}", flush=True)
    print(f"CPU time of aggregate, {args.rounds} × {args.repeats} calls per cell")
    for version, src in versions.items():
        print(f"{version}: {src}")
    header = f"{'version':<8} {'tasks × 10':>11}  {'shape':<22} {'min ms':>8} {'median ms':>10}"
    print(header + f" {'µs/task':>8}" + (" median/compare" if "compare" in versions else ""))
    for key in times["this"]:
        n_tasks, shape = key.split("|")
        for version in versions:
            xs = times[version][key]
            median = statistics.median(xs)
            line = (
                f"{version:<8} {int(n_tasks):>11,}  {shape:<22} {min(xs) * 1e3:8.1f} "
                f"{median * 1e3:10.1f} {median / int(n_tasks) * 1e6:8.2f}"
            )
            if version == "this" and "compare" in versions:
                line += f" {median / statistics.median(times['compare'][key]):8.2f}×"
            print(line)


if __name__ == "__main__":
    main()
