"""One trial, start to finish: run the target (retrying only ``InfraError``), score, record.

Plain Python. The Prefect tasks in :mod:`honesteval.orchestration.tasks` are thin wrappers
around these functions; the benchmark's plain-thread baseline calls the very same ones.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import queue
import threading
import time
from concurrent.futures import Future, InvalidStateError
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from honesteval import interrupts
from honesteval.adapters import Adapter, checked_score
from honesteval.adapters.context import TrialInfo, current_fresh_since, current_info, current_trial
from honesteval.errors import CandidateFailure, InfraError, TargetTimeout
from honesteval.evaluation.rate_wait import wait_for_rate_limit
from honesteval.models import (
    COUNTED_STATUSES,
    Candidate,
    Rollout,
    Score,
    SplitName,
    Task,
    TimeoutIs,
    TrialRecord,
    utc_now,
)
from honesteval.models.results import OUTPUT_CUT_NOTE
from honesteval.redaction import describe, redact, redact_obj
from honesteval.retry import RetryPolicy
from honesteval.store.fingerprints import trial_context
from honesteval.store.state_dir import Store

#: Outputs larger than this (as JSON) are cut in the record, and the record says so.
MAX_OUTPUT_BYTES = 1_000_000


class TrialSpec(BaseModel):
    """Which trial to run: a task, its trial number and its seed
    (:func:`~honesteval.models.trial_seed`)."""

    model_config = ConfigDict(frozen=True)

    task: Task
    trial: int
    seed: int

    @property
    def label(self) -> str:
        return f"{self.task.id}-t{self.trial}"


class TrialSettings(BaseModel):
    """What every trial of one evaluation shares. Small and picklable (it crosses to Dask)."""

    model_config = ConfigDict(frozen=True)

    project_root: str
    candidate: Candidate
    split: SplitName
    retries: int
    retry_backoff_s: float
    timeout_s: float
    #: a ``fresh`` evaluation's start (it reuses nothing stored): see ``fresh_since``
    fresh_since: str | None = None
    #: project.scoring_fingerprint: what grades. Each graded record keeps it (``scorer``) and
    #: its context is built from it, so a changed scorer never reuses a stale trial.
    scoring: str = ""
    failure_reward: float = 0.0
    timeout_is: TimeoutIs = "failure"

    @property
    def retry(self) -> RetryPolicy:
        """How this evaluation's ``InfraError`` retries are spaced."""
        return RetryPolicy(retries=self.retries, backoff_s=self.retry_backoff_s)


@dataclass
class Attempt:
    """One call of the target."""

    rollout: Rollout | None
    error: str | None = None
    retryable: bool = False
    failed: bool = False  # the candidate's own failure (not InfraError): scored, counted
    retry_after: float | None = None
    timed_out: bool = False  # the target ran past timeout_s
    seconds: float = 0.0
    started_at: str = field(default_factory=utc_now)


