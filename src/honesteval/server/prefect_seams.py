"""The parts of Prefect honesteval relies on that Prefect does not promise to keep, because
Prefect offers no public way to do the same: the texts of its log lines and state names, a
private attribute of its client, the function a flow calls. Each says the public API it waits
for; ``tests/unit/test_prefect_seams.py`` checks each against the installed Prefect (CI: the
newest Prefect 3 and the oldest pyproject.toml allows), so a Prefect without one fails there,
not at a user's run time. Nothing here changes a module or class of FastAPI, Starlette,
pydantic or Prefect (tests/unit/test_contracts.py checks every module for that).

No Prefect import at module level: the CLI imports this before it starts a server.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import logging
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any, TypeVar

T = TypeVar("T")

#: A draining worker's progress line (``prefect._internal.concurrency.services``, 3.9:
#: ``"Still processing items: N items remaining..."``, every 4 s while it drains).
#: Waits for: a ``drain_all`` that can be asked not to log its progress.
DRAIN_PROGRESS = "Still processing items"


@contextlib.contextmanager
def task_run_counter() -> Iterator[Callable[[Mapping[str, Any]], int]]:
    """Count task runs matching a filter body (``POST /task_runs/count``), through the sync
    client's HTTP client (``SyncPrefectClient._client``, 3.9), for as long as the block
    runs. Waits for: a ``count_task_runs`` method on Prefect's client."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:

        def count(body: Mapping[str, Any]) -> int:
            return int(client._client.post("/task_runs/count", json=dict(body)).json())

        yield count


def drain_event_and_log_workers(timeout_s: float) -> None:
    """Send the events and log lines Prefect's client still holds, waiting at most
    ``timeout_s`` for each (``EventsWorker.drain_all`` / ``APILogWorker.drain_all``, 3.9:
    what Prefect's exit handlers call), without their :data:`DRAIN_PROGRESS` lines (each
    worker logs under its class's name). Waits for: a public "flush and wait" of Prefect's
    client."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (EventsWorker, APILogWorker):
        logging.getLogger(worker.__name__).addFilter(_not_drain_progress)
        worker.drain_all(timeout=timeout_s)


def _not_drain_progress(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith(DRAIN_PROGRESS)


def task_run_state_markers(state_names: Collection[str]) -> tuple[str, ...]:
    """The texts by which Prefect's lines about a task run that ended in one of
    ``state_names`` are found (``prefect.task_engine``, 3.9: ``Finished in state
    {display_state}`` and ``Task run failed with state: {state!r}``, a state's repr and display
    both ``Name(...)``). Waits for: the state's name as a field of Prefect's log records."""
    return tuple(f"state {n}(" for n in state_names) + tuple(f"state: {n}(" for n in state_names)


def deployment_parameters(deployment: Any) -> dict[str, Any]:
    """The parameter schema's properties a deployment made by ``Flow.to_deployment`` registers
    (``RunnerDeployment._parameter_openapi_schema``, 3.9: computed from the flow's signature,
    sent as it is when the deployment is applied): a change to them is what the UI's form
    offers. Waits for: a public parameter schema on ``Flow.to_deployment``."""
    properties: dict[str, Any] = deployment._parameter_openapi_schema.properties
    return properties


def with_function(flow: T, fn: Callable[..., Any]) -> T:
    """A copy of ``flow`` (a ``prefect.Flow``) that calls ``fn`` instead of its function: the
    same name, options and parameter schema (computed from the function at creation). Prefect
    3.9 reads ``Flow.fn`` when the flow is called (``get_call_parameters(self.fn, …)``, the
    engine's ``call_with_parameters(flow.fn, …)``), and validates parameters from
    ``inspect.signature(fn)``: give ``fn`` the flow's ``__signature__``. Waits for: a public
    ``Flow.with_options(fn=…)``."""
    planned = copy.copy(flow)
    planned.fn = fn  # type: ignore[attr-defined]
    return planned


def signature_of(fn: Callable[..., Any]) -> inspect.Signature:
    """The signature Prefect validates a flow's parameters from (``inspect.signature`` in
    ``prefect.utilities.callables``, 3.9, which honours ``__signature__``), annotations
    resolved in the function's own module."""
    return inspect.signature(fn, eval_str=True)
