"""Run an :class:`EvaluationPlan` inside a flow: map trials over a bounded task runner,
show progress, aggregate downstream, publish artifacts (:mod:`._artifacts`). Shared by
every flow."""

from __future__ import annotations

import functools
import logging
import math
import queue
import time
import typing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypedDict, TypeVar
from uuid import UUID

from prefect import Flow, State, get_run_logger
from prefect.client.schemas.objects import RunInput, TaskRunResult
from prefect.exceptions import CancelledRun
from prefect.futures import PrefectFuture
from prefect.logging.loggers import PrefectLogAdapter
from prefect.results import ResultRecord, ResultRecordMetadata  # type: ignore[attr-defined]
from prefect.states import Cancelled, Completed, Failed
from prefect.task_runners import TaskRunner, ThreadPoolTaskRunner
from prefect.utilities.annotations import quote

from honesteval import interrupts
from honesteval.evaluation import progress
from honesteval.evaluation.budget import SpendGuard
from honesteval.evaluation.call_journal import CallJournal
from honesteval.evaluation.plan import EvaluationPlan, kept_of, raise_if_stopped, tally_of
from honesteval.evaluation.trial import (
    TrialSettings,
    TrialSpec,
    crashed_records,
)
from honesteval.models import (
    MISSING_STATUSES,
    EvaluateRequest,
    GateRequest,
    SplitResult,
    TaskRunnerKind,
    TrialRecord,
)
from honesteval.orchestration.dask_watch import (
    CHECK_EVERY_S,
    NO_LIVE_WORKER,
    ClusterWatch,
    NoLiveWorker,
)
from honesteval.orchestration.flows._artifacts import (
    ProgressBar,
    RolloutsSample,
    RolloutsTable,
    publish_summary,
)
from honesteval.orchestration.rate_limits import keep_limits_of
from honesteval.orchestration.served_run import leave_serves_session
from honesteval.orchestration.tasks import (
    aggregate_evaluation,
    run_trial,
    run_trial_batch,
    score,
    score_batch,
)
from honesteval.project.loader import Project
from honesteval.server.in_process import note_flow_run, track_task_run
from honesteval.server.prefect_seams import signature_of, with_function
from honesteval.views.text import missing_summary_line, missing_trial_line


class RunOptions(TypedDict):
    """How a flow run executes its trials: one value instead of loose runner arguments."""

    max_concurrency: int
    batch_size: int | None
    runner_kind: TaskRunnerKind
    dask_address: str | None


def run_options(request: EvaluateRequest | GateRequest, project: Project) -> RunOptions:
    """How a request's trials run (the project's ``max_concurrency`` unless it says)."""
    return RunOptions(
        max_concurrency=request.max_concurrency or project.config.max_concurrency,
        batch_size=request.batch_size,
        runner_kind=request.task_runner,
        dask_address=request.dask_address,
    )


#: Up to this many trials, one task run per trial (readable in the UI); above, batches. Each
#: trial is two task runs (run_trial, score), ~10-40 ms each here: 200 no-op trials took
#: 5.0-5.4 s with a task run per trial vs 1.6-3.7 s in batches of 7 (in-process, quiet 2-core
#: machine).
PER_TRIAL_LIMIT = 64
#: Batches per worker slot: two waves keep every slot busy with few task runs (measured in
#: bench/overhead.py: more, smaller batches cost more in engine time than they win back).
BATCHES_PER_SLOT = 2
#: No batch smaller than this above PER_TRIAL_LIMIT: task runs, not slots, are the cost.
MIN_BATCH = 8
#: No batch bigger: what a run holds at once is its window of batches in flight (their
#: specs, rollouts awaiting a score, records), so memory stays flat however many trials.
#: 50,000 no-op trials at concurrency 32 (bench/evaluate_scale.py): peak RSS 290 MB at 128,
#: 314 MB at 256, for the same CPU (27.3 s, 27.1 s): the extra task runs are lost in it.
MAX_BATCH = 128
_PROGRESS_EVERY_S = 0.5
_LOG_EVERY_S = 3.0
#: After a stop, how long the dispatch waits for the task runs that had begun: targets in
#: processes are stopped at once, python targets and scorers get GRACE_S, then are given up.
STOP_WAIT_S = interrupts.GRACE_S + 1.0
#: Flow results are persisted as JSON (in Prefect's result storage), so the API and the UI
#: show the SplitResult / GateDecision of any run.
RESULT_OPTIONS: dict[str, Any] = {"persist_result": True, "result_serializer": "json"}
#: honesteval's own lines in a flow run's logs (see :func:`honesteval_logger`).
LOGGER_NAME = "prefect.flow_runs.honesteval"
#: Missing trials named one line each in the Logs tab, per evaluation; the rest are counted in
#: the summary line (and every one is in the rollouts table).
MISSING_LINES = 50


