"""Memory of the reusable Prefect server over a sitting of many recorded runs (issue 28).

The first `honesteval evaluate` (CLI, `HONESTEVAL_SERVER_MODE=reuse`, a throw-away
PREFECT_HOME) starts the server; then this process runs `honesteval.evaluate(..., fresh=True)`
against it `--runs` times (each a recorded flow run of `--tasks` × `--trials` no-op trials:
task runs, states, events, logs, artifacts), and after every run reads the server's resident
memory (VmRSS, and its peak VmHWM) from /proc, the flow runs it holds and the size of its
database. At the end `honesteval server stop` stops it. Bounded means RSS plateaus.
`--keep-runs` is `HONESTEVAL_PREFECT_KEEP_RUNS` (the server's retention; `all`: none).

Run: .venv/bin/python bench/server_memory.py [--runs 100] [--tasks 50] [--trials 4]
[--keep-runs 50|all] [--quick]   (`--quick`: 30 runs, keeping 10)
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import make_project, quiet_prefect


def memory_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of ``pid`` in MB."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        fields[key] = value
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def flow_runs_in(db: Path) -> int:
    conn = sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True, timeout=10)
    try:
        return int(conn.execute("SELECT count(*) FROM flow_run").fetchone()[0])
    finally:
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--trials", type=int, default=4)
    parser.add_argument("--every", type=int, default=10, help="print a row every N runs")
    parser.add_argument("--keep-runs", default="50", help="flow runs the server keeps, or all")
    parser.add_argument("--quick", action="store_true", help="30 runs, keeping 10")
    args = parser.parse_args()
    if args.quick:
        args.runs, args.keep_runs, args.every = 30, "10", 5
    home = Path(tempfile.mkdtemp(prefix="honesteval-server-memory-"))
    os.environ.pop("PREFECT_API_URL", None)
    os.environ.update(
        PREFECT_HOME=str(home),
        HONESTEVAL_SERVER_MODE="reuse",
        HONESTEVAL_SERVER_IDLE_S="600",
        HONESTEVAL_PREFECT_KEEP_RUNS=args.keep_runs,
    )
    quiet_prefect()
    root = make_project(args.tasks, "pass", name="memory", trials=args.trials)
    cli = [sys.executable, "-m", "honesteval.cli"]
    first = subprocess.run(
        [*cli, "evaluate", "--project", str(root), "--candidate", "c", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    info = json.loads((home / "honesteval-server.json").read_text())
    pid, url = int(info["pid"]), str(info["api_url"])
    print(
        f"server pid {pid} at {url}; {args.tasks} tasks x {args.trials} trials a run, "
        f"keeping {args.keep_runs} flow runs"
    )
    print(first.stderr.strip().splitlines()[0])
    os.environ["PREFECT_API_URL"] = url
    import honesteval

    rss0, _ = memory_mb(pid)
    print(f"{'runs':>5} {'RSS MB':>8} {'peak MB':>8} {'flow runs':>9} {'db MB':>7} {'s/run':>6}")
    print(f"{1:>5} {rss0:>8.1f} {'':>8} {flow_runs_in(home / 'prefect.db'):>9}")
    t0 = time.monotonic()
    try:
        for run in range(2, args.runs + 1):
            honesteval.evaluate(root, "c", fresh=True, orchestration="prefect")
            if run % args.every == 0 or run == args.runs:
                time.sleep(1.0)  # the server records the run's last events
                rss, peak = memory_mb(pid)
                db = (home / "prefect.db").stat().st_size / 1e6
                per = (time.monotonic() - t0) / (run - 1)
                runs = flow_runs_in(home / "prefect.db")
                print(f"{run:>5} {rss:>8.1f} {peak:>8.1f} {runs:>9} {db:>7.1f} {per:>6.2f}")
    finally:
        subprocess.run([*cli, "server", "stop"], check=False)


if __name__ == "__main__":
    main()