class _TargetThreads:
    """Daemon threads that call targets, reused from trial to trial.

    A trial hands its target call to an idle thread and waits at most ``timeout_s``; a thread
    whose target hangs stays busy (Python cannot kill a thread) and a new thread is made only
    when none is idle, so a hung target never holds up other trials and no trial pays for
    starting a thread of its own.
    """

    def __init__(self) -> None:
        self._jobs: queue.SimpleQueue[tuple[Future[Any], contextvars.Context, Any]] = (
            queue.SimpleQueue()
        )
        self._idle = 0
        self._lock = threading.Lock()

    def submit(self, fn: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            spawn = self._idle == 0
            if not spawn:
                self._idle -= 1
        self._jobs.put((future, contextvars.copy_context(), fn))
        if spawn:
            threading.Thread(target=self._work, daemon=True, name="honesteval-target").start()
        return future

    def _work(self) -> None:
        while True:
            future, context, fn = self._jobs.get()
            try:
                value = context.run(fn)
            except BaseException as exc:  # handed to the waiting trial
                with contextlib.suppress(InvalidStateError):  # abandoned meanwhile
                    future.set_exception(exc)
            else:
                with contextlib.suppress(InvalidStateError):
                    future.set_result(value)
            with self._lock:
                self._idle += 1


_target_threads = _TargetThreads()


class _TimedCall:
    """``fn`` timed by the target thread's own clock: when it began and how long it ran."""

    __slots__ = ("began_at", "fn")

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.began_at: float | None = None  # set on the target thread (one atomic store)

    def __call__(self) -> tuple[Any, float]:
        began_at = self.began_at = time.monotonic()
        value = self.fn()
        return value, time.monotonic() - began_at


def _call_with_timeout(fn: Any, timeout_s: float) -> Any:
    """Call ``fn`` on a target thread and give up after ``timeout_s`` (``TargetTimeout``).

    The limit is on the call's own running time, measured on the target thread: time the call
    waited for a thread or for the GIL before it began, or that this waiting thread needed to
    wake up after it returned, is the machine's load, not the target's. (Measured from here,
    a quick target on a loaded machine was timed out and paid for twice.) A call that does
    not even begin within ``timeout_s`` is given up too.

    This thread waits once for the result; only a call that is not done within ``timeout_s``
    of waiting is looked at again, and given what is left of its own ``timeout_s`` if it began
    late. (Waiting first for the call to begin woke this thread twice per call: 62-74 µs a
    call on 8 threads, 50-57 µs with one wake-up; best of 5 × 4,000 calls, three alternating
    runs.)

    A hung python target keeps its thread until it returns; the trial itself is over and the
    evaluation goes on. A ``BaseException`` the target raised (``SystemExit``,
    ``KeyboardInterrupt``...) comes back as :class:`CandidateFailure`: it happened inside the
    target's thread, so it is the candidate's, never a signal to this process (a real Ctrl-C
    interrupts the wait instead, and is raised as it is).
    """
    call = _TimedCall(fn)
    future = _target_threads.submit(call)
    try:
        with interrupts.waiting_for(future):  # a stopping run may give the call up
            try:
                value, ran_s = future.result(timeout_s)
            except FutureTimeout:
                began_at = call.began_at
                if began_at is None:  # not even begun: given up
                    raise
                left = max(0.0, timeout_s - (time.monotonic() - began_at))
                value, ran_s = future.result(left)
    except FutureTimeout:
        raise TargetTimeout(f"target ran past timeout_s={timeout_s:g}") from None
    except BaseException as error:
        if isinstance(error, interrupts.TrialAbandoned):
            raise
        if isinstance(error, Exception) or not future.done() or future.exception() is not error:
            raise
        raise CandidateFailure(describe(error)) from None
    # A call that holds the GIL delays this wait past the deadline and may finish meanwhile:
    # it still ran too long, and a result that came late is not recorded as ok.
    if ran_s > timeout_s:
        raise TargetTimeout(f"target ran past timeout_s={timeout_s:g}")
    return value


def attempt_target(
    adapter: Adapter,
    spec: TrialSpec,
    candidate: Candidate,
    timeout_s: float,
    timeout_is: TimeoutIs = "failure",
    *,
    fresh_since: str | None = None,
) -> Attempt:
    """Call the target once. Never raises: faults come back as a non-ok :class:`Attempt`.

    ``InfraError`` (and subclasses) is retryable and ends as missing data; any other exception
    (and any ``BaseException`` raised inside the target's thread) is a candidate failure:
    ``failed``, never retried, scored at ``failure_reward`` (SPEC §2, revised). Running past
    ``timeout_s`` (:class:`TargetTimeout`) is a failure too, unless ``timeout_is`` is
    ``missing``: then it is retried like an ``InfraError``. (A candidate that hangs must not
    turn its hardest tasks into missing data: an optimiser would learn to hang.)
    """
    try:  # before the clock starts: waiting for the rate limit is not the trial's time
        wait_for_rate_limit(adapter)
    except InfraError as exc:  # the limit's keeper (the Prefect server) did not answer
        return _faulted(exc, timeout_is, seconds=0.0, started_at=utc_now())
    started = utc_now()
    t0 = time.perf_counter()
    token = current_trial.set(spec.trial)
    fresh_token = current_fresh_since.set(fresh_since)
    try:
        rollout = _run_target(adapter, spec, candidate, timeout_s)
        return Attempt(rollout, seconds=time.perf_counter() - t0, started_at=started)
    except Exception as exc:
        return _faulted(exc, timeout_is, seconds=time.perf_counter() - t0, started_at=started)
    finally:
        current_fresh_since.reset(fresh_token)
        current_trial.reset(token)


def attempt_trial(adapter: Adapter, spec: TrialSpec, settings: TrialSettings) -> Attempt:
    """:func:`attempt_target` under an evaluation's settings (what both runners call)."""
    return attempt_target(
        adapter,
        spec,
        settings.candidate,
        settings.timeout_s,
        settings.timeout_is,
        fresh_since=settings.fresh_since,
    )


def _run_target(
    adapter: Adapter, spec: TrialSpec, candidate: Candidate, timeout_s: float
) -> Rollout:
    """One call of the target, held to ``timeout_s`` here unless it enforces it itself."""

    def call() -> Rollout:
        return adapter.run_target(spec.task, candidate, seed=spec.seed)

    if getattr(adapter, "enforces_timeout", False):
        rollout = call()
    else:
        rollout = _call_with_timeout(call, timeout_s)
    return rollout if isinstance(rollout, Rollout) else Rollout(output=rollout)


def _faulted(exc: Exception, timeout_is: TimeoutIs, *, seconds: float, started_at: str) -> Attempt:
    """The attempt a fault of the target makes (see :func:`attempt_target`)."""
    if isinstance(exc, TargetTimeout):
        return Attempt(
            None,
            error=describe(exc),
            retryable=timeout_is == "missing",
            failed=timeout_is == "failure",
            timed_out=True,
            seconds=seconds,
            started_at=started_at,
        )
    if isinstance(exc, InfraError):
        return Attempt(
            None,
            error=describe(exc),
            retryable=True,
            retry_after=getattr(exc, "retry_after", None),
            seconds=seconds,
            started_at=started_at,
        )
    if isinstance(exc, CandidateFailure):
        return Attempt(None, error=str(exc), failed=True, seconds=seconds, started_at=started_at)
    return Attempt(None, error=describe(exc), failed=True, seconds=seconds, started_at=started_at)


def score_rollout(
    adapter: Adapter,
    task: Task,
    rollout: Rollout,
    timeout_s: float | None = None,
    *,
    raise_infra: bool = False,
) -> Score:
    """Grade a rollout; a scorer that raises, or runs past ``timeout_s``, gives an errored
    score (``scorer_error``: missing data), never a crash and never a hung trial.

    ``raise_infra=True`` lets a scorer's ``InfraError`` (a judge's 429 or timeout) out, so the
    caller can retry the scoring alone.
    """
    try:
        if timeout_s is None or getattr(adapter, "scorer_enforces_timeout", False):
            return checked_score(adapter.score(task, rollout))
        return checked_score(_call_with_timeout(lambda: adapter.score(task, rollout), timeout_s))
    except TargetTimeout:
        return Score(errored=True, reason=f"scorer ran past timeout_s={timeout_s:g}")
    except InfraError as exc:
        if raise_infra:
            raise
        return Score(errored=True, reason=describe(exc))
    except Exception as exc:
        return Score(errored=True, reason=describe(exc))


def storable_output(output: Any) -> tuple[Any, list[str]]:
    """The output as it goes into the record, and notes on what changed.

    numpy values become plain lists and numbers; an output that is still not JSON is kept as
    its ``repr``; one larger than :data:`MAX_OUTPUT_BYTES` is cut to that size (as text). The
    scorer already graded the real output: this is only what is kept on disk.
    """
    notes: list[str] = []
    try:
        text = json.dumps(output, default=_plain, allow_nan=False)
    except (TypeError, ValueError) as exc:
        notes.append(f"output is not JSON ({exc}); its repr is kept")
        output = repr(output)
        text = json.dumps(output)
    else:
        output = json.loads(text)
    if len(text) > MAX_OUTPUT_BYTES:
        notes.append(
            f"{OUTPUT_CUT_NOTE}{len(text)} bytes cut to the first {MAX_OUTPUT_BYTES} (as text)"
        )
        output = text[:MAX_OUTPUT_BYTES]
    return output, notes


def _plain(value: Any) -> Any:
    """numpy arrays and scalars (anything with ``tolist``) as plain Python values."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def crashed_records(
    specs: list[TrialSpec], settings: TrialSettings, exc: BaseException, since: str
) -> list[TrialRecord]:
    """The records of trials whose run crashed outside the target (engine, storage, a bug).

    A record of a trial already written as ``ok`` since ``since`` (this run) is kept and
    returned: a crash of its batch never overwrites a finished trial.
    """
    store = Store.for_project(settings.project_root)
    cand = settings.candidate
    stored = store.read_trials(settings.split, cand.name, cand.fingerprint)
    out = []
    for spec in specs:
        done = stored.get((spec.task.id, spec.seed))
        if done is not None and done.status in COUNTED_STATUSES and done.started_at >= since:
            out.append(done)
            continue
        last = Attempt(None, error=f"task run crashed: {describe(exc)}")
        record = make_record(spec, settings, last, [last.error or ""], 1, None, 0.0)
        store.write_trial(record)
        out.append(record)
    return out


def make_record(
    spec: TrialSpec,
    settings: TrialSettings,
    last: Attempt,
    errors: list[str],
    attempts: int,
    score: Score | None,
    score_s: float,
) -> TrialRecord:
    """The record of a finished trial, with its status decided by SPEC §2."""
    base: dict[str, Any] = dict(
        task_id=spec.task.id,
        candidate=settings.candidate.name,
        fingerprint=settings.candidate.fingerprint,
        split=settings.split,
        trial=spec.trial,
        seed=spec.seed,
        attempts=attempts,
        errors=errors,
        started_at=last.started_at,
        target_s=last.seconds,
        score_s=score_s,
        context=trial_context(settings.scoring, spec.task),
        timeout_s=settings.timeout_s if last.timed_out else None,
    )
    base["errors"] = [redact(e) for e in errors]
    if last.failed:
        return TrialRecord(
            status="failed", reward=settings.failure_reward, error=redact(last.error or ""), **base
        )
    if last.rollout is None:
        return TrialRecord(status="infra_error", error=redact(last.error or ""), **base)
    rollout = last.rollout
    assert score is not None
    output, notes = storable_output(rollout.output)
    base["notes"] = [*rollout.notes, *notes]
    tokens = [t for t in (rollout.tokens, score.tokens) if t is not None]
    costs = [c for c in (rollout.cost, score.cost) if c is not None]
    common = dict(
        rollout=redact_obj(output),
        score=redact_obj(score.model_dump(exclude_none=True)),
        feedback=None if score.feedback is None else redact(score.feedback),
        tokens=sum(tokens) if tokens else None,
        cost=sum(costs) if costs else None,
        **base,
    )
    record = TrialRecord(**graded_outcome(score, settings.failure_reward), **common)
    return record.with_returned(rollout.output)


def graded_outcome(score: Score, failure_reward: float) -> dict[str, Any]:
    """``status``, ``reward`` and ``error`` of a graded trial (SPEC §2): a score that could not
    grade is a ``scorer_error``; a candidate caught breaking its evaluation's rules is
    ``failed`` at ``failure_reward``; otherwise ``ok`` at the score's reward."""
    if score.errored:
        return dict(status="scorer_error", reward=None, error=redact(score.reason or ""))
    if score.failed:
        return dict(status="failed", reward=failure_reward, error=redact(score.reason or ""))
    return dict(status="ok", reward=score.reward, error=None)


#: Why a stored rollout whose output was cut is not graded (``rescore``): only the cut copy is
#: left, and grading it would score the wrong output; a run plans its target again instead.
CUT_OUTPUT_LOST = (
    "the stored output is cut and the whole output is gone: it cannot be graded again; "
    "run the trial again (--fresh)"
)

#: The error of a rollout's record between the target and the scorer: on disk, a trial whose
#: scoring never finished is an honest ``scorer_error`` (target ran, not graded) that keeps its
#: rollout, and ``honesteval rescore`` can grade it.
AWAITING_SCORE = "scorer_error: awaiting its score"


def record_rollout(
    spec: TrialSpec,
    settings: TrialSettings,
    last: Attempt,
    errors: list[str],
    attempts: int,
) -> TrialRecord:
    """Write what the target produced *before* scoring, so a scorer crash never loses a
    paid-for rollout. Without a rollout this is the trial's final ``infra_error`` record."""
    pending = None if last.rollout is None else Score(errored=True, reason=AWAITING_SCORE)
    record = make_record(spec, settings, last, errors, attempts, pending, 0.0)
    Store.for_project(settings.project_root).write_trial(record)
    return record


def needs_score(record: TrialRecord) -> bool:
    return record.status == "scorer_error" and record.error == AWAITING_SCORE


def grade(
    adapter: Adapter,
    task: Task,
    record: TrialRecord,
    settings: TrialSettings,
    *,
    raise_infra: bool = False,
) -> TrialRecord:
    """Score a recorded rollout with the current scorer; write and return the final record.

    ``raise_infra``: see :func:`score_rollout`. The record keeps the scorer's fingerprint.
    """
    info = TrialInfo(
        settings.project_root, settings.split, settings.candidate, record.seed, record.trial
    )
    token = current_info.set(info)
    t0 = time.perf_counter()
    try:
        score = (
            score_rollout(
                adapter,
                task,
                Rollout(output=record.output_to_score[0]),
                settings.timeout_s,
                raise_infra=raise_infra,
            )
            if record.output_to_score
            else Score(errored=True, reason=CUT_OUTPUT_LOST)
        )
    finally:
        score_s = time.perf_counter() - t0
        current_info.reset(token)
    tokens = [t for t in (record.tokens, score.tokens) if t is not None]
    costs = [c for c in (record.cost, score.cost) if c is not None]
    graded = record.model_copy(
        update=dict(
            **graded_outcome(score, settings.failure_reward),
            feedback=None if score.feedback is None else redact(score.feedback),
            score=redact_obj(score.model_dump(exclude_none=True)),
            score_s=score_s,
            tokens=sum(tokens) if tokens else None,
            cost=sum(costs) if costs else None,
            scorer=settings.scoring,
            context=trial_context(settings.scoring, task),  # graded by today's scorer
        )
    )
    Store.for_project(settings.project_root).write_trial(graded)
    return graded


def grade_with_retries(
    adapter: Adapter,
    task: Task,
    record: TrialRecord,
    settings: TrialSettings,
    *,
    sleep: Any = interrupts.sleep,
) -> TrialRecord:
    """Grade, retrying the scorer alone on ``InfraError`` (never the rollout)."""
    for attempt_no in range(1, settings.retry.retries + 1):
        _check_not_stopping()
        try:
            return grade(adapter, task, record, settings, raise_infra=True)
        except InfraError as exc:
            sleep(settings.retry.delay(attempt_no, getattr(exc, "retry_after", None)))
    _check_not_stopping()
    return grade(adapter, task, record, settings)


def _check_not_stopping() -> None:
    """Start no target or scorer call once the run is stopping (Ctrl-C, SIGTERM)."""
    if interrupts.requested():
        raise interrupts.TrialAbandoned


def run_target_with_retries(
    adapter: Adapter,
    spec: TrialSpec,
    settings: TrialSettings,
    *,
    sleep: Any = interrupts.sleep,
) -> TrialRecord:
    """Run the target with in-process retries of ``InfraError`` (used inside batches) and
    record its rollout (:func:`record_rollout`); scoring comes next."""
    errors: list[str] = []
    attempt_no = 0
    while True:
        attempt_no += 1
        _check_not_stopping()
        last = attempt_trial(adapter, spec, settings)
        if last.error is not None:
            errors.append(last.error)
        if not (last.retryable and settings.retry.allows(attempt_no)):
            return record_rollout(spec, settings, last, errors, attempt_no)
        sleep(settings.retry.delay(attempt_no, last.retry_after))


def run_trial_with_retries(
    adapter: Adapter,
    spec: TrialSpec,
    settings: TrialSettings,
    *,
    sleep: Any = interrupts.sleep,
) -> TrialRecord:
    """One whole trial in this thread: the target (retried), its record, then its score.

    Isolated: whatever goes wrong outside the target (an unstorable output, a full disk, a
    bug) ends this trial as missing data and never touches the other trials of its batch.
    """

    record = isolated(
        spec, settings, lambda: run_target_with_retries(adapter, spec, settings, sleep=sleep)
    )
    if not needs_score(record):
        return record
    return grade_isolated(adapter, spec.task, record, settings, sleep=sleep)


def grade_isolated(
    adapter: Adapter,
    task: Task,
    record: TrialRecord,
    settings: TrialSettings,
    *,
    sleep: Any = interrupts.sleep,
) -> TrialRecord:
    """:func:`grade_with_retries` for one trial of a batch. Whatever goes wrong outside the
    scorer (a full disk as the graded record is written, a bug) leaves the stored rollout as it
    is, awaiting its score: this run counts the trial as a ``scorer_error`` (missing data) and
    the next run grades it without running the target again."""
    try:
        return grade_with_retries(adapter, task, record, settings, sleep=sleep)
    except Exception as exc:
        return record.model_copy(update={"error": f"scoring crashed: {describe(exc)}"})


def isolated(spec: TrialSpec, settings: TrialSettings, work: Any) -> TrialRecord:
    """``work()`` for one trial of a batch; whatever goes wrong outside the target (an
    unstorable output, a full disk, a bug) ends this trial as missing data
    (:func:`crashed_records`) and never touches the other trials of its batch."""
    since = utc_now()
    try:
        record: TrialRecord = work()
        return record
    except Exception as exc:
        return crashed_records([spec], settings, exc, since)[0]
