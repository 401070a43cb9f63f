"""A trial's wait for its adapter's rate limit (:mod:`honesteval.adapters.rate_limit`): not a
failure and not a retry, said once per process and limit, never per call."""

from __future__ import annotations

import logging
import threading

from honesteval.adapters.rate_limit import RateLimit, wait_turn
from honesteval.evaluation import progress

#: A wait shorter than this is the pacer's own round trip, not the limit holding a call back.
SAID_AFTER_S = 0.05

_log = logging.getLogger("honesteval.rate_limit")
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
    if wait_turn(name, limit) < SAID_AFTER_S:
        return
    with _said_lock:
        if name in _said:
            return
        _said.add(name)
    line = waiting_line(name, limit)
    _log.info(line)
    progress.announce(line)
