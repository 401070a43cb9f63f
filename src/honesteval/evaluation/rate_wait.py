"""A trial's wait for its adapter's rate limit (:mod:`honesteval.adapters.rate_limit`): not a
failure and not a retry, said once per process and limit, never per call."""

from __future__ import annotations

import threading

from honesteval.adapters.rate_limit import RateLimit, current_pacer
from honesteval.evaluation import progress

#: A wait shorter than this is the pacer's own round trip, not the limit holding a call back.
SAID_AFTER_S = 0.05

_said: set[str] = set()
_said_lock = threading.Lock()


def waiting_line(name: str, limit: RateLimit) -> str:
    """
    >>> waiting_line("honesteval-rate-qa-openai", RateLimit(per_s=4, burst=2))
    'waiting for the rate limit honesteval-rate-qa-openai (4/s, burst 2): trials start no faster'
    """
    return (
        f"waiting for the rate limit {name} ({limit.per_s:g}/s, burst {limit.burst}):"
        " trials start no faster"
    )


def rate_limit_of(adapter: object) -> tuple[str, RateLimit] | None:
    """The adapter's limit's name and setting (a project's adapter with ``rate_limit:``), or
    None (no limit, or an adapter object of the caller's own)."""
    limited = getattr(adapter, "rate_limit", None)
    ok = isinstance(limited, tuple) and len(limited) == 2 and isinstance(limited[1], RateLimit)
    return limited if ok else None


def wait_for_rate_limit(adapter: object) -> None:
    """Before a target call: wait for the adapter's rate limit, if it has one."""
    limited = rate_limit_of(adapter)
    if limited is None:
        return
    name, limit = limited
    pacer = current_pacer()
    if pacer.wait(name, limit) < SAID_AFTER_S:
        return
    with _said_lock:
        if name in _said:
            return
        _said.add(name)
    line = waiting_line(name, limit)
    pacer.say(line)  # the task run's logger (a worker's output); not found in the UI's logs yet
    progress.announce(line)  # the CLI of this process
