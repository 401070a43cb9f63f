"""Every part of Prefect honesteval touches that Prefect does not promise to keep: private
modules and attributes, the texts of its log lines, the attributes a flow is called through
(and private parts of FastAPI and pydantic, which Prefect's server is built on).
Each was read from Prefect :data:`READ_FROM`; ``tests/unit/test_prefect_seams.py`` checks
each against the installed Prefect, so an upgrade that removes or reshapes one fails there,
not at a user's run time, and pyproject bounds Prefect below the next minor (raised on
purpose, once these pass on it).

No Prefect import at module level: the CLI imports this before it starts a server.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import inspect
import logging
import os
import threading
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
    object's environment variables computed once (:func:`settings_as_environment_once`),
    its routers and each of its routes built as requests need them
    (:func:`routers_built_when_their_paths_are_asked`, :func:`routes_built_once_when_included`)."""
    routes_built_once_when_included()  # before Prefect's API modules declare their routes
    from prefect.server.api.server import create_app

    routers_built_when_their_paths_are_asked()
    with settings_as_environment_once():
        return create_app()


def models_built_when_first_used() -> None:
    """From now on in this process, a pydantic model builds its validator and serializer the
    first time it is used, not where its class is declared: pydantic's own ``defer_build``
    made the default for every model that does not set it (``config_defaults``, private,
    pydantic 2.14; a model's fields are still collected at declaration).

    Why: Prefect's server declares ~770 models at import (its API's schemas, its ORM's,
    its events', its blocks') and a boot built ~490 of them; a first command's requests use a
    few dozen. Only the server's process calls this, first thing (``localserver.main``): the
    server's boot is the first command of a sitting's wait (docs/performance.md, "The first
    command's boot")."""
    from pydantic._internal._config import config_defaults

    config_defaults["defer_build"] = True


#: Where an unbuilt route keeps what it was declared with: ``(path, endpoint, keywords)``.
_DECLARED = "_honesteval_declared"


