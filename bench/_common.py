"""Shared helpers for the benchmarks: throw-away projects, Prefect env, memory readings."""

from __future__ import annotations

import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any


def quiet_prefect(home: str | None = None) -> None:
    """Offline, quiet Prefect in a scratch PREFECT_HOME; call before importing prefect."""
    os.environ.setdefault("PREFECT_HOME", home or tempfile.mkdtemp(prefix="honesteval-bench-"))
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "90")


def make_project(n_tasks: int, target_body: str, *, name: str = "bench", trials: int = 4) -> Path:
    """A val-only project whose python target runs ``target_body`` and scores 1.0."""
    root = Path(tempfile.mkdtemp(prefix=f"honesteval-{name}-"))
    (root / "candidates" / "c").mkdir(parents=True)
    (root / "candidates" / "c" / "x.txt").write_text("x")
    ids = [f"t{i:05d}" for i in range(n_tasks)]
    (root / "tasks.jsonl").write_text("".join(json.dumps({"id": i}) + "\n" for i in ids))
    (root / "target.py").write_text(
        "import time\n"
        f"def run(task, candidate_dir, seed):\n    {target_body}\n    return seed\n"
        "def score(task, output):\n    return 1.0\n"
    )
    (root / "honesteval.yaml").write_text(
        json.dumps(
            {
                "name": name,
                "tasks": "tasks.jsonl",
                "splits": {"train": [], "val": ids, "test": []},
                "adapter": {"kind": "python", "target": "target:run", "scorer": "target:score"},
                "trials": trials,
                "retry_backoff_s": 0.0,
            }
        )
    )
    return root


def timed_cli(
    args: list[str], env: Mapping[str, str] | None = None
) -> tuple[float, float, float, str]:
    """(wall seconds, CPU seconds, peak RSS in MB, stdout) of ``honesteval ARGS`` in its own
    process under ``/usr/bin/time -v`` (CPU = user + system: what the command costs, whatever
    else the machine runs; RSS: that process, not a server it talks to)."""
    cmd = ["/usr/bin/time", "-v", sys.executable, "-m", "honesteval.cli", *args]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=dict(env or os.environ))
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed: {proc.stderr[-2000:]}")
    rss_kb = re.search(r"Maximum resident set size \(kbytes\): (\d+)", proc.stderr)
    cpu = re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", proc.stderr)
    assert rss_kb is not None and len(cpu) == 2, proc.stderr
    return wall, sum(map(float, cpu)), int(rss_kb[1]) / 1024, proc.stdout


def peak_rss_mb_self() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def peak_rss_mb_children() -> float:
    """Peak RSS (VmHWM) of live child processes, e.g. Prefect's temporary server (Linux)."""
    me = os.getpid()
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            if ppid != me:
                continue
            for line in (entry / "status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1]) / 1024
        except (OSError, ValueError, IndexError):
            continue
    return total


def simulated_result(name: str, rewards: Any, seed: int, ids: Any = None) -> Any:
    """The real ``aggregate`` over simulated trial rewards (tasks × trials, numpy), on val;
    task i is ``t{i:03d}``, i from ``ids`` (default 0, 1, ...)."""
    from honesteval.models import TaskTrials
    from honesteval.stats import aggregate

    numbers = range(len(rewards)) if ids is None else ids
    tasks = [
        TaskTrials(id=f"t{i:03d}", statuses=["ok"] * rewards.shape[1], rewards=row.tolist())
        for i, row in zip(numbers, rewards, strict=True)
    ]
    return aggregate(
        tasks,
        candidate=name,
        fingerprint=name,
        split="val",
        base_seed=seed,
        n_trials=rewards.shape[1],
    )


def paired_screen_passes(cand_counts: Any, best_counts: Any, k_se: float) -> Any:
    """``decide``'s paired rule on per-task success counts, vectorised over leading axes and
    exact like ``decide``: Δ > k_se·SE ⇔ S > 0 and S²(n − 1) > k_se²(nQ − S²), with S and Q the
    sum and sum of squares of the integer count differences (a tie rejects; SE = 0 accepts
    iff Δ > 0)."""
    from fractions import Fraction

    import numpy as np

    diff = np.asarray(cand_counts, dtype=np.int64) - np.asarray(best_counts, dtype=np.int64)
    n = diff.shape[-1]
    total, squares = diff.sum(axis=-1), (diff * diff).sum(axis=-1)
    num, den = (Fraction(str(k_se)) ** 2).as_integer_ratio()
    return (total > 0) & (total * total * (n - 1) * den > num * (n * squares - total * total))


def share_text(hits: int, n: int) -> str:
    """``hits`` of ``n`` as "k/n = p̂ [lo, hi]" with the exact 95 % Clopper–Pearson interval
    (never "1.000 ± 0.000": a binomial MC error is not zero at 0 or n)."""
    from scipy.stats import binomtest

    ci = binomtest(hits, n).proportion_ci(confidence_level=0.95, method="exact")
    return f"{hits}/{n} = {hits / n:.3f} [{ci.low:.3f}, {ci.high:.3f}]"


def run_size(doc: str, flag: str, default: int, quick: int) -> int:
    """The bench's size from the command line: ``--<flag> N`` (default ``default``), or
    ``quick`` with ``--quick``."""
    import argparse

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument(f"--{flag}", type=int, default=default)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    return quick if args.quick else int(getattr(args, flag))