def auto_batch_size(n_trials: int, max_concurrency: int) -> int:
    """1 for small runs; else enough batches to keep every slot busy, and few task runs, up
    to :data:`MAX_BATCH` trials a batch."""
    if n_trials <= PER_TRIAL_LIMIT:
        return 1
    waves = math.ceil(n_trials / (max_concurrency * BATCHES_PER_SLOT))
    return min(MAX_BATCH, max(MIN_BATCH, waves))


@contextmanager
def task_runner(
    kind: TaskRunnerKind, max_concurrency: int, dask_address: str | None = None
) -> Iterator[TaskRunner[Any]]:
    """A started task runner with bounded concurrency (never an unbounded thread pool)."""
    runner: TaskRunner[Any]
    if kind == "thread":
        runner = ThreadPoolTaskRunner(max_workers=max_concurrency)
    else:
        from honesteval.orchestration.flows._dask import dask_task_runner

        runner = dask_task_runner(max_concurrency, dask_address)
    with runner:
        yield runner


def _crashed(specs: list[TrialSpec], plan: EvaluationPlan, exc: BaseException) -> list[TrialRecord]:
    """A task run that died in the engine: its trials are missing data, never zeros, and are
    written to disk like every other trial (the next run retries them); trials of it that
    already finished ok keep their records."""
    return crashed_records(specs, plan.settings, exc, plan.started_at)


def _no_walk(payload: Any, runner_kind: TaskRunnerKind) -> Any:
    """quote() spares Prefect a walk over every spec or record looking for futures (thread
    runner).

    The Dask runner ships parameters before Prefect unwraps annotations, and Dask walks the
    quote (a tuple), turning a record in it into tuples of its fields: there the payload goes
    as it is (Dask walks a list anyway).
    """
    return quote(payload) if runner_kind == "thread" else payload


def honesteval_logger() -> logging.LoggerAdapter[logging.Logger]:
    """The flow run's logger for honesteval's own lines, at INFO whatever the
    ``PREFECT_LOGGING_LEVEL`` (tests and the CLI set WARNING to spare each task run its INFO
    line): a child of ``prefect.flow_runs`` with its level set, so its records reach the API
    and the Logs tab of the run."""
    run_logger = get_run_logger()
    logger = logging.getLogger(LOGGER_NAME)
    logger.setLevel(logging.INFO)
    extra = getattr(run_logger, "extra", None) or {}
    return PrefectLogAdapter(logger, extra)


def tag_flow_run(candidate: str, split: str, *more: str) -> None:
    """Tags that say what a run evaluated: ``honesteval``, ``candidate:<name>``, ``split:<s>``,
    and ``more`` (a gate's ``verdict:<verdict>``)."""
    from prefect.client.orchestration import get_client
    from prefect.runtime import flow_run

    run_id = flow_run.get_id()
    if run_id is None:
        return
    note_flow_run(run_id)
    wanted = ["honesteval", f"candidate:{candidate}", f"split:{split}", *more]
    with get_client(sync_client=True) as client:
        current = client.read_flow_run(UUID(run_id)).tags
        client.update_flow_run(UUID(run_id), tags=list(dict.fromkeys([*current, *wanted])))