def routes_built_once_when_included() -> None:
    """From now on, a Prefect API route (``prefect.server.utilities.server.PrefectAPIRoute``,
    3.9.1) is built once, the first time a request is served by it, by the router that
    includes it (``fastapi.routing._EffectiveRouteContext.from_api_route``, FastAPI 0.150), not
    also where its module declares it, nor for every route of its router at that router's
    first request; an older FastAPI, which copies routes at inclusion, is left alone.

    Why: FastAPI 0.150 builds every ``APIRoute`` where it is declared (its dependant, its body
    and response fields: pydantic schemas), and the app's included router builds each route
    again, for its own prefix and dependencies, from the declared route's arguments: all the
    routes of a router on the first request that walks past it. Prefect's API app serves only
    the included copies, so the ~190 builds at import (~0.6 CPU s of a ~4.5 s boot here) were
    never used, and a first command's first requests built ~66 copies to use ~12; both on the
    first command of a sitting's critical path (docs/performance.md).

    A declared route keeps its arguments, its ``path`` and its ``name`` (what FastAPI reads of
    a route it includes); anything else read of it builds it first, as FastAPI would have
    (``built_on_first_use``). An included copy starts with what matching a request reads (its
    path, compiled; its methods; its endpoint and name, derived as FastAPI derives them), and
    anything else read of it builds the rest from the declared arguments, FastAPI deriving
    again what it derives from them (``the_rest_built``): it is then the copy FastAPI builds
    (``tests/unit/test_prefect_seams.py`` compares every route, what matching reads before
    the rest is built, and the OpenAPI document, with and without). Idempotent; the server
    only.
    """
    try:
        from fastapi.routing import APIRoute, _EffectiveRouteContext
    except ImportError:  # a FastAPI that copies routes at inclusion: nothing is built twice
        return
    from prefect.server.utilities.server import PrefectAPIRoute
    from starlette.routing import compile_path, get_name

    if "__getattr__" in PrefectAPIRoute.__dict__:  # installed already
        return
    build = APIRoute.__init__
    declared_with = inspect.signature(build)
    lock = threading.RLock()
    copy_of = _EffectiveRouteContext.from_api_route.__func__  # type: ignore[attr-defined]

    def declare(self: Any, path: str, endpoint: Callable[..., Any], **keywords: Any) -> None:
        self.__dict__[_DECLARED] = (path, endpoint, keywords)
        self.path = path
        name = keywords.get("name")
        self.name = get_name(endpoint) if name is None else name

    def built_on_first_use(self: Any, attribute: str) -> Any:
        with lock:
            declared = self.__dict__.pop(_DECLARED, None)
            if declared is None:
                raise AttributeError(attribute)
            path, endpoint, keywords = declared
            build(self, path, endpoint, **keywords)
        return getattr(self, attribute)

    def as_declared(route: Any) -> Any:
        """``route``, or while it is unbuilt, a stand-in with its declared arguments as the
        attributes its copy is built from (FastAPI's own normalisation of the three that may
        be None; the rest FastAPI derives again itself)."""
        declared = route.__dict__.get(_DECLARED)
        if declared is None:
            return route
        path, endpoint, keywords = declared
        arguments = declared_with.bind(route, path, endpoint, **keywords)
        arguments.apply_defaults()
        stand_in = object.__new__(type(route))
        stand_in.__dict__.update(
            {k: v for k, v in arguments.arguments.items() if k != "self"},
            tags=arguments.arguments["tags"] or [],
            responses=arguments.arguments["responses"] or {},
            dependencies=list(arguments.arguments["dependencies"] or []),
            stream_item_type=None,
        )
        return stand_in

    def the_rest_built(context: Any) -> None:
        with lock:
            if type(context) is not CopyBuiltWhenServed:
                return  # another thread built it
            cls, original_route, include_context = context.__dict__.pop(_DECLARED)
            built = copy_of(
                cls, original_route=as_declared(original_route), include_context=include_context
            )
            # matched and handled as the declared route
            context.__dict__.update(built.__dict__, original_route=original_route)
            context.__class__ = _EffectiveRouteContext

    def the_rest_built_then(attribute: str) -> property:
        def read(context: Any) -> Any:
            the_rest_built(context)
            return getattr(context, attribute)

        return property(read)

    #: what matching a request reads of an included copy of an ``APIRoute``
    #: (``_EffectiveRouteContext.matches``, ``_IncludedRouter._match``, ``APIRoute.matches``)
    matching = {"original_route", "starlette_route", "path", "path_regex", "path_format"}
    matching |= {"param_convertors", "methods", "endpoint", "name"}
    the_rest = {f.name for f in dataclasses.fields(_EffectiveRouteContext)} - matching
    CopyBuiltWhenServed = type(
        "CopyBuiltWhenServed",
        (_EffectiveRouteContext,),
        {attribute: the_rest_built_then(attribute) for attribute in the_rest},
    )

    def included_copy(cls: Any, *, original_route: Any, include_context: Any) -> Any:
        declared = original_route.__dict__.get(_DECLARED)
        if declared is None:
            return copy_of(cls, original_route=original_route, include_context=include_context)
        _, endpoint, keywords = declared
        methods = keywords.get("methods")
        context: Any = object.__new__(CopyBuiltWhenServed)
        path = include_context.path_for(original_route)
        context.__dict__.update(
            {_DECLARED: (cls, original_route, include_context)},
            original_route=original_route,
            starlette_route=None,
            path=path,
            methods={m.upper() for m in (["GET"] if methods is None else methods)},
            endpoint=endpoint,
            name=original_route.name,
        )
        context.path_regex, context.path_format, context.param_convertors = compile_path(path)
        return context

    PrefectAPIRoute.__init__ = declare  # type: ignore[method-assign]
    PrefectAPIRoute.__getattr__ = built_on_first_use  # type: ignore[attr-defined]
    _EffectiveRouteContext.from_api_route = classmethod(included_copy)  # type: ignore[assignment]


def routers_built_when_their_paths_are_asked() -> None:
    """From now on, a request builds only the included routers whose paths it could match
    (FastAPI's ``fastapi.routing._IncludedRouter.matches``, 0.150, the FastAPI Prefect 3.9.1
    installs: Prefect's API app includes one router per resource, 31, and the first request
    that walks past a router builds every route of it, dependants and pydantic adapters,
    whatever its path; an older FastAPI built them all in ``create_app``, and is left alone).

    A router is skipped when the request's path does not start with the literal start its
    routes' paths share (up to the first path parameter): no route of it could match, so the
    route chosen is the one FastAPI chooses. A first command asks 6 of the routers, and its
    first request, the client's version check, sits behind 29 of them: it built ~190 routes,
    0.36 against 0.02 CPU s with the seam (in one process, a first command's requests in
    order: 0.50 against 0.42 s). The server's boot and first requests are the first command's
    critical path (docs/performance.md, "The first command's boot"). Idempotent; the server
    process only.
    """
    try:
        from fastapi.routing import APIRouter, _IncludedRouter
    except ImportError:  # FastAPI before lazy routers: nothing to skip
        return
    from starlette._utils import get_route_path
    from starlette.routing import Match

    if not hasattr(APIRouter, "_get_routes_version"):
        return
    if hasattr(_IncludedRouter.matches, "__wrapped__"):  # installed already
        return
    every_path = _IncludedRouter.matches

    def matches(self: Any, scope: Any) -> tuple[Match, Any]:
        if scope["type"] in ("http", "websocket"):
            start = _literal_start(self)
            if start and not get_route_path(scope).startswith(start):
                return Match.NONE, {}
        return every_path(self, scope)

    matches.__wrapped__ = every_path  # type: ignore[attr-defined]
    _IncludedRouter.matches = matches  # type: ignore[method-assign]


