"""One trial, start to finish: run the target (retrying only ``InfraError``), score, record.

Plain Python. The Prefect tasks in :mod:`honesteval.tasks` are thin wrappers around these
functions; the benchmark's plain-thread baseline calls the very same ones.
"""

from __future__ import annotations

import contextvars
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from honesteval._context import TrialInfo, current_info, current_trial
from honesteval.adapters import Adapter
from honesteval.adapters._base import checked_score
from honesteval.errors import CandidateFailure, InfraError, TargetTimeout
from honesteval.models import Candidate, Rollout, Score, SplitName, Task, TrialRecord, utc_now
from honesteval.retry import RetryPolicy
from honesteval.store import Store

_ERROR_TEXT = 1000


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
    seconds: float = 0.0
    started_at: str = field(default_factory=utc_now)


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:_ERROR_TEXT]


def _call_with_timeout(fn: Any, timeout_s: float) -> Any:
    """Run ``fn`` in a daemon thread and give up after ``timeout_s``.

    Python cannot kill a thread, so a hung python target keeps its thread until it returns;
    the trial itself is over (``TargetTimeout``) and the evaluation goes on. A
    ``BaseException`` the target raised (``SystemExit``, ``KeyboardInterrupt``...) comes back
    as :class:`CandidateFailure`: it happened inside the target's thread, so it is the
    candidate's, never a signal to this process (a real Ctrl-C interrupts ``join`` instead).
    """
    box: dict[str, Any] = {}
    ctx = contextvars.copy_context()

    def runner() -> None:
        try:
            box["value"] = ctx.run(fn)
        except BaseException as exc:  # handed to the caller's thread below
            box["error"] = exc

    worker = threading.Thread(target=runner, daemon=True, name="honesteval-target")
    worker.start()
    worker.join(timeout_s)
    if worker.is_alive():
        raise TargetTimeout(f"target ran past timeout_s={timeout_s:g}")
    if "error" in box:
        error = box["error"]
        if isinstance(error, Exception):
            raise error
        raise CandidateFailure(describe(error))
    return box["value"]


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
        if not (last.retryable and settings.retry.allows(attempt_no)):
            return finish_trial(adapter, spec, settings, last, errors, attempt_no)
        sleep(settings.retry.delay(attempt_no, last.retry_after))
