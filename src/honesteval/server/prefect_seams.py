"""Every part of Prefect honesteval touches that Prefect does not promise to keep: private
modules and attributes, the texts of its log lines, the attributes a flow is called through.
Each was read from Prefect :data:`READ_FROM`; ``tests/unit/test_prefect_seams.py`` checks
each against the installed Prefect, so an upgrade that removes or reshapes one fails there,
not at a user's run time, and pyproject bounds Prefect below the next minor (raised on
purpose, once these pass on it).

No Prefect import at module level: the CLI imports this before it starts a server.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import logging
from collections.abc import Callable, Collection, Iterator, Mapping
from typing import Any, TypeVar

#: The Prefect release every seam below was read from.
READ_FROM = "3.9.1"

T = TypeVar("T")

#: A draining worker's progress line (``prefect._internal.concurrency.services``, 3.9.1:
#: ``"Still processing items: N items remaining..."``, every 4 s while it drains).
DRAIN_PROGRESS = "Still processing items"


def server_app() -> Any:
    """The Prefect server's ASGI app, as ``prefect server start`` serves it
    (``prefect.server.api.server.create_app``, 3.9.1; ``server.localserver`` runs it with
    uvicorn itself, so a server boots without Prefect's CLI), built with each settings
    object's environment variables computed once (:func:`settings_as_environment_once`)."""
    from prefect.server.api.server import create_app

    with settings_as_environment_once():
        return create_app()


@contextlib.contextmanager
def settings_as_environment_once() -> Iterator[None]:
    """While the block runs, ``to_environment_variables`` of a settings object computes its
    result once per set of arguments and hands out copies
    (``prefect.settings.base.PrefectBaseSettings.to_environment_variables``, 3.9.1).

    Prefect's ``create_app`` asks for the same form of the same settings twice (for the cache
    keys of its app and of its API app, ``Settings.hash_key``), ~0.1 s of CPU each: every
    nested settings model is serialised again at each level above it. Nothing changes the
    settings while the app is built, so the second answer is the first one's copy: the
    reusable server's boot is the first command's wait (docs/performance.md, "The first
    command's boot")."""
    from prefect.settings.base import PrefectBaseSettings

    original = PrefectBaseSettings.to_environment_variables
    computed: dict[tuple[int, bool, bool, bool], tuple[object, dict[str, str]]] = {}

    def once(
        self: PrefectBaseSettings,
        exclude_unset: bool = False,
        include_secrets: bool = True,
        include_aliases: bool = False,
    ) -> dict[str, str]:
        key = (id(self), exclude_unset, include_secrets, include_aliases)
        if key not in computed:  # the object is kept with its result: its id stays its own
            computed[key] = (
                self,
                original(
                    self,
                    exclude_unset=exclude_unset,
                    include_secrets=include_secrets,
                    include_aliases=include_aliases,
                ),
            )
        return dict(computed[key][1])

    PrefectBaseSettings.to_environment_variables = once  # type: ignore[method-assign]
    try:
        yield
    finally:
        PrefectBaseSettings.to_environment_variables = original  # type: ignore[method-assign]


def server_ui_app() -> Any:
    """The Prefect UI's ASGI app, as ``prefect server start`` mounts it at ``/``
    (``prefect.server.api.server.create_ui_app(ephemeral=False)``, 3.9.1: it serves the
    static bundles only when ``PREFECT_UI_ENABLED`` is on as it is built; its ``ui-settings``
    read ``PREFECT_UI_API_URL`` per request)."""
    from prefect.server.api.server import create_ui_app
    from prefect.settings import PREFECT_UI_ENABLED, temporary_settings

    with temporary_settings(updates={PREFECT_UI_ENABLED: True}):
        return create_ui_app(ephemeral=False)


@contextlib.contextmanager
def task_run_counter() -> Iterator[Callable[[Mapping[str, Any]], int]]:
    """Count task runs matching a filter body (``POST /task_runs/count``), through the sync
    client's HTTP client (``SyncPrefectClient._client``, 3.9.1: the client has no count
    method), for as long as the block runs."""
    from prefect.client.orchestration import get_client

    with get_client(sync_client=True) as client:

        def count(body: Mapping[str, Any]) -> int:
            return int(client._client.post("/task_runs/count", json=dict(body)).json())

        yield count


def drain_event_and_log_workers(timeout_s: float) -> None:
    """Send the events and log lines Prefect's client still holds, waiting at most
    ``timeout_s`` for each (``EventsWorker.drain_all`` / ``APILogWorker.drain_all``, 3.9.1:
    what Prefect's exit handlers call), without their :data:`DRAIN_PROGRESS` lines (each
    worker logs under its class's name)."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (EventsWorker, APILogWorker):
        logging.getLogger(worker.__name__).addFilter(_not_drain_progress)
        worker.drain_all(timeout=timeout_s)


def _not_drain_progress(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith(DRAIN_PROGRESS)


def task_run_state_markers(state_names: Collection[str]) -> tuple[str, ...]:
    """The texts by which Prefect's lines about a task run that ended in one of
    ``state_names`` are found (``prefect.task_engine``, 3.9.1: ``Finished in state
    {display_state}`` and ``Task run failed with state: {state!r}``, a state's repr and display
    both ``Name(...)``)."""
    return tuple(f"state {n}(" for n in state_names) + tuple(f"state: {n}(" for n in state_names)


@contextlib.contextmanager
def flow_run_processes(
    start: Callable[[Callable[..., Any], list[str], dict[str, Any]], Any],
) -> Iterator[None]:
    """While the block runs, ``serve`` starts each flow run's process through
    ``start(original, command, kwargs)`` (an ``async`` function that awaits ``original(command,
    **kwargs)``): ``prefect.runner._starter_engine.run_process``, 3.9.1, the module attribute
    its engine command starter looks up each time it starts a run."""
    from prefect.runner import _starter_engine

    original = _starter_engine.run_process  # type: ignore[attr-defined]

    async def run_process(command: list[str], **kwargs: Any) -> Any:
        return await start(original, command, kwargs)

    _starter_engine.run_process = run_process  # type: ignore[attr-defined]
    try:
        yield
    finally:
        _starter_engine.run_process = original  # type: ignore[attr-defined]


def with_function(flow: T, fn: Callable[..., Any]) -> T:
    """A copy of ``flow`` (a ``prefect.Flow``) that calls ``fn`` instead of its function: the
    same name, options and parameter schema (computed from the function at creation). Prefect
    3.9.1 reads ``Flow.fn`` when the flow is called (``get_call_parameters(self.fn, …)``, the
    engine's ``call_with_parameters(flow.fn, …)``), and validates parameters from
    ``inspect.signature(fn)``: give ``fn`` the flow's ``__signature__``."""
    planned = copy.copy(flow)
    planned.fn = fn  # type: ignore[attr-defined]
    return planned


def signature_of(fn: Callable[..., Any]) -> inspect.Signature:
    """The signature Prefect validates a flow's parameters from (``inspect.signature`` in
    ``prefect.utilities.callables``, 3.9.1, which honours ``__signature__``), annotations
    resolved in the function's own module."""
    return inspect.signature(fn, eval_str=True)
