"""Prefect tasks: thin wrappers around :mod:`honesteval.evaluation.trial` and
:mod:`honesteval.stats`.

``run_trial`` is one task run per trial (named ``<task>-t<k>``): the target, retried by
Prefect on ``InfraError`` (``retry_condition_fn``), its rollout written to the store; then
``score`` (``score-<task>-t<k>``) grades it downstream, retried alone on a scorer's
``InfraError``. A trial ending ``infra_error`` / ``scorer_error`` ends its task run in a
Failed-type state named ``InfraError`` / ``ScorerError``. ``run_trial_batch`` and
``score_batch`` do the same for several trials in one task run each, every trial with its own
in-process retries, record and status: Prefect costs ~4–6 ms of CPU per task run here, so big
evaluations batch to keep orchestration under 1 ms per trial. ``aggregate`` and ``decide`` run
downstream.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from prefect import State
from prefect.cache_policies import NO_CACHE
from prefect.client.schemas.objects import TaskRun
from prefect.runtime import flow_run as flow_run_runtime
from prefect.runtime import task_run as task_run_runtime
from prefect.states import Cancelled, Failed
from prefect.tasks import Task

from honesteval import interrupts
from honesteval.adapters.rate_limit import paced_by
from honesteval.errors import InfraError
from honesteval.evaluation import progress
from honesteval.evaluation.call_journal import RunEnded, TrialCalls
from honesteval.evaluation.plan import EvaluationPlan, adapter_for, finish_tally
from honesteval.evaluation.tally import EvaluationTally
from honesteval.evaluation.trial import (
    Attempt,
    TrialSettings,
    TrialSpec,
    attempt_trial,
    grade,
    grade_isolated,
    isolated,
    record_rollout,
    run_target_with_retries,
)
from honesteval.models import GateConfig, GateDecision, Paid, SplitResult, TrialRecord
from honesteval.orchestration.dask_watch import relay_from_worker, stop_asked
from honesteval.orchestration.rate_limits import PrefectPacer
from honesteval.retry import capped_retry_after
from honesteval.server.prefect_seams import task_run_state_markers
from honesteval.stats import decide
from honesteval.store.trial_log import deferred_sync

__all__ = [
    "FAILED_STATE_NAMES",
    "aggregate_evaluation",
    "decide_task",
    "retry_on_infra",
    "run_trial",
    "run_trial_batch",
    "score",
    "score_batch",
]

#: Trial statuses that end a per-trial task run in a Failed-type state with this name: they
#: are missing data (red in the UI, filterable by state name). Every other status, including
#: a candidate's own failure, is a graded result and ends Completed. The flow goes on.
FAILED_STATE_NAMES = {"infra_error": "InfraError", "scorer_error": "ScorerError"}


class _NoStateDumps(logging.Filter):
    """Drops Prefect's two ERROR records about a task run that ended in one of honesteval's
    named states (missing data): ``Task run failed with state: InfraError(..., result=
    TrialRecord(<every field>))`` with a traceback of no exception (``NoneType: None``), and
    ``Finished in state InfraError(...)``. The flow logs one short line per missing trial
    instead, and a summary line (``flows/_execute.py``)."""

    markers = task_run_state_markers(FAILED_STATE_NAMES.values())

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.ERROR or not isinstance(record.msg, str):
            return True
        return not any(marker in record.msg for marker in self.markers)


def _drop_state_dumps() -> None:
    """Once per process (this module is imported wherever trials run: CLI, serve, workers)."""
    engine_logger = logging.getLogger("prefect.task_runs")
    if not any(isinstance(f, _NoStateDumps) for f in engine_logger.filters):
        engine_logger.addFilter(_NoStateDumps())


_drop_state_dumps()
# A Dask worker's trials report to the flow's process (this module is imported on workers).
progress.relay_to(relay_from_worker)

# Errors of earlier attempts of a task run, keyed by task-run id: Prefect re-enters the task
# body for each retry (in the same process), and the final record lists every attempt's error.
_attempt_errors: dict[str, list[str]] = {}
#: what the earlier attempts of a trial Prefect retries paid (``Attempt.paid``), by the same key
_attempt_paid: dict[str, Paid] = {}
_attempt_lock = threading.Lock()


class RetryableInfraError(InfraError):
    """Raised out of ``run_trial`` only when Prefect is going to retry it."""


def retry_on_infra(task: Task, task_run: TaskRun, state: State) -> bool:
    """Retry only infrastructure faults (SPEC §2)."""
    return isinstance(state.result(raise_on_failure=False), InfraError)


def _task(fn: Callable[..., Any], name: str, **options: Any) -> Task[Any, Any]:
    """A honesteval task: its value stays in memory, never persisted by Prefect (trial records
    are stored by honesteval itself, in the project's state folder), and never cached (every
    call is a new trial or a new grading)."""
    return Task(fn=fn, name=name, persist_result=False, cache_policy=NO_CACHE, **options)


# The task functions keep their own module-level names (``trial_task_body`` ...) so that
# cloudpickle ships them to Dask workers *by reference*; a function only reachable through its
# Task wrapper would be pickled by value, dragging this module's lock along.


def trial_state(record: TrialRecord) -> TrialRecord | State:
    """The task run's final state for a finished trial (the record is its data either way)."""
    name = FAILED_STATE_NAMES.get(record.status)
    if name is None:
        return record
    return Failed(name=name, message=record.error or record.status, data=record)