class _Progress:
    """One evaluation's trials as they finish, kept as small as what is made of them: the
    tally its result is aggregated from (never the records), the rollouts table's rows, and
    what the UI shows meanwhile: the progress artifact, INFO lines with running counts,
    coverage so far and running reward, and a WARNING when coverage drops below
    ``min_coverage``."""

    def __init__(self, plan: EvaluationPlan):
        self.plan = plan
        self.total = plan.trials_planned
        self.tally = tally_of(plan)
        self.rollouts = RolloutsSample(plan)
        self.min_coverage = plan.project.gate_config.min_coverage
        self.logger = honesteval_logger()
        self.warned = False
        self.missing = 0  # missing trials this run has seen (reused ones were named before)
        self.bar = ProgressBar(plan, self.done)
        self.last_artifact = self.last_log = time.monotonic()
        self.label = progress.label_of(plan.candidate, plan.split)
        progress.begin(self.label, self.total, (r.status for r in plan.reused.values()))
        self.log()

    @property
    def done(self) -> int:
        return self.tally.n_final

    def log(self) -> None:
        self.logger.info("%s on %s: %s", self.plan.candidate, self.plan.split, self.tally.line())
        below = self.tally.below(self.min_coverage)
        if below and not self.warned:
            scored, finished = self.tally.coverage()
            self.logger.warning(
                "%s on %s: coverage so far %d/%d finished tasks is below min_coverage %.2f",
                self.plan.candidate,
                self.plan.split,
                scored,
                finished,
                self.min_coverage,
            )
        self.warned = below

    def finished(self, records: list[TrialRecord]) -> None:
        self.name_missing(records)
        self.tally.add(records)
        self.rollouts.add(records)
        progress.settle(self.label, self.done, self.tally.statuses)
        now = time.monotonic()
        last = self.done == self.total
        if now - self.last_artifact >= _PROGRESS_EVERY_S or last:
            self.bar.update(self.done)
            self.last_artifact = now
        if now - self.last_log >= _LOG_EVERY_S or last:
            self.log()
            self.last_log = now

    def name_missing(self, records: list[TrialRecord]) -> None:
        """One short WARNING line per missing trial: task, seed, status, error text."""
        for r in records:
            if r.status not in MISSING_STATUSES:
                continue
            self.missing += 1
            if self.missing <= MISSING_LINES:
                self.logger.warning("%s", missing_trial_line(r))

    def summary(self, result: SplitResult) -> None:
        """The lines after the per-trial ones: the target calls repeated, by task; how much
        is missing, what it did to coverage (ERROR when coverage fell below
        ``min_coverage``: the run ends LowCoverage)."""
        if result.trials_repeated:
            by_task = ", ".join(f"{t} {n}" for t, n in result.repeats_by_task.items())
            self.logger.warning(
                "%s on %s: %d target call(s) repeated (by task: %s): a lost Dask worker "
                "began them and stored no rollout",
                self.plan.candidate,
                self.plan.split,
                result.trials_repeated,
                by_task,
            )
        missing = result.trials_infra_error + result.trials_scorer_error
        if not missing:
            return
        low = result.coverage < self.min_coverage
        unnamed = missing - min(self.missing, MISSING_LINES)
        self.logger.log(
            logging.ERROR if low else logging.WARNING,
            "%s",
            missing_summary_line(result, self.min_coverage)
            + (f" ({unnamed} not named above: see the rollouts table)" if unnamed > 0 else ""),
        )


def run_plans(
    plans: list[EvaluationPlan],
    *,
    max_concurrency: int,
    batch_size: int | None = None,
    runner_kind: TaskRunnerKind = "thread",
    dask_address: str | None = None,
    guard: SpendGuard | None = None,
) -> list[SplitResult]:
    """Run several evaluations' trials concurrently in one task runner (for Dask, one
    cluster), tallying each trial as it finishes (:class:`_Progress`: no list of records),
    then aggregate each downstream; returns the stored SplitResults in order. With a
    ``guard``, a task run is submitted only for the trials that fit the budget; the ones
    that never started are missing data in the results.

    Ctrl-C or SIGTERM (:mod:`honesteval.interrupts`) stops the trials within seconds, keeping
    every trial and rollout already stored, and raises :class:`~honesteval.interrupts.
    Interrupted` (what was kept) instead of aggregating. On Dask, a cluster with no live
    worker for ``dask.no_worker_timeout_s`` while no trial finishes raises
    :class:`~honesteval.orchestration.dask_watch.NoLiveWorker` (what was kept).
    """
    with interrupts.stop_on_signals():
        raise_if_stopped(plans)
        progressions = [_Progress(plan) for plan in plans]
        if guard is not None:
            guard.measure(r for plan in plans for r in plan.reused.values())
        try:
            # every trial reused: no runner to start (for Dask, no cluster)
            if any(plan.todo or plan.to_score for plan in plans):
                keep_limits_of(plans)
                with (
                    task_runner(runner_kind, max_concurrency, dask_address) as runner,
                    _call_journals(plans) as journals,
                ):
                    watch = _cluster_watch(runner, runner_kind, plans)
                    dispatch = _Dispatch(runner, runner_kind, max_concurrency, watch, guard)
                    with interrupts.waking(dispatch.wake):
                        for i, plan in enumerate(plans):
                            work = len(plan.todo) + len(plan.to_score)
                            size = batch_size or auto_batch_size(work, max_concurrency)
                            dispatch.queue(i, plan, size, journals[i].name)
                        for i, finished in dispatch.finished():
                            progressions[i].finished(finished)
                    for p, journal in zip(progressions, journals, strict=True):
                        p.tally.count_calls(journal.calls())
            raise_if_stopped(plans)
            if guard is not None:
                guard.mark(p.tally for p in progressions)
            return _aggregate(plans, progressions)
        finally:
            for p in progressions:
                p.bar.close()
                progress.end(p.label)


