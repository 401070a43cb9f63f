"""Prefect tasks: thin wrappers around :mod:`honesteval.trials` and :mod:`honesteval.stats`.

``run_trial`` is one task run per trial (named ``<task>-t<k>``); an ``InfraError`` makes
Prefect retry it (``retry_condition_fn``), anything else is recorded and never retried.
``run_trial_batch`` runs several trials in one task run, each with its own in-process
retries, record and status: Prefect costs ~4–6 ms of CPU per task run here, so big
evaluations batch to keep orchestration under 1 ms per trial.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

from prefect import task
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import TaskRun
from prefect.runtime import task_run as task_run_runtime
from prefect.states import State
from prefect.tasks import Task

from honesteval.errors import InfraError
from honesteval.evaluation import EvaluationPlan, adapter_for, finish_evaluation
from honesteval.models import SplitResult, TrialRecord
from honesteval.retry import capped_retry_after
from honesteval.trials import (
    TrialSettings,
    TrialSpec,
    attempt_target,
    finish_trial,
    run_trial_with_retries,
)

__all__ = ["aggregate_evaluation", "retry_on_infra", "run_trial", "run_trial_batch"]

# Errors of earlier attempts of a task run, keyed by task-run id: Prefect re-enters the task
# body for each retry (in the same process), and the final record lists every attempt's error.
_attempt_errors: dict[str, list[str]] = {}
_attempt_lock = threading.Lock()


class RetryableInfraError(InfraError):
    """Raised out of ``run_trial`` only when Prefect is going to retry it."""


def retry_on_infra(task: Task, task_run: TaskRun, state: State) -> bool:
    """Retry only infrastructure faults (SPEC §2)."""
    return isinstance(state.result(raise_on_failure=False), InfraError)


# The task functions keep their own module-level names (``trial_task_body`` ...) so that
# cloudpickle ships them to Dask workers *by reference*; a function only reachable through its
# Task wrapper would be pickled by value, dragging this module's lock along.


def trial_task_body(spec: TrialSpec, settings: TrialSettings, label: str) -> TrialRecord:
    """One trial; Prefect retries it on ``InfraError`` up to ``settings.retries`` times."""
    attempt_no = task_run_runtime.get_run_count()
    key = task_run_runtime.get_id() or label
    adapter = adapter_for(settings.project_root)
    last = attempt_target(adapter, spec, settings.candidate, settings.timeout_s)
    with _attempt_lock:
        errors = _attempt_errors.setdefault(key, [])
        if last.error is not None:
            errors.append(last.error)
    if last.retryable and settings.retry.allows(attempt_no):
        if last.retry_after:
            time.sleep(capped_retry_after(last.retry_after))  # Retry-After, then the backoff
        raise RetryableInfraError(last.error)
    with _attempt_lock:
        errors = _attempt_errors.pop(key, [])
    return finish_trial(adapter, spec, settings, last, errors, attempt_no)


run_trial = task(
    trial_task_body,
    name="run_trial",
    task_run_name="{label}",
    retry_condition_fn=retry_on_infra,
    persist_result=False,
    cache_policy=NO_CACHE,
)


def batch_task_body(specs: list[dict[str, Any]], settings: TrialSettings) -> list[TrialRecord]:
    """Several trials in one task run, each retried, recorded and scored on its own.

    The specs travel as plain dicts: Dask walks lists of task arguments, and a pydantic model
    is iterable (it would arrive as tuples of its fields).
    """
    adapter = adapter_for(settings.project_root)
    return [
        run_trial_with_retries(adapter, TrialSpec.model_validate(spec), settings) for spec in specs
    ]


run_trial_batch = task(
    batch_task_body, name="run_trial_batch", persist_result=False, cache_policy=NO_CACHE
)


def aggregate_task_body(plan: EvaluationPlan, records: Sequence[TrialRecord]) -> SplitResult:
    """Aggregate fresh and reused trials into the SplitResult, and store it."""
    return finish_evaluation(plan, records)


aggregate_evaluation = task(
    aggregate_task_body, name="aggregate", persist_result=False, cache_policy=NO_CACHE
)