def _literal_start(included: Any) -> str:
    """The literal start every route path of an included router shares ("" when a route has
    no path, e.g. a nested router or a host: then nothing is skipped), computed once per
    version of its routes."""
    router = included.original_router
    version = router._get_routes_version()
    cached = included.__dict__.get("_honesteval_start")
    if cached is not None and cached[0] == version:
        return str(cached[1])
    paths = [getattr(r, "path", None) for r in router.routes]
    start = ""
    if paths and all(isinstance(p, str) for p in paths):
        full = [included.include_context.prefix + p for p in paths]
        start = os.path.commonprefix(full).split("{", 1)[0]  # noqa: RUF071  (characters: a URL template's literal start)
    included.__dict__["_honesteval_start"] = (version, start)
    return start


@contextlib.contextmanager
def settings_as_environment_once() -> Iterator[None]:
    """While the block runs, ``to_environment_variables`` of a settings object computes its
    result once per set of arguments, each settings model serialised once, and hands out
    copies (``prefect.settings.base.PrefectBaseSettings.to_environment_variables``, 3.9.1).

    Prefect's ``create_app`` asks for the same form of the same settings twice (for the cache
    keys of its app and of its API app, ``Settings.hash_key``) and for a second form once (its
    logging config). Nothing changes the settings while the app is built, so a second answer
    is the first one's copy. And each answer serialised every nested settings model once per
    level above it (each level's ``model_dump`` serialises its whole subtree, then the method
    asks each nested model for its own variables, which serialises that subtree again), while
    a level reads only its own fields' values from its dump: inside the block a level's dump
    leaves its nested settings models out (``exclude``; Prefect's ``_ser_model`` then skips
    them too), and each is serialised once, by its own level. The reusable server's boot is
    the first command's wait (docs/performance.md, "The first command's boot")."""
    from prefect.settings.base import PrefectBaseSettings

    original = PrefectBaseSettings.to_environment_variables
    dump = PrefectBaseSettings.model_dump
    own_dump = vars(PrefectBaseSettings).get("model_dump")  # None: pydantic's BaseModel's
    computed: dict[tuple[int, bool, bool, bool], tuple[object, dict[str, str]]] = {}
    own_fields_only = threading.local()

    def once(
        self: PrefectBaseSettings,
        exclude_unset: bool = False,
        include_secrets: bool = True,
        include_aliases: bool = False,
    ) -> dict[str, str]:
        key = (id(self), exclude_unset, include_secrets, include_aliases)
        if key not in computed:  # the object is kept with its result: its id stays its own
            was, own_fields_only.on = getattr(own_fields_only, "on", False), True
            try:
                result = original(
                    self,
                    exclude_unset=exclude_unset,
                    include_secrets=include_secrets,
                    include_aliases=include_aliases,
                )
            finally:
                own_fields_only.on = was
            computed[key] = (self, result)
        return dict(computed[key][1])

    def own_fields_dumped(self: PrefectBaseSettings, **kwargs: Any) -> dict[str, Any]:
        if getattr(own_fields_only, "on", False) and kwargs.get("exclude") is None:
            nested = {
                name
                for name in type(self).model_fields
                if isinstance(getattr(self, name), PrefectBaseSettings)
            }
            kwargs["exclude"] = nested or None
        return dump(self, **kwargs)

    PrefectBaseSettings.to_environment_variables = once  # type: ignore[method-assign]
    PrefectBaseSettings.model_dump = own_fields_dumped  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        PrefectBaseSettings.to_environment_variables = original  # type: ignore[method-assign]
        if own_dump is None:
            del PrefectBaseSettings.model_dump
        else:
            PrefectBaseSettings.model_dump = own_dump  # type: ignore[method-assign]


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
