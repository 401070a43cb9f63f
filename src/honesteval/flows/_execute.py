"""Run an :class:`EvaluationPlan` inside a flow: map trials over a bounded task runner,
show progress, aggregate downstream, publish artifacts. Shared by every flow."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

from prefect import get_run_logger
from prefect.artifacts import (
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)
from prefect.events import emit_event
from prefect.futures import PrefectFuture, as_completed
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner
from prefect.utilities.annotations import quote

from honesteval.evaluation import EvaluationPlan
from honesteval.models import SplitResult, TrialRecord
from honesteval.progress import notify
from honesteval.reporting import rollout_rows, slug, summary_markdown
from honesteval.tasks import aggregate_evaluation, run_trial, run_trial_batch
from honesteval.trials import TrialSpec, crashed_record

TaskRunnerKind = Literal["thread", "dask"]

#: Up to this many trials, one task run per trial (readable in the UI); above, batches.
PER_TRIAL_LIMIT = 256
#: Batches per worker slot: two waves keep every slot busy with few task runs (measured in
#: bench/overhead.py: more, smaller batches cost more in engine time than they win back).
BATCHES_PER_SLOT = 2
_PROGRESS_EVERY_S = 0.5


def auto_batch_size(n_trials: int, max_concurrency: int) -> int:
    """1 for small runs; else enough batches to keep every slot busy, and few task runs."""
    if n_trials <= PER_TRIAL_LIMIT:
        return 1
    return max(1, math.ceil(n_trials / (max_concurrency * BATCHES_PER_SLOT)))


@contextmanager
def task_runner(
    kind: TaskRunnerKind, max_concurrency: int, dask_address: str | None = None
) -> Iterator[TaskRunner[Any]]:
    """A started task runner with bounded concurrency (never an unbounded thread pool)."""
    runner: TaskRunner[Any]
    if kind == "thread":
        runner = ThreadPoolTaskRunner(max_workers=max_concurrency)
    else:
        from honesteval.flows._dask import dask_task_runner

        runner = dask_task_runner(max_concurrency, dask_address)
    with runner:
        yield runner


def _crashed(specs: list[TrialSpec], plan: EvaluationPlan, exc: BaseException) -> list[TrialRecord]:
    """A task run that died in the engine: its trials are missing data, never zeros, and are
    written to disk like every other trial (the next run retries them); trials of it that
    already finished ok keep their records."""
    return [crashed_record(s, plan.settings, exc, plan.started_at) for s in specs]


def _no_walk(payload: list[Any], runner_kind: TaskRunnerKind) -> Any:
    """quote() spares Prefect a walk over every spec looking for futures (thread runner).

    The Dask runner ships parameters before Prefect unwraps annotations, so there the list
    goes as it is (Dask walks it anyway).
    """
    return quote(payload) if runner_kind == "thread" else payload


def run_plan(
    plan: EvaluationPlan,
    *,
    max_concurrency: int,
    batch_size: int | None = None,
    runner_kind: TaskRunnerKind = "thread",
    dask_address: str | None = None,
) -> SplitResult:
    """Run the planned trials as Prefect task runs and return the stored SplitResult."""
    specs = plan.todo
    size = batch_size or auto_batch_size(len(specs), max_concurrency)
    key = f"{plan.split}-{slug(plan.candidate)}"
    total = plan.trials_planned
    done = len(plan.reused)
    progress_id = create_progress_artifact(
        progress=100.0 * done / total,
        key=f"progress-{key}",
        description=f"trials finished for {plan.candidate} on {plan.split} ({total} planned)",
    )
    records: list[TrialRecord] = []
    if specs:  # every trial reused: no runner to start (for Dask, no cluster)
        records = _run_specs(
            plan, specs, size, max_concurrency, runner_kind, dask_address, progress_id, done, total
        )
    result = aggregate_evaluation(quote(plan), quote(records))
    publish_evaluation(plan, result, records)
    return result


def _run_specs(
    plan: EvaluationPlan,
    specs: list[TrialSpec],
    size: int,
    max_concurrency: int,
    runner_kind: TaskRunnerKind,
    dask_address: str | None,
    progress_id: Any,
    done: int,
    total: int,
) -> list[TrialRecord]:
    records: list[TrialRecord] = []
    with task_runner(runner_kind, max_concurrency, dask_address) as runner:
        futures: dict[PrefectFuture[Any], list[TrialSpec]] = {}
        if size == 1:
            settings = plan.settings
            trial_task = run_trial.with_options(**settings.retry.prefect_options())
            for spec in specs:
                fut = runner.submit(
                    trial_task, {"spec": spec, "settings": settings, "label": spec.label}
                )
                futures[fut] = [spec]
        else:
            for i in range(0, len(specs), size):
                chunk = specs[i : i + size]
                name = f"batch-{i // size:04d}-{chunk[0].label}"
                fut = runner.submit(
                    run_trial_batch.with_options(task_run_name=name),
                    {
                        "specs": _no_walk([s.model_dump() for s in chunk], runner_kind),
                        "settings": plan.settings,
                    },
                )
                futures[fut] = chunk
        last_update = time.monotonic()
        for fut in as_completed(list(futures)):
            chunk = futures[fut]
            try:
                out = fut.result()
                records.extend(out if isinstance(out, list) else [out])
            except Exception as exc:  # an engine crash; the trials still get records
                get_run_logger().error("task run for %d trial(s) crashed: %r", len(chunk), exc)
                records.extend(_crashed(chunk, plan, exc))
            done += len(chunk)
            notify(f"{plan.candidate} on {plan.split}", done, total)
            now = time.monotonic()
            if now - last_update >= _PROGRESS_EVERY_S or done == total:
                update_progress_artifact(artifact_id=progress_id, progress=100.0 * done / total)
                last_update = now
    return records


def publish_evaluation(
    plan: EvaluationPlan, result: SplitResult, records: list[TrialRecord]
) -> None:
    key = f"{plan.split}-{slug(plan.candidate)}"
    ordered = sorted([*plan.reused.values(), *records], key=lambda r: (r.task_id, r.trial))
    create_table_artifact(
        table=rollout_rows(ordered, set(plan.reused)),
        key=f"rollouts-{key}",
        description=f"one row per trial: {plan.candidate} on {plan.split}",
    )
    create_markdown_artifact(
        markdown=summary_markdown(result),
        key=f"summary-{key}",
        description=f"{plan.candidate} on {plan.split}: reward ± SE, coverage, pass^k",
    )


def emit_low_coverage(project_name: str, results: list[SplitResult], min_coverage: float) -> None:
    """The event an automation can watch: ``honesteval.coverage.low``."""
    emit_event(
        event="honesteval.coverage.low",
        resource={
            "prefect.resource.id": f"honesteval.project.{slug(project_name)}",
            "prefect.resource.name": project_name,
        },
        payload={
            "min_coverage": min_coverage,
            "results": [
                {
                    "candidate": r.candidate,
                    "split": r.split,
                    "coverage": r.coverage,
                    "n_scored": r.n_scored,
                    "n_tasks": r.n_tasks,
                }
                for r in results
            ],
        },
    )
