"""One trial, start to finish: run the target (retrying only ``InfraError``), score, record.

Plain Python. The Prefect tasks in :mod:`honesteval.tasks` are thin wrappers around these
functions; the benchmark's plain-thread baseline calls the very same ones.
"""

from __future__ import annotations

import contextvars
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict

from honesteval._context import TrialInfo, current_info, current_trial
from honesteval.adapters import Adapter
from honesteval.adapters._base import checked_score
from honesteval.errors import InfraError, TargetTimeout
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
    #: fingerprint of the project's scorer, kept in every graded record
    scorer: str | None = None


@dataclass
class Attempt:
    """One call of the target."""

    rollout: Rollout | None
    error: str | None = None
    retryable: bool = False
    retry_after: float | None = None
    seconds: float = 0.0
    started_at: str = field(default_factory=utc_now)


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:_ERROR_TEXT]


def _call_with_timeout(fn: Any, timeout_s: float) -> Any:
    """Run ``fn`` in a daemon thread and give up after ``timeout_s``.

    Python cannot kill a thread, so a hung python target keeps its thread until it returns;
    the trial itself is over (``TargetTimeout``) and the evaluation goes on.
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
        raise box["error"]
    return box["value"]


def attempt_target(
    adapter: Adapter, spec: TrialSpec, candidate: Candidate, timeout_s: float
) -> Attempt:
    """Call the target once. Never raises: faults come back as a non-ok :class:`Attempt`.

    ``InfraError`` (and subclasses) is retryable; any other exception is recorded as an infra
    fault with its type and message but is *not* retried (it is a bug, not a blip).
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
    except Exception as exc:
        return Attempt(
            None, error=describe(exc), seconds=time.perf_counter() - t0, started_at=started
        )
    finally:
        current_trial.reset(token)


def score_rollout(
    adapter: Adapter, task: Task, rollout: Rollout, *, raise_infra: bool = False
) -> Score:
    """Grade a rollout; a scorer that raises gives an errored score, never a crash.

    ``raise_infra=True`` lets a scorer's ``InfraError`` (a judge's 429 or timeout) out, so the
    caller can retry the scoring alone.
    """
    try:
        return checked_score(adapter.score(task, rollout))
    except InfraError as exc:
        if raise_infra:
            raise
        return Score(errored=True, reason=describe(exc))
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
        score = score_rollout(
            adapter, task, Rollout(output=record.rollout), raise_infra=raise_infra
        )
    finally:
        score_s = time.perf_counter() - t0
        current_info.reset(token)
    tokens = [t for t in (record.tokens, score.tokens) if t is not None]
    costs = [c for c in (record.cost, score.cost) if c is not None]
    graded = record.model_copy(
        update=dict(
            status="scorer_error" if score.errored else "ok",
            reward=None if score.errored else score.reward,
            error=score.reason if score.errored else None,
            feedback=score.feedback,
            score=score.model_dump(exclude_none=True),
            score_s=score_s,
            tokens=sum(tokens) if tokens else None,
            cost=sum(costs) if costs else None,
            scorer=settings.scorer,
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
    sleep: Any = time.sleep,
) -> TrialRecord:
    """Grade, retrying the scorer alone on ``InfraError`` (never the rollout)."""
    for attempt_no in range(1, settings.retries + 1):
        try:
            return grade(adapter, task, record, settings, raise_infra=True)
        except InfraError as exc:
            sleep(
                backoff_delay(
                    attempt_no,
                    settings.retry_backoff_s,
                    retry_after=getattr(exc, "retry_after", None),
                )
            )
    return grade(adapter, task, record, settings)


def run_target_with_retries(
    adapter: Adapter,
    spec: TrialSpec,
    settings: TrialSettings,
    *,
    sleep: Any = time.sleep,
) -> TrialRecord:
    """Run the target with in-process retries of ``InfraError`` (used inside batches) and
    record its rollout (:func:`record_rollout`); scoring comes next."""
    errors: list[str] = []
    attempt_no = 0
    while True:
        attempt_no += 1
        last = attempt_target(adapter, spec, settings.candidate, settings.timeout_s)
        if last.error is not None:
            errors.append(last.error)
        if not (last.retryable and attempt_no <= settings.retries):
            return record_rollout(spec, settings, last, errors, attempt_no)
        sleep(backoff_delay(attempt_no, settings.retry_backoff_s, retry_after=last.retry_after))


def run_trial_with_retries(
    adapter: Adapter,
    spec: TrialSpec,
    settings: TrialSettings,
    *,
    sleep: Any = time.sleep,
) -> TrialRecord:
    """One whole trial in this thread: the target (retried), its record, then its score."""
    record = run_target_with_retries(adapter, spec, settings, sleep=sleep)
    if not needs_score(record):
        return record
    return grade_with_retries(adapter, spec.task, record, settings, sleep=sleep)