@contextmanager
def _call_journals(plans: list[EvaluationPlan]) -> Iterator[list[CallJournal]]:
    """Each evaluation's call journal for this run, removed when the run ends (whichever
    way: a batch still running on a worker then starts no further trial)."""
    journals: list[CallJournal] = []
    try:
        for plan in plans:
            journals.append(CallJournal.create(plan.project.state_dir))
        yield journals
    finally:
        for journal in journals:
            journal.remove()


def _cluster_watch(
    runner: TaskRunner[Any], runner_kind: TaskRunnerKind, plans: list[EvaluationPlan]
) -> ClusterWatch | None:
    """On Dask, the watch that counts the workers' per-trial reports and stops a run left
    with no live worker (the first plan's project says how long it may wait)."""
    if runner_kind != "dask":
        return None
    from prefect.runtime import flow_run

    timeout_s = plans[0].project.config.dask.no_worker_timeout_s
    client = runner.client  # type: ignore[attr-defined]
    return ClusterWatch(
        client, timeout_s, lambda: interrupts.kept_line(*kept_of(plans)), flow_run.get_id()
    )


def _aggregate(plans: list[EvaluationPlan], progressions: list[_Progress]) -> list[SplitResult]:
    """Aggregate each plan's tally downstream; publish summaries and rollouts tables."""
    # The last progress counts and the rollouts tables are posted while results aggregate.
    for p in progressions:
        p.bar.finish()
        progress.end(p.label)
    tables = [RolloutsTable(plan, p.rollouts) for plan, p in zip(plans, progressions, strict=True)]
    results = []
    for plan, p in zip(plans, progressions, strict=True):
        result: SplitResult = run_task(aggregate_evaluation, quote(plan), quote(p.tally))
        publish_summary(plan, result)
        p.summary(result)
        results.append(result)
    for table in tables:
        table.wait()
    return results


F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")

#: The line of the last interruption in this process (a subflow's, for its parent flow).
_interrupted_line: list[str] = []


