"""Orchestration overhead of the `evaluate` flow against a plain ThreadPoolExecutor.

Run: ``make bench`` (or ``.venv/bin/python bench/overhead.py``). Prints, in one process:

1. no-op target, 500 tasks × 4 trials: plain threads vs the Prefect flow, overhead per trial;
2. a target that sleeps 50 ms, 2,000 trials at max_concurrency 32: wall time vs the ideal
   2000 · 0.05 / 32 s, for the flow and for plain threads;
3. peak RSS of this process and of Prefect's temporary server;
4. ``aggregate`` on 10,000 tasks × 10 trials.

The baseline runs the very same trial code (adapter call, scoring, records appended to the
trial log, aggregation) in the same batches as the flow, so the difference is what Prefect
orchestration costs.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _common import (
    make_project,
    peak_rss_mb_children,
    peak_rss_mb_self,
    quiet_prefect,
)

quiet_prefect()

from honesteval.evaluation.plan import adapter_for, finish_evaluation, plan_evaluation  # noqa: E402
from honesteval.evaluation.trial import TrialSpec, run_trial_with_retries  # noqa: E402
from honesteval.models import TaskTrials, TrialRecord  # noqa: E402
from honesteval.orchestration.flows import evaluate  # noqa: E402
from honesteval.orchestration.flows._execute import auto_batch_size  # noqa: E402
from honesteval.server.in_process import in_process_runs  # noqa: E402
from honesteval.stats import aggregate  # noqa: E402
from honesteval.store.trial_log import deferred_sync  # noqa: E402


def plain(root: Path, max_concurrency: int) -> float:
    """The same trials in the same batches as the flow (one fsync of the trial log per
    batch), on a plain thread pool: the difference to :func:`flow` is orchestration."""
    t0 = time.perf_counter()
    plan = plan_evaluation(root, "c", "val", fresh=True)
    adapter = adapter_for(str(root))
    size = auto_batch_size(len(plan.todo), max_concurrency)
    batches = [plan.todo[i : i + size] for i in range(0, len(plan.todo), size)]

    def run_batch(batch: list[TrialSpec]) -> list[TrialRecord]:
        with deferred_sync():
            return [run_trial_with_retries(adapter, s, plan.settings) for s in batch]

    with ThreadPoolExecutor(max_workers=max_concurrency) as pool:
        records = [r for done in pool.map(run_batch, batches) for r in done]
    result = finish_evaluation(plan, records)
    assert result.trials_ok == len(plan.todo)
    return time.perf_counter() - t0


SETTLE_S = 5.0


def flow(root: Path, max_concurrency: int) -> float:
    # Let the server finish ingesting the previous run's events: on 2 cores it competes
    # with the client for CPU, and this figure is about one run, not a backlog.
    time.sleep(SETTLE_S)
    t0 = time.perf_counter()
    result = evaluate(str(root), "c", "val", fresh=True, max_concurrency=max_concurrency)
    assert result.trials_ok == result.trials_planned
    return time.perf_counter() - t0


def main() -> None:
    with in_process_runs():  # what the CLI does: no heartbeat thread for in-process runs
        run_all()


def run_all() -> None:
    warm = make_project(2, "pass", name="warm", trials=1)
    t0 = time.perf_counter()
    flow(warm, 2)  # starts Prefect's temporary server; not part of any figure below
    print(f"prefect start-up (temporary server + first flow): {time.perf_counter() - t0:.1f} s")

    noop = make_project(500, "pass", name="noop")
    n = 2000
    base = min(plain(noop, 8) for _ in range(2))
    orch = min(flow(noop, 8) for _ in range(2))
    print(f"\n[1] no-op target, 500 tasks x 4 trials = {n} trials, max_concurrency 8")
    print(f"    plain ThreadPoolExecutor: {base:.2f} s ({1000 * base / n:.3f} ms/trial)")
    print(f"    evaluate flow           : {orch:.2f} s ({1000 * orch / n:.3f} ms/trial)")
    print(
        f"    orchestration overhead  : {1000 * (orch - base) / n:.3f} ms/trial "
        f"(target <= 1 ms); ratio flow/plain = {orch / base:.2f}x"
    )

    sleepy = make_project(500, "time.sleep(0.05)", name="sleep")
    ideal = n * 0.05 / 32
    sbase = statistics.median(plain(sleepy, 32) for _ in range(3))
    sflow = statistics.median(flow(sleepy, 32) for _ in range(3))
    print(f"\n[2] 50 ms target, {n} trials, max_concurrency 32, ideal {ideal:.3f} s (median of 3)")
    print(f"    plain ThreadPoolExecutor: {sbase:.2f} s = {sbase / ideal:.2f}x ideal")
    print(
        f"    evaluate flow           : {sflow:.2f} s = {sflow / ideal:.2f}x ideal"
        " (target <= 1.25x)"
    )

    print(
        f"\n[3] peak RSS: this process {peak_rss_mb_self():.0f} MB, Prefect temporary server "
        f"{peak_rss_mb_children():.0f} MB (target: 2,000-trial run under 600 MB)"
    )

    rng = random.Random(0)
    tasks = [
        TaskTrials(id=f"t{i}", statuses=["ok"] * 10, rewards=[rng.random() for _ in range(10)])
        for i in range(10_000)
    ]
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        aggregate(tasks)
        times.append(time.perf_counter() - t0)
    print(
        "\n[4] aggregate 10,000 tasks x 10 trials: "
        f"median {1000 * statistics.median(times):.1f} ms,"
        f" min {1000 * min(times):.1f} ms, max {1000 * max(times):.1f} ms (target < 100 ms)"
    )


if __name__ == "__main__":
    main()
