"""One trial, start to finish: run the target (retrying only ``InfraError``), score, record.

Plain Python. The Prefect tasks in :mod:`honesteval.tasks` are thin wrappers around these
functions; the benchmark's plain-thread baseline calls the very same ones.
"""

from __future__ import annotations

import contextvars
import queue
import random
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from honesteval._context import TrialInfo, current_info, current_trial
from honesteval.adapters import Adapter
from honesteval.adapters._base import checked_score
from honesteval.errors import CandidateFailure, InfraError, TargetTimeout
from honesteval.models import Candidate, Rollout, Score, SplitName, Task, TrialRecord, utc_now
from honesteval.store import Store

_ERROR_TEXT = 1000
_MAX_RETRY_AFTER_S = 120.0


class TrialSpec(BaseModel):
    """Which trial to run: a task, its trial number and its seed (``base_seed + trial``)."""

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
    failure_reward: float = 0.0


@dataclass
class Attempt:
    """One call of the target."""

    rollout: Rollout | None
    error: str | None = None
    retryable: bool = False
    failed: bool = False  # the candidate's own failure (not InfraError): scored, counted
    retry_after: float | None = None
    seconds: float = 0.0
    started_at: str = field(default_factory=utc_now)


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:_ERROR_TEXT]


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
                future.set_result(context.run(fn))
            except BaseException as exc:  # handed to the waiting trial
                future.set_exception(exc)
            with self._lock:
                self._idle += 1


_target_threads = _TargetThreads()


def _call_with_timeout(fn: Any, timeout_s: float) -> Any:
    """Call ``fn`` on a target thread and give up after ``timeout_s`` (``TargetTimeout``).

    A hung python target keeps its thread until it returns; the trial itself is over and the
    evaluation goes on. A ``BaseException`` the target raised (``SystemExit``,
    ``KeyboardInterrupt``...) comes back as :class:`CandidateFailure`: it happened inside the
    target's thread, so it is the candidate's, never a signal to this process (a real Ctrl-C
    interrupts the wait instead, and is raised as it is).
    """
    future = _target_threads.submit(fn)
    try:
        return future.result(timeout_s)
    except FutureTimeout:
        raise TargetTimeout(f"target ran past timeout_s={timeout_s:g}") from None
    except BaseException as error:
        if isinstance(error, Exception) or not future.done() or future.exception() is not error:
            raise
        raise CandidateFailure(describe(error)) from None


def attempt_target(
    adapter: Adapter, spec: TrialSpec, candidate: Candidate, timeout_s: float
) -> Attempt:
    """Call the target once. Never raises: faults come back as a non-ok :class:`Attempt`.

    ``InfraError`` (and subclasses) is retryable and ends as missing data; any other exception
    (and any ``BaseException`` raised inside the target's thread) is a candidate failure:
    ``failed``, never retried, scored at ``failure_reward`` (SPEC §2, revised).
    """
    started = utc_now()
    t0 = time.perf_counter()
    token = current_trial.set(spec.trial)
    try:

        def call() -> Rollout:
            return adapter.run_target(spec.task, candidate, seed=spec.seed)

        if getattr(adapter, "enforces_timeout", False):
            rollout = call()
        else:
            rollout = _call_with_timeout(call, timeout_s)
        if not isinstance(rollout, Rollout):
            rollout = Rollout(output=rollout)
        return Attempt(rollout, seconds=time.perf_counter() - t0, started_at=started)
    except InfraError as exc:
        return Attempt(
            None,
            error=describe(exc),
            retryable=True,
            retry_after=getattr(exc, "retry_after", None),
            seconds=time.perf_counter() - t0,
            started_at=started,
        )
    except CandidateFailure as exc:
        return Attempt(
            None, error=str(exc), failed=True, seconds=time.perf_counter() - t0, started_at=started
        )
    except Exception as exc:
        return Attempt(
            None,
            error=describe(exc),
            failed=True,
            seconds=time.perf_counter() - t0,
            started_at=started,
        )
    finally:
        current_trial.reset(token)


def score_rollout(adapter: Adapter, task: Task, rollout: Rollout) -> Score:
    """Grade a rollout; a scorer that raises gives an errored score, never a crash."""
    try:
        return checked_score(adapter.score(task, rollout))
    except Exception as exc:
        return Score(errored=True, reason=describe(exc))


def backoff_delay(
    attempt: int,
    base_s: float,
    *,
    retry_after: float | None = None,
    rng: random.Random | None = None,
) -> float:
    """Delay before retry number ``attempt`` (1-based): base·2^(attempt−1) with ±50% jitter,
    and never shorter than a server's Retry-After (capped at two minutes)."""
    jitter = (rng or random).uniform(0.5, 1.5)
    delay = base_s * 2 ** (attempt - 1) * jitter
    if retry_after is not None:
        delay = max(delay, min(retry_after, _MAX_RETRY_AFTER_S))
    return delay


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
    )
    if last.failed:
        return TrialRecord(
            status="failed", reward=settings.failure_reward, error=last.error, **base
        )
    if last.rollout is None:
        return TrialRecord(status="infra_error", error=last.error, **base)
    rollout = last.rollout
    assert score is not None
    tokens = [t for t in (rollout.tokens, score.tokens) if t is not None]
    costs = [c for c in (rollout.cost, score.cost) if c is not None]
    common = dict(
        rollout=rollout.output,
        score=score.model_dump(exclude_none=True),
        feedback=score.feedback,
        tokens=sum(tokens) if tokens else None,
        cost=sum(costs) if costs else None,
        **base,
    )
    if score.errored:
        return TrialRecord(status="scorer_error", error=score.reason, **common)
    return TrialRecord(status="ok", reward=score.reward, **common)


def finish_trial(
    adapter: Adapter,
    spec: TrialSpec,
    settings: TrialSettings,
    last: Attempt,
    errors: list[str],
    attempts: int,
) -> TrialRecord:
    """Score the final attempt (if it produced a rollout), write the record, return it."""
    score: Score | None = None
    score_s = 0.0
    if last.rollout is not None:
        info = TrialInfo(
            settings.project_root, settings.split, settings.candidate, spec.seed, spec.trial
        )
        token = current_info.set(info)
        t0 = time.perf_counter()
        try:
            score = score_rollout(adapter, spec.task, last.rollout)
        finally:
            score_s = time.perf_counter() - t0
            current_info.reset(token)
    record = make_record(spec, settings, last, errors, attempts, score, score_s)
    Store.for_project(settings.project_root).write_trial(record)
    return record


def run_trial_with_retries(
    adapter: Adapter,
    spec: TrialSpec,
    settings: TrialSettings,
    *,
    sleep: Any = time.sleep,
) -> TrialRecord:
    """Run one trial with in-process retries of ``InfraError`` (used inside batches)."""
    errors: list[str] = []
    attempt_no = 0
    while True:
        attempt_no += 1
        last = attempt_target(adapter, spec, settings.candidate, settings.timeout_s)
        if last.error is not None:
            errors.append(last.error)
        if not (last.retryable and attempt_no <= settings.retries):
            return finish_trial(adapter, spec, settings, last, errors, attempt_no)
        sleep(backoff_delay(attempt_no, settings.retry_backoff_s, retry_after=last.retry_after))
