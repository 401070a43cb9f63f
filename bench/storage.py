"""Trial storage at 10,000 and 50,000 trials: the trial log against one file per trial.

Run: ``.venv/bin/python bench/storage.py [--sizes 10000 50000]``. For each size, in one
process and the same folder tree, it writes the same records both ways and reads them back:

- **per-trial files** (the layout before the trial log): one atomic JSON file per record
  (temp file, fsync, rename, folder fsync), read back file by file;
- **trial log**: :meth:`Store.write_trial` appends in batches of 157 records (what
  ``evaluate`` uses for 10,000 trials at concurrency 32), one fsync per batch, read back with
  :meth:`Store.read_trials`.

As in a run, each trial is written twice: its rollout before scoring, then its graded record.
It prints write time, read time (what planning a rerun pays), files and bytes on disk, and
the ratios. Each record carries a 500-character output, like a short model answer.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import quiet_prefect

quiet_prefect()

from honesteval.evaluation.trial import AWAITING_SCORE  # noqa: E402
from honesteval.models import TrialRecord  # noqa: E402
from honesteval.store.state_dir import Store, atomic_write_json, safe_name  # noqa: E402
from honesteval.store.trial_log import deferred_sync  # noqa: E402

BATCH = 157
TRIALS_PER_TASK = 4


def records(n: int) -> list[tuple[TrialRecord, TrialRecord]]:
    """(the rollout awaiting its score, the graded record) of ``n`` trials."""
    graded = [
        TrialRecord(
            task_id=f"task-{i // TRIALS_PER_TASK:05d}",
            candidate="c",
            fingerprint="f" * 64,
            split="val",
            trial=i % TRIALS_PER_TASK,
            seed=i % TRIALS_PER_TASK,
            status="ok",
            reward=float(i % 2),
            started_at="2026-11-30T00:00:00Z",
            rollout={"answer": "x" * 500},
            score={"reward": float(i % 2)},
        )
        for i in range(n)
    ]
    return [
        (
            r.model_copy(
                update={"status": "scorer_error", "reward": None, "error": AWAITING_SCORE}
            ),
            r,
        )
        for r in graded
    ]


def disk_usage(folder: Path) -> tuple[int, int]:
    """(files, bytes allocated on disk) under ``folder``."""
    files = used = 0
    for path in folder.rglob("*"):
        if path.is_file():
            files += 1
            used += path.stat().st_blocks * 512
    return files, used


def per_trial_files(root: Path, recs: list[tuple[TrialRecord, TrialRecord]]) -> tuple[float, float]:
    folder = Store(root).trial_dir("val", "c", "f" * 64)
    t0 = time.perf_counter()
    for pair in recs:
        for r in pair:
            atomic_write_json(folder / f"{safe_name(r.task_id)}__s{r.seed}.json", r)
    write_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    back = {}
    for path in folder.glob("*__s*.json"):
        r = TrialRecord.model_validate(json.loads(path.read_bytes()))
        back[(r.task_id, r.seed)] = r
    assert len(back) == len(recs)
    return write_s, time.perf_counter() - t0


def trial_log(root: Path, recs: list[tuple[TrialRecord, TrialRecord]]) -> tuple[float, float]:
    store = Store(root)
    t0 = time.perf_counter()
    for start in range(0, len(recs), BATCH):
        with deferred_sync():  # the run_trial batch, then its score batch
            for rollout, _ in recs[start : start + BATCH]:
                store.write_trial(rollout)
        with deferred_sync():
            for _, graded in recs[start : start + BATCH]:
                store.write_trial(graded)
    write_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    back = store.read_trials("val", "c", "f" * 64)
    assert len(back) == len(recs)
    return write_s, time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000])
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores; 500-char outputs")
    print(
        f"{'trials':>7} {'layout':<16} {'write s':>8} {'read s':>7} {'files':>7} {'MB':>7}"
        f" {'write ×':>8} {'read ×':>7}"
    )
    for n in args.sizes:
        recs = records(n)
        rows = []
        for name, run in (("per-trial files", per_trial_files), ("trial log", trial_log)):
            root = Path(tempfile.mkdtemp(prefix="honesteval-storage-", dir="."))
            try:
                write_s, read_s = run(root, recs)
                files, used = disk_usage(root)
            finally:
                shutil.rmtree(root)
            rows.append((name, write_s, read_s, files, used))
        base_w, base_r = rows[0][1], rows[0][2]
        for name, write_s, read_s, files, used in rows:
            print(
                f"{n:>7} {name:<16} {write_s:>8.2f} {read_s:>7.2f} {files:>7} "
                f"{used / 1e6:>7.1f} {write_s / base_w:>7.2f}× {read_s / base_r:>6.2f}×"
            )


if __name__ == "__main__":
    main()
