"""A rate limit on a target's calls, shared by every process that runs them.

``adapter: {rate_limit: {per_s: 4, burst: 4}}`` in ``honesteval.yaml``: at most ``burst`` calls
at once after a pause, ``per_s`` calls a second on average, counted across every thread,
Dask worker and Prefect worker that runs the project's trials. The limit is a token bucket:
in any window of W seconds at most ``burst + per_s * W`` calls start.

Who keeps the count is a *pacer*. Outside a Prefect task run (``orchestration="local"``, a
plain call of the trial runner) it is this process's own bucket; a Prefect task run sets the
Prefect server's global concurrency limit of the same name as its pacer
(:mod:`honesteval.orchestration.rate_limits`), so processes on other machines share it.

The setting is how fast to call, never what a call returns: it is not part of the scoring
fingerprint, and changing it never makes a stored trial run again.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
import threading
import time
from collections.abc import Callable, Iterator

from pydantic import Field

from honesteval import interrupts
from honesteval.models import StrictModel


class RateLimit(StrictModel):
    """``rate_limit:`` of the adapter block: how many target calls may start per second."""

    per_s: float = Field(gt=0, description="calls per second, on average, across all workers")
    burst: int = Field(
        default=1, ge=1, description="calls that may start at once after a pause (the bucket)"
    )


#: Blocks until one call may start under the named limit; returns the seconds it waited.
#: Raises :class:`~honesteval.interrupts.TrialAbandoned` when the process is asked to stop.
Pacer = Callable[[str, RateLimit], float]


def limit_name(project_name: str, kind: str) -> str:
    """The limit's name (the Prefect UI lists it under Concurrency): one per project and kind,
    in the characters a Prefect name may hold.

    >>> limit_name("qa bench/v2", "openai")
    'honesteval-rate-qa-bench-v2-openai'
    """
    return re.sub(r"[^A-Za-z0-9._-]+", "-", f"honesteval-rate-{project_name}-{kind}")


class _Bucket:
    def __init__(self, limit: RateLimit):
        self.tokens = float(limit.burst)
        self.at = time.monotonic()


_buckets: dict[tuple[str, RateLimit], _Bucket] = {}
_buckets_lock = threading.Lock()


def in_process_pacer(name: str, limit: RateLimit) -> float:
    """This process's token bucket (threads share it; other processes do not)."""
    began = time.monotonic()
    while True:
        with _buckets_lock:
            bucket = _buckets.setdefault((name, limit), _Bucket(limit))
            now = time.monotonic()
            bucket.tokens = min(limit.burst, bucket.tokens + (now - bucket.at) * limit.per_s)
            bucket.at = now
            if bucket.tokens >= 1:
                bucket.tokens -= 1
                return now - began
            wait = (1 - bucket.tokens) / limit.per_s
        if interrupts.sleep(wait):
            raise interrupts.TrialAbandoned()


_pacer: contextvars.ContextVar[Pacer] = contextvars.ContextVar(
    "honesteval_rate_pacer", default=in_process_pacer
)


@contextlib.contextmanager
def paced_by(pacer: Pacer) -> Iterator[None]:
    """Within the block, this thread's target calls wait for ``pacer``."""
    token = _pacer.set(pacer)
    try:
        yield
    finally:
        _pacer.reset(token)


def wait_turn(name: str, limit: RateLimit) -> float:
    """Wait until one call may start under the limit; the seconds it waited."""
    return _pacer.get()(name, limit)
