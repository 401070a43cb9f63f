"""Size of the Prefect home after many small `honesteval evaluate` runs (issue 15).

Runs `honesteval evaluate --fresh` of a 5-task x 2-trial project through the CLI, one process
per run, each with its own temporary Prefect server, in two throw-away PREFECT_HOMEs, run by
run alternately: the baseline keeps every flow run (`HONESTEVAL_PREFECT_KEEP_RUNS=all`, as
before issue 15), the other keeps the newest `--keep-runs`. After every `--every` runs it
prints, for each, the size of the home and of what grows in it: the SQLite database
(`prefect.db`; its write-ahead log `-wal` apart), the flow runs in it, result storage
(`storage/`), and the ratio kept/baseline. Bounded means the sizes plateau as runs grow.

Run: .venv/bin/python bench/prefect_home.py [--runs 60] [--every 10] [--keep-runs 20]
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import make_project

MB = 1024 * 1024


def tree_bytes(path: Path) -> int:
    if not path.exists():
        return 0
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def flow_run_count(db: Path) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return int(conn.execute("SELECT count(*) FROM flow_run").fetchone()[0])


def sizes(home: Path) -> dict[str, float]:
    return {
        "total": tree_bytes(home) / MB,
        "db": tree_bytes(home / "prefect.db") / MB,
        "wal": tree_bytes(home / "prefect.db-wal") / MB,
        "flow_runs": flow_run_count(home / "prefect.db"),
        "storage": tree_bytes(home / "storage") / MB,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--keep-runs", type=int, default=20)
    args = parser.parse_args()

    project = make_project(5, "pass", name="home", trials=2)
    cmd = [sys.executable, "-m", "honesteval.cli", "evaluate", "--project", str(project)]
    cmd += ["--candidate", "c", "--fresh", "--json"]
    base = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    # a temporary server per run: what this measures is the retention each start applies
    base.update(
        DO_NOT_TRACK="1",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        HONESTEVAL_SERVER_MODE="per-command",
    )
    modes = {"baseline (all)": "all", f"keep {args.keep_runs}": str(args.keep_runs)}
    homes = {m: Path(tempfile.mkdtemp(prefix="honesteval-bench-home-")) for m in modes}

    print(
        f"{'runs':>5}  {'home':<15} {'total MB':>9} {'prefect.db':>10} {'-wal':>6} "
        f"{'flow runs':>9} {'storage':>8}  {'s/run':>5}"
    )
    started = time.monotonic()
    for run in range(1, args.runs + 1):
        for mode, keep in modes.items():
            env = {**base, "PREFECT_HOME": str(homes[mode]), "HONESTEVAL_PREFECT_KEEP_RUNS": keep}
            proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
            if proc.returncode != 0:
                raise SystemExit(f"run {run} ({mode}) failed: {proc.stderr[-500:]}")
        if run % args.every and run != args.runs:
            continue
        per_run = (time.monotonic() - started) / (run * len(modes))
        measured = {mode: sizes(home) for mode, home in homes.items()}
        for mode, s in measured.items():
            print(
                f"{run:>5}  {mode:<15} {s['total']:>9.2f} {s['db']:>10.2f} {s['wal']:>6.2f} "
                f"{s['flow_runs']:>9} {s['storage']:>8.2f}  {per_run:>5.1f}"
            )
        baseline, kept = measured.values()
        print(
            f"{'':>5}  {'kept/baseline':<15} {kept['total'] / baseline['total']:>9.2f}", flush=True
        )


if __name__ == "__main__":
    main()