def abandoned() -> State:
    """The state of a task run given up because the run is stopping: nothing recorded."""
    return Cancelled(message="the run was interrupted (Ctrl-C or SIGTERM)")


@contextlib.contextmanager
def _stops_on_storage_error() -> Iterator[None]:
    """A storage error that stopped the run (a full disk: :func:`interrupts.storage_failed`)
    ends the block quietly: the run says it once, at its end, not once per task run."""
    try:
        yield
    except OSError:
        if interrupts.failure() is None:
            raise


def trial_task_body(spec: TrialSpec, settings: TrialSettings, label: str) -> TrialRecord | State:
    """One trial's target; Prefect retries it on ``InfraError`` up to ``settings.retries``
    times. The rollout is written to the store before the ``score`` task grades it.
    A stopping run (Ctrl-C, SIGTERM) starts no target, and records none it gave up.

    Its first attempt is a call in the run's journal; run again after a lost Dask worker,
    it takes the record that worker stored instead of calling the target again."""
    attempt_no = task_run_runtime.get_run_count()
    key = task_run_runtime.get_id() or label
    if interrupts.requested():
        return abandoned()
    adapter = adapter_for(settings.project_root, settings.scoring)
    with _stops_on_storage_error():
        try:
            with TrialCalls(settings) as calls:
                if attempt_no <= 1:  # a retry is an attempt of the same call
                    stored = calls.stored(spec)
                    if stored is not None:
                        return stored if stored.awaiting_score else trial_state(stored)
                    calls.begin(spec)
                with paced_by(PrefectPacer()):  # the rate limit is the Prefect server's, shared
                    last = attempt_trial(adapter, spec, settings)
        except (interrupts.TrialAbandoned, RunEnded):
            return abandoned()
        return _record_attempt(spec, settings, last, key, attempt_no)
    return abandoned()


def _record_attempt(
    spec: TrialSpec, settings: TrialSettings, last: Attempt, key: str, attempt_no: int
) -> TrialRecord | State:
    """Retry the attempt (through Prefect) or record the trial's rollout or its end."""
    with _attempt_lock:
        errors = _attempt_errors.setdefault(key, [])
        if last.error is not None:
            errors.append(last.error)
        last.after(_attempt_paid.pop(key, None))
    if last.retryable and settings.retry.allows(attempt_no) and not interrupts.requested():
        if last.retry_after:
            time.sleep(capped_retry_after(last.retry_after))  # Retry-After, then the backoff
        if last.paid is not None:
            with _attempt_lock:
                _attempt_paid[key] = last.paid
        raise RetryableInfraError(last.error)
    with _attempt_lock:
        errors = _attempt_errors.pop(key, [])
    record = record_rollout(spec, settings, last, errors, attempt_no)
    return record if record.awaiting_score else trial_state(record)


run_trial = _task(
    trial_task_body,
    name="run_trial",
    task_run_name="{label}",
    retry_condition_fn=retry_on_infra,
)


