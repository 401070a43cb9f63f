"""What ``export`` and ``report`` cost at 2,000 / 10,000 / 50,000 trials: time, peak memory,
output size.

Run from the checkout: ``.venv/bin/python bench/scale.py [--sizes 2000 10000 50000]``
(``--quick``: 2,000 and 10,000). For each size it writes a project's state with the real
store code (``tests/synthetic_state.py``: N/4 val tasks × 4 trials of one candidate, a
300-character output each, appended in one batch; the version's result stored
``--results`` times, as reruns of a version store it again), then runs each command as a
user does, in its own process under ``/usr/bin/time -v``:

- ``honesteval export --format csv --out FILE``: wall and CPU time, peak RSS, file size;
- ``honesteval report``: wall and CPU time, peak RSS, report size;
- the rollouts table artifact an evaluation of those trials posts (rows, JSON bytes), built
  in this process by the flow's own code, and what a table of every trial would be.

Single runs on a shared machine: CPU time (user + system) is the steadier figure; wall time
includes waiting for the cores.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # tests.synthetic_state
sys.path.insert(0, str(ROOT / "bench"))

from _common import timed_cli  # noqa: E402
from tests.synthetic_state import synthetic_state  # noqa: E402

TRIALS_PER_TASK = 4
OUTPUT_CHARS = 300


def timed(args: list[str]) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MB) of ``honesteval ARGS`` in its own process."""
    return timed_cli(args)[:3]


def rollouts_artifact(root: Path) -> tuple[int, int, int]:
    """(rows, JSON bytes) of the rollouts table an evaluation of the stored trials posts (the
    trials as its records), and the JSON bytes of a table with one row per trial (what every
    run posted before the bound)."""
    from honesteval.evaluation.plan import plan_evaluation
    from honesteval.orchestration.flows._artifacts import rollouts_table
    from honesteval.store.state_dir import Store
    from honesteval.views.text import rollout_rows

    plan = plan_evaluation(root, "c", "val")
    fingerprint = plan.settings.candidate.fingerprint
    stored = Store(plan.project.state_dir).read_trials("val", "c", fingerprint).values()
    records = [r for r in stored if (r.task_id, r.trial) not in plan.reused]
    rows, _ = rollouts_table(plan, records)
    every = rollout_rows([*plan.reused.values(), *records], set(plan.reused), lambda r: "x")
    return len(rows), len(json.dumps(rows)), len(json.dumps(every))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[2_000, 10_000, 50_000])
    parser.add_argument("--quick", action="store_true", help="2,000 and 10,000 trials only")
    parser.add_argument("--results", type=int, default=4, help="stored results per version")
    args = parser.parse_args()
    sizes = [2_000, 10_000] if args.quick else args.sizes
    print(
        f"python {sys.version.split()[0]}, {os.cpu_count()} cores; {TRIALS_PER_TASK} trials per "
        f"task, {OUTPUT_CHARS}-char outputs, {args.results} stored results of the version"
    )
    print(
        f"{'trials':>7} {'log MB':>7} | {'export s':>8} {'CPU s':>6} {'RSS MB':>7} {'CSV MB':>7}"
        f" | {'report s':>8} {'CPU s':>6} {'RSS MB':>7} {'HTML MB':>8}"
        f" | {'table rows':>10} {'KB':>6} {'all KB':>7}"
    )
    for n in sizes:
        work = Path(tempfile.mkdtemp(prefix="honesteval-scale-"))
        try:
            root = synthetic_state(
                work,
                n // TRIALS_PER_TASK,
                {"c": 0.5},
                n_trials=TRIALS_PER_TASK,
                output_chars=OUTPUT_CHARS,
                stored_results=args.results,
            )
            log_mb = sum(p.stat().st_size for p in root.rglob("trials.jsonl")) / 1e6
            csv_path = work / "trials.csv"
            export_s, export_cpu, export_mb = timed(
                ["export", "--project", str(root), "--format", "csv", "--out", str(csv_path)]
            )
            report_s, report_cpu, report_mb = timed(["report", "--project", str(root)])
            html = root / ".honesteval" / "report.html"
            table_rows, table_bytes, every_bytes = rollouts_artifact(root)
            print(
                f"{n:>7} {log_mb:>7.1f} | {export_s:>8.2f} {export_cpu:>6.2f} {export_mb:>7.0f}"
                f" {csv_path.stat().st_size / 1e6:>7.1f} | {report_s:>8.2f} {report_cpu:>6.2f}"
                f" {report_mb:>7.0f} {html.stat().st_size / 1e6:>8.2f}"
                f" | {table_rows:>10} {table_bytes / 1e3:>6.0f} {every_bytes / 1e3:>7.0f}",
                flush=True,
            )
        finally:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