class _StopNoise(logging.Filter):
    """Once this process is stopping (Ctrl-C, SIGTERM), what Prefect logs about what the stop
    ended is not news: the run's ``Cancelled`` state says what was kept. Out of the terminal:
    each task run the stop cancelled. Out of the logs: the engine of a deployed run
    (``honesteval serve``'s child process) calling the run's ``Cancelled`` end an "unexpected
    exception", with a traceback (it raises the result of the run it has just ended)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not interrupts.requested():
            return True
        if interrupts.failure() is not None and record.levelno >= logging.ERROR:
            return False  # a full disk: the run's end says it in one line, naming the file
        if record.name == "prefect.task_runs":
            return "Finished in state Cancelled(" not in record.getMessage()
        return not (record.exc_info and isinstance(record.exc_info[1], CancelledRun))


_stop_noise: list[_StopNoise] = []


def _quiet_stop_noise() -> None:
    """Install :class:`_StopNoise` once per process: on the terminal's handlers (Prefect's
    console handler) and on the flow-run logger the engine reports through."""
    if _stop_noise:
        return
    from prefect.logging.handlers import PrefectConsoleHandler

    _stop_noise.append(_StopNoise())
    for handler in logging.getLogger().handlers:
        if isinstance(handler, PrefectConsoleHandler):
            handler.addFilter(_stop_noise[0])
    logging.getLogger("prefect.flow_runs").addFilter(_stop_noise[0])


def ends_cancelled_on_interrupt(fn: F) -> F:
    """A flow function whose run ends ``Cancelled`` when Ctrl-C or SIGTERM stopped it (the
    state's message says what was kept), never ``Failed`` or left ``Running``: the same
    for a subflow it called that was stopped, and for a stop outside its trials (loading
    the plan, aggregating), which ``KeyboardInterrupt`` breaks off where it is. A run
    ``honesteval serve`` started leaves serve's session first (:func:`leave_serves_session`)."""

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        _quiet_stop_noise()
        try:
            # Handled here, not only around the trials: a deployed run's process (`serve`)
            # has no CLI around it.
            with interrupts.stop_on_signals():
                leave_serves_session()
                return fn(*args, **kwargs)
        except interrupts.Interrupted as exc:
            _interrupted_line[:] = [str(exc)]
            return Cancelled(message=str(exc))
        except NoLiveWorker as exc:  # one line, no traceback in the logs
            return Failed(name=NO_LIVE_WORKER, message=str(exc))
        except KeyboardInterrupt:
            if not interrupts.requested():
                raise
            return Cancelled(message=interrupts.STOPPED_LINE)
        except OSError as exc:  # a write the run needs failed outside a trial (the ledger)
            interrupts.storage_failed(exc)
            message = interrupts.storage_error_line(interrupts.failure() or exc)
            return Failed(name=interrupts.STORAGE_ERROR, message=message)
        except Exception:
            if not interrupts.requested():
                raise
            failure = interrupts.failure()
            if failure is not None:  # a full disk: one line, no traceback in the logs
                message = interrupts.storage_error_line(failure)
                return Failed(name=interrupts.STORAGE_ERROR, message=message)
            line = _interrupted_line[0] if _interrupted_line else "interrupted"
            return Cancelled(message=line)

    # Prefect validates a flow's parameters from its annotations, read in the namespace of
    # the function it is given: the wrapper carries them resolved in the flow's own module.
    run.__signature__ = signature_of(fn)  # type: ignore[attr-defined]
    run.__annotations__ = typing.get_type_hints(fn, include_extras=True)
    return run  # type: ignore[return-value]


def planned_flow(template: Flow[..., T], run: Callable[[], T]) -> Flow[..., T]:
    """``template`` as it runs for a caller that planned already (the API, with its plan in
    hand): the same flow (name, run name, options; its parameters checked, and recorded for
    the UI), ``run`` in place of its function, which plans again from the parameters (as a
    run started from a deployment does: all it has is JSON).

    The parameters the caller passes are the ones its plan was made from
    (:func:`honesteval.models.requests.flow_parameters`): they are recorded, not used again.
    """

    def planned(*_parameters: Any, **_named: Any) -> T:
        return run()

    planned.__signature__ = signature_of(template.fn)  # type: ignore[attr-defined]
    planned.__annotations__ = dict(template.fn.__annotations__)
    planned.__doc__, planned.__name__ = template.fn.__doc__, template.fn.__name__
    return with_function(template, ends_cancelled_on_interrupt(planned))


def run_plan(plan: EvaluationPlan, **options: Any) -> SplitResult:
    """Run one evaluation's trials as Prefect task runs; return the stored SplitResult."""
    return run_plans([plan], **options)[0]


def run_task(task: Any, *args: Any, **kwargs: Any) -> Any:
    """Call a task in the flow's thread and return its result (its run is tracked)."""
    state = task(*args, return_state=True, **kwargs)
    track_task_run(state.state_details.task_run_id)
    return state.result()


def finished_value(fut: PrefectFuture[Any]) -> Any:
    """What a finished task run returned (its record(s), also on a Failed-type InfraError /
    ScorerError state) or the exception it died of.

    Read from the final state in memory: ``PrefectFuture.result()`` goes through Prefect's
    event-loop thread, ~11 ms a call while that loop is busy recording task runs (measured
    with 126 task runs at concurrency 32), and this runs on the flow's thread, which submits
    the downstream ``score`` task runs. Results held elsewhere take the documented path.
    """
    fut.wait()  # returns at once: the task run is done
    data = fut.state.data
    if isinstance(data, ResultRecord):
        return data.result
    if data is None or isinstance(data, ResultRecordMetadata):
        try:
            return fut.result(raise_on_failure=False)
        except Exception as exc:  # a Dask future lost with its task (cancelled, worker gone)
            return exc
    return data


#: What a dispatch step yields when the budget lets no trial start before a running one ends.
_WAIT = object()


class _Dispatch:
    """Submits ``run_trial`` task runs, then a ``score`` task run downstream of each one that
    produced a rollout (per trial, or per batch), and yields trials as they are final.

    At most ``window`` task runs are in flight, one a slot of the runner (a batch counts from
    its ``run_trial`` task run's submission until its ``score`` task run ends): the rest of
    the work waits in :meth:`queue`, unsubmitted, and a batch's score runs as soon as its
    targets end, never queued behind other targets. What a run holds in memory at once (the
    specs sent, the rollouts awaiting their score, Prefect's state of each task run) is then
    bounded by ``window`` × :data:`MAX_BATCH` trials, whatever the number of trials; submitted
    all at once, the scores queued behind every target and a 50,000-trial run held nearly
    every record at its peak. A slot waits for the next submission only while this thread
    handles the one that ended (milliseconds; a batch runs for seconds).
    """

    def __init__(
        self,
        runner: TaskRunner[Any],
        runner_kind: TaskRunnerKind,
        window: int,
        watch: ClusterWatch | None = None,
        guard: SpendGuard | None = None,
    ):
        self.runner = runner
        self.runner_kind = runner_kind
        self.window = window
        self.watch = watch
        #: the budget's guard, and the trials it let start that have not settled yet:
        #: (plan index, task id, trial)
        self.guard = guard
        self._guarded: set[tuple[int, str, int]] = set()
        #: per evaluation, the task runs not submitted yet: each step submits one
        self._queued: list[Iterator[object]] = []
        #: finished futures; None: the run is asked to stop (:meth:`wake`)
        self.done: queue.SimpleQueue[PrefectFuture[Any] | None] = queue.SimpleQueue()
        #: future -> (plan index, plan, its trials, "run" or "score")
        self.pending: dict[PrefectFuture[Any], tuple[int, EvaluationPlan, list[Any], str]] = {}
        #: score future -> the rollout records it grades
        self.awaiting: dict[PrefectFuture[Any], list[TrialRecord]] = {}
        self._with_retries: dict[tuple[str, int, float], Any] = {}

    def retrying(self, task: Any, settings: TrialSettings) -> Any:
        """The per-trial task with Prefect retries for ``InfraError`` (exponential, jittered),
        made once per flow run: ``with_options`` builds a new Task (~7 ms here)."""
        key = (task.name, settings.retries, settings.retry_backoff_s)
        if key not in self._with_retries:
            self._with_retries[key] = task.with_options(**settings.retry.prefect_options())
        return self._with_retries[key]

    def _submit(
        self,
        task: Any,
        params: dict[str, Any],
        i: int,
        plan: EvaluationPlan,
        chunk: list[Any],
        stage: str,
        dependencies: dict[str, set[RunInput]] | None = None,
    ) -> PrefectFuture[Any]:
        fut: PrefectFuture[Any] = self.runner.submit(task, params, dependencies=dependencies)
        self.pending[fut] = (i, plan, chunk, stage)
        track_task_run(fut.task_run_id)
        fut.add_done_callback(self.done.put)
        return fut

    def queue(self, i: int, plan: EvaluationPlan, size: int, journal: str) -> None:
        """The evaluation's trials (``size`` a task run, each call a line in ``journal``)
        and its stored rollouts to grade, submitted as the window allows (:meth:`top_up`)."""
        settings = plan.settings.model_copy(update={"calls_journal": journal})
        self._queued += [self._trials(i, plan, settings, size), self._scores(i, plan, size)]

    def top_up(self) -> None:
        """Submit queued task runs until ``window`` are in flight (none once stopping, none
        while the budget waits for the running trials to say what they cost)."""
        while self._queued and len(self.pending) < self.window and not interrupts.requested():
            step = next(self._queued[0], StopIteration)
            if step is StopIteration:
                self._queued.pop(0)
            elif step is _WAIT:
                return

    def _trials(
        self, i: int, plan: EvaluationPlan, settings: TrialSettings, size: int
    ) -> Iterator[object]:
        """Submit the evaluation's trials, ``size`` a task run, each run only for the trials
        the budget lets start (:data:`_WAIT`: none may start before a running one settles;
        once it is reached, the rest never start)."""
        trial_task = self.retrying(run_trial, settings) if size == 1 else run_trial_batch
        start = batch = 0
        while start < len(plan.todo):
            chunk = plan.todo[start : start + size]
            if self.guard is not None:
                fits = self.guard.reserve(len(chunk))
                if fits is None:
                    return  # the budget is reached: no record for the rest
                if fits == 0:
                    yield _WAIT
                    continue
                chunk = chunk[:fits]
                self._guarded.update((i, spec.task.id, spec.trial) for spec in chunk)
            if size == 1:
                spec = chunk[0]
                params = {"spec": spec, "settings": settings, "label": spec.label}
            else:
                label = f"batch-{batch:04d}-{chunk[0].label}"
                params = {"specs": self._specs(chunk), "settings": settings, "label": label}
            self._submit(trial_task, params, i, plan, chunk, "run")
            start, batch = start + len(chunk), batch + 1
            yield None

    def _settle(self, i: int, final: list[TrialRecord]) -> None:
        """Trials the budget let start are final: what they reported is spent."""
        if self.guard is None:
            return
        mine = []
        for r in final:
            key = (i, r.task_id, r.trial)
            if key in self._guarded:
                self._guarded.discard(key)
                mine.append(r)
        self.guard.settle(mine)

    def _scores(self, i: int, plan: EvaluationPlan, size: int) -> Iterator[object]:
        """Grade stored rollouts (``plan.to_score``); their targets do not run again."""
        for start in range(0, len(plan.to_score), size):
            pairs = plan.to_score[start : start + size]
            specs = [spec for spec, _ in pairs]
            records = [record for _, record in pairs]
            rollouts = _no_walk(records[0] if size == 1 else records, self.runner_kind)
            fut = self._submit_score(i, plan, specs, rollouts, per_trial=size == 1)
            self.awaiting[fut] = records
            yield None

    def _submit_score(
        self,
        i: int,
        plan: EvaluationPlan,
        specs: list[TrialSpec],
        rollouts: Any,
        *,
        per_trial: bool,
        upstream: PrefectFuture[Any] | None = None,
    ) -> PrefectFuture[Any]:
        """One ``score`` task run: per trial (Prefect retries its scorer's InfraError), or one
        for a batch of rollouts (each retried in process); ``upstream``, the task run whose
        rollouts it grades, is its parent in the UI."""
        name = "record" if per_trial else "records"
        parent: dict[str, set[RunInput]] | None = None
        if upstream is not None:
            parent = {name: {TaskRunResult(id=upstream.task_run_id)}}
        if per_trial:
            params = {"spec": specs[0], "settings": plan.settings, "record": rollouts}
            task = self.retrying(score, plan.settings)
            return self._submit(task, params, i, plan, specs, "score", parent)
        params = {
            "specs": self._specs(specs),
            "settings": plan.settings,
            "records": rollouts,
            "label": f"score-{specs[0].label}-batch",
        }
        return self._submit(score_batch, params, i, plan, specs, "score", parent)

    def _specs(self, chunk: list[TrialSpec]) -> Any:
        """The chunk's specs as plain dicts (:func:`run_trial_batch`), the trials of one task
        sharing one dump of it: a task's input can be large, and a batch holds its trials."""
        tasks: dict[str, dict[str, Any]] = {}
        dumps = []
        for spec in chunk:
            task = tasks.get(spec.task.id)
            if task is None:
                task = tasks[spec.task.id] = spec.task.model_dump()
            dumps.append({"task": task, "trial": spec.trial, "seed": spec.seed})
        return _no_walk(dumps, self.runner_kind)

    def _score(
        self, fut: PrefectFuture[Any], i: int, plan: EvaluationPlan, chunk: list[Any]
    ) -> PrefectFuture[Any]:
        """Submit the downstream score task run of a finished run (its upstream in the UI).

        The rollouts go in as the values already in hand, never the run's future: handed the
        future, Prefect made every score task run walk all its records looking for futures
        (measured: most of the last wave's scoring time at concurrency 32), and Dask kept
        the run's result on its worker until the score ran, so a worker lost meanwhile cost
        every trial of the batch a second target call.
        """
        out = finished_value(fut)
        per_trial = len(chunk) == 1 and not isinstance(out, list)
        rollouts = _no_walk(out, self.runner_kind)
        return self._submit_score(i, plan, chunk, rollouts, per_trial=per_trial, upstream=fut)

    def _next_done(self) -> PrefectFuture[Any] | None:
        """The next finished task run; on Dask, the scheduler is asked for its workers each
        :data:`~honesteval.orchestration.dask_watch.CHECK_EVERY_S` that none finishes."""
        if self.watch is None:
            return self.done.get()
        while True:
            try:
                fut = self.done.get(timeout=CHECK_EVERY_S)
            except queue.Empty:
                self.watch.check()  # raises NoLiveWorker after long enough
                continue
            self.watch.heard()
            return fut

    def wake(self) -> None:
        """Called by a stop (from the signal handler): the dispatch loop stops submitting."""
        self.done.put(None)

    def _drop_unstarted(self) -> None:
        """Cancel the task runs that have not begun (thread runner): nothing of them ran.
        Not on Dask, whose cancel drops a running batch's result while its worker goes on
        (the stop reaches the batch instead: :meth:`ClusterWatch.stop_workers`)."""
        if self.runner_kind != "thread":
            return
        for fut in list(self.pending):
            inner = getattr(fut, "wrapped_future", None)
            if inner is not None and inner.cancel():
                del self.pending[fut]
                self.awaiting.pop(fut, None)

    def _stopping(self) -> Iterator[tuple[int, list[TrialRecord]]]:
        """After a stop: wait for the task runs that had begun (their targets stop or are
        given up within :data:`~honesteval.interrupts.GRACE_S`), submit no score task run
        (stored rollouts wait for the next run), yield the trials that became final; give up
        on what is still running after :data:`STOP_WAIT_S`."""
        self._drop_unstarted()
        if self.watch is not None:
            self.watch.stop_workers()
        deadline = time.monotonic() + STOP_WAIT_S
        while self.pending:
            try:
                fut = self.done.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return
            if fut is None or fut not in self.pending:
                continue
            i = self.pending.pop(fut)[0]
            self.awaiting.pop(fut, None)
            out = finished_value(fut)
            recs = out if isinstance(out, list) else [out]
            final = [r for r in recs if isinstance(r, TrialRecord) and not r.awaiting_score]
            if final:
                yield i, final

    def finished(self) -> Iterator[tuple[int, list[TrialRecord]]]:
        """(plan index, trials now final) as task runs finish, until none is pending and
        nothing is queued; the finished task runs are let go (their records with them)."""
        self.top_up()
        while self.pending:
            fut = self._next_done()
            if fut is None or interrupts.requested():
                if fut is not None:
                    self.done.put(fut)  # handled with the others, below
                yield from self._stopping()
                return
            i, plan, chunk, stage = self.pending.pop(fut)
            rollouts = self.awaiting.pop(fut, None)
            # A Failed-type InfraError/ScorerError state still carries the trial's record.
            out = finished_value(fut)
            if isinstance(out, BaseException):  # an engine crash; the trials still get records
                get_run_logger().error("task run for %d trial(s) crashed: %r", len(chunk), out)
                # After the target: the stored rollouts stay (scorer_error, awaiting a score).
                final = rollouts if rollouts is not None else _crashed(chunk, plan, out)
            else:
                recs = out if isinstance(out, list) else [out]
                final = [r for r in recs if stage == "score" or not r.awaiting_score]
                if len(final) < len(recs):
                    self.awaiting[self._score(fut, i, plan, chunk)] = recs
                    final = []  # the score task run yields the whole chunk
            del fut, out  # the finished task run's state holds its records
            self._settle(i, final)
            self.top_up()
            if final:
                yield i, final


def completed_state_name(result: SplitResult) -> str:
    """An evaluation's Completed-type state, named for what a glance at the runs list must
    catch: ``TrialsFailed`` when the candidate's own code failed trials, ``TrialsMissing``
    when trials are missing data (coverage still at least ``min_coverage``), else
    ``Completed``."""
    if result.trials_failed:
        return "TrialsFailed"
    if result.trials_infra_error or result.trials_scorer_error:
        return "TrialsMissing"
    return "Completed"


def final_state(
    data: Any,
    message: str,
    low_coverage_name: str | None = None,
    completed_name: str = "Completed",
) -> State:
    """The flow run's final state, its message the result in one line, also logged at INFO
    as the run's last line (``prefect deployment run --watch`` ends with it).

    ``low_coverage_name`` (``LowCoverage``, ``Indecisive``) makes it a Failed-type state with
    that name: red in the UI, automations on failure fire, and ``prefect deployment run
    --watch`` exits non-zero. Otherwise it is Completed-type, named ``completed_name`` (a
    rejected gate: ``Rejected``, a name to filter runs by). The result is the data either way.
    """
    honesteval_logger().info(message)
    if low_coverage_name is None:
        return Completed(name=completed_name, message=message, data=data)
    return Failed(name=low_coverage_name, message=message, data=data)