def score_task_body(spec: TrialSpec, settings: TrialSettings, record: TrialRecord) -> Any:
    """Grade one recorded rollout. A scorer's ``InfraError`` makes Prefect retry this task
    alone (never the rollout) up to ``settings.retries`` times; then it is a scorer_error."""
    if interrupts.requested():
        return abandoned()  # the rollout stays stored, awaiting its score
    adapter = adapter_for(settings.project_root, settings.scoring)
    retrying = task_run_runtime.get_run_count() <= settings.retries
    with _stops_on_storage_error():
        try:
            return trial_state(grade(adapter, spec.task, record, settings, raise_infra=retrying))
        except interrupts.TrialAbandoned:
            return abandoned()
    return abandoned()


score = _task(
    score_task_body,
    name="score",
    task_run_name="score-{spec.label}",
    retry_condition_fn=retry_on_infra,
)


def batch_task_body(
    specs: list[dict[str, Any]], settings: TrialSettings, label: str = "batch"
) -> list[TrialRecord]:
    """The targets of several trials in one task run, each retried and recorded on its own;
    the ``score_batch`` task grades them. A stopping run (Ctrl-C, SIGTERM) starts no further
    target; the batch returns the trials it finished. Each target call is a line in the run's
    journal first: run again after a lost Dask worker, the batch takes every trial that
    worker stored and calls the target again only for the one it had in flight.

    The specs travel as plain dicts: Dask walks lists of task arguments, and a pydantic model
    is iterable (it would arrive as tuples of its fields).
    """
    adapter = adapter_for(settings.project_root, settings.scoring)
    live = progress.label_of(settings.candidate.name, settings.split)
    out: list[TrialRecord] = []
    run_id = flow_run_runtime.get_id()
    # the rate limit is the Prefect server's, shared with every other worker
    with (
        TrialCalls(settings) as calls,
        _stops_on_storage_error(),
        deferred_sync(),
        paced_by(PrefectPacer()),
    ):
        for raw in specs:
            spec = TrialSpec.model_validate(raw)
            record = calls.stored(spec)  # stored (and reported) by a lost worker
            if record is not None:
                out.append(record)
                continue
            if stop_asked(run_id):  # on a Dask worker: the run's process was stopped
                break
            try:
                calls.begin(spec)
                record = isolated(
                    spec, settings, lambda s=spec: run_target_with_retries(adapter, s, settings)
                )
            except (interrupts.TrialAbandoned, RunEnded):
                break
            out.append(record)
            # the CLI's count moves per trial, not per batch
            progress.trial_ran(live, None if record.awaiting_score else record.status)
    return out


run_trial_batch = _task(batch_task_body, name="run_trial_batch", task_run_name="{label}")


def score_batch_body(
    specs: list[dict[str, Any]],
    settings: TrialSettings,
    records: list[TrialRecord],
    label: str = "score-batch",
) -> list[TrialRecord]:
    """Grade a batch's recorded rollouts, each retrying its scorer alone on ``InfraError``."""
    adapter = adapter_for(settings.project_root, settings.scoring)
    by_key = {(s.task.id, s.seed): s for s in map(TrialSpec.model_validate, specs)}
    live = progress.label_of(settings.candidate.name, settings.split)
    out = []
    with _stops_on_storage_error(), deferred_sync():  # one fsync for the batch
        for r in records:
            try:
                graded = (
                    grade_isolated(adapter, by_key[(r.task_id, r.seed)].task, r, settings)
                    if r.awaiting_score
                    else r
                )
            except interrupts.TrialAbandoned:  # the rest stays stored, awaiting its score
                graded = r
            if graded is not r:
                progress.trial_graded(live, graded.status)
            out.append(graded)
    return out


score_batch = _task(score_batch_body, name="score", task_run_name="{label}")


def aggregate_task_body(plan: EvaluationPlan, tally: EvaluationTally) -> SplitResult:
    """Aggregate the evaluation's tally (its fresh and reused trials) into the SplitResult,
    and store it."""
    return finish_tally(plan, tally)


aggregate_evaluation = _task(aggregate_task_body, name="aggregate")


def decide_task_body(current: SplitResult, candidate: SplitResult, cfg: GateConfig) -> GateDecision:
    """The gate's decision (SPEC §4), downstream of both evaluations."""
    return decide(current, candidate, cfg)


decide_task = _task(decide_task_body, name="decide")
