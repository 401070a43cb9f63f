"""The adapter's rate limit kept by the Prefect server: a global concurrency limit with slot
decay, shared by every process whose task runs talk to that server (the CLI's threads, Dask
workers, Prefect process workers).

The limit (``limit`` = the burst, ``slot_decay_per_second`` = the rate) is created or updated
to the project's setting the first time a process needs it. Each call takes one slot through
``POST /v2/concurrency_limits/increment`` in ``rate_limit`` mode, the request
``prefect.concurrency.sync.rate_limit`` makes; while the server answers 423 (no slot yet) the
call sleeps the ``Retry-After`` it gives. Waiting here, rather than in Prefect's helper, lets a
stop end the wait at once and tells whether a call was held back (Prefect's helper blocks in
its own event loop, deaf to a stop, and says neither).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable

import httpx
from prefect import get_client
from prefect.client.orchestration import SyncPrefectClient
from prefect.client.schemas.actions import (
    GlobalConcurrencyLimitCreate,
    GlobalConcurrencyLimitUpdate,
)
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

from honesteval import interrupts
from honesteval.adapters.rate_limit import RateLimit
from honesteval.errors import InfraError
from honesteval.evaluation.plan import EvaluationPlan, adapter_for
from honesteval.evaluation.rate_wait import rate_limit_of

_LOCKED = 423
_kept: set[tuple[str, RateLimit]] = set()
_kept_lock = threading.Lock()


def keep_limit(client: SyncPrefectClient, name: str, limit: RateLimit) -> None:
    """Create the named limit, or set it to ``limit`` (idempotent; racing processes agree)."""
    try:
        have = client.read_global_concurrency_limit_by_name(name)
    except ObjectNotFound:
        try:
            client.create_global_concurrency_limit(
                GlobalConcurrencyLimitCreate(
                    name=name, limit=limit.burst, slot_decay_per_second=limit.per_s, active=True
                )
            )
            return
        except (ObjectAlreadyExists, httpx.HTTPStatusError):
            # another process made it meanwhile: a 409, or a 500 from the database's unique
            # name when both asked at once
            have = client.read_global_concurrency_limit_by_name(name)
    if (have.limit, have.slot_decay_per_second, have.active) != (limit.burst, limit.per_s, True):
        client.update_global_concurrency_limit(
            name,
            GlobalConcurrencyLimitUpdate(
                limit=limit.burst, slot_decay_per_second=limit.per_s, active=True
            ),
        )


def keep_limits_of(plans: Iterable[EvaluationPlan]) -> None:
    """Before a run's first trial, in the flow's process: the limit of each plan with trials
    to run made or set once there, so the workers find it as set instead of racing to
    create it."""
    wanted = {
        limited
        for plan in plans
        if plan.todo
        and (limited := rate_limit_of(adapter_for(plan.project, plan.settings.scoring)))
    }
    if not wanted - _kept:
        return
    with get_client(sync_client=True) as client, _kept_lock:
        for name, limit in wanted - _kept:
            keep_limit(client, name, limit)
            _kept.add((name, limit))


def prefect_pacer(name: str, limit: RateLimit) -> float:
    """Take one slot of the server's limit ``name``, waiting while it has none; the seconds
    waited. A stop raises :class:`~honesteval.interrupts.TrialAbandoned`; a server that does
    not answer, :class:`~honesteval.errors.InfraError` (missing data, retried)."""
    began = time.monotonic()
    try:
        with get_client(sync_client=True) as client:
            with _kept_lock:
                if (name, limit) not in _kept:
                    keep_limit(client, name, limit)
                    _kept.add((name, limit))
            while True:
                try:
                    client.increment_concurrency_slots([name], 1, mode="rate_limit")
                    return time.monotonic() - began
                except httpx.HTTPStatusError as exc:
                    if exc.response.status_code != _LOCKED:
                        raise
                    wait = float(exc.response.headers.get("Retry-After", 1 / limit.per_s))
                if interrupts.sleep(wait):
                    raise interrupts.TrialAbandoned()
    except (httpx.HTTPError, OSError, ObjectNotFound) as exc:
        raise InfraError(f"rate limit {name}: the Prefect server: {type(exc).__name__}") from None
