"""Retrying infrastructure faults: one policy for trials, batches, Prefect task runs and judges.

Only ``InfraError`` is ever retried (SPEC §2); this module says *how long to wait*: exponential
backoff with ±50 % jitter, never shorter than a server's Retry-After, and a Retry-After longer
than :data:`MAX_RETRY_AFTER_S` is capped (a server asking for an hour does not stall a run).
Plain Python, no Prefect import.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import TypedDict

#: The longest Retry-After honoured, in seconds.
MAX_RETRY_AFTER_S = 120.0


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header; None when absent or an HTTP date (the backoff
    applies then). Negative values count as 0."""
    try:
        return None if value is None else max(0.0, float(value))
    except ValueError:
        return None


def capped_retry_after(seconds: float) -> float:
    """A server's Retry-After, bounded by :data:`MAX_RETRY_AFTER_S`."""
    return min(seconds, MAX_RETRY_AFTER_S)


def backoff_delay(
    attempt: int,
    base_s: float,
    *,
    retry_after: float | None = None,
    rng: random.Random | None = None,
) -> float:
    """Delay before retry number ``attempt`` (1-based): base·2^(attempt−1) with ±50% jitter,
    and never shorter than a server's Retry-After (capped at :data:`MAX_RETRY_AFTER_S`)."""
    jitter = rng.uniform(0.5, 1.5) if rng is not None else random.uniform(0.5, 1.5)
    delay = base_s * 2.0 ** (attempt - 1) * jitter
    if retry_after is not None:
        delay = max(delay, capped_retry_after(retry_after))
    return delay


class PrefectRetryOptions(TypedDict):
    """The retry keywords of ``Task.with_options`` for this policy."""

    retries: int
    retry_delay_seconds: list[float] | float
    retry_jitter_factor: float | None


@dataclass(frozen=True)
class RetryPolicy:
    """``retries`` retries after the first attempt, waiting :func:`backoff_delay` between."""

    retries: int
    backoff_s: float

    def allows(self, attempt: int) -> bool:
        """True when attempt number ``attempt`` (1-based) may be followed by a retry."""
        return attempt <= self.retries

    def delay(
        self, attempt: int, retry_after: float | None = None, rng: random.Random | None = None
    ) -> float:
        """Seconds to wait before the retry that follows attempt ``attempt``."""
        return backoff_delay(attempt, self.backoff_s, retry_after=retry_after, rng=rng)

    def prefect_options(self) -> PrefectRetryOptions:
        """The same schedule for a Prefect task run (Prefect sleeps and jitters itself; a
        Retry-After is honoured by the task body before it raises, see ``tasks``)."""
        return PrefectRetryOptions(
            retries=self.retries,
            retry_delay_seconds=[self.backoff_s * 2**i for i in range(self.retries)] or 0.0,
            retry_jitter_factor=0.5 if self.backoff_s > 0 else None,
        )
