"""Prefect's private parts honesteval touches, all in :mod:`honesteval.server.prefect_seams`
(read from Prefect 3.9.1): each test fails on an upgrade that removes or reshapes one, before
a user meets it at run time. The bound in pyproject.toml (``prefect>=3.9.1,<3.10``) is raised
on purpose, after these pass on the new version.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import os
import re
import tomllib
from pathlib import Path

import prefect

from honesteval.server import prefect_seams

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "honesteval"


def test_the_declared_prefect_bound_is_the_minor_the_seams_were_read_from() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (prefect_dep,) = [d for d in deps if re.match(r"prefect[<>=]", d)]
    major, minor, _ = prefect_seams.READ_FROM.split(".")
    assert prefect_dep == f"prefect>={prefect_seams.READ_FROM},<{major}.{int(minor) + 1}"
    assert prefect.__version__.startswith(f"{major}.{minor}.")


def _private_prefect_touches(path: Path) -> list[str]:
    """``prefect…_private`` modules imported, and ``._name`` attributes read off a name
    imported from Prefect (``client._client``, ``_starter_engine.run_process``)."""
    tree = ast.parse(path.read_text())
    imports = [n for n in ast.walk(tree) if isinstance(n, ast.Import | ast.ImportFrom)]
    if not any(
        (n.module or "").startswith("prefect")
        if isinstance(n, ast.ImportFrom)
        else any(a.name.startswith("prefect") for a in n.names)
        for n in imports
    ):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("prefect"):
            names = [node.module or "", *(a.name for a in node.names)]
            found += [n for n in names if any(p.startswith("_") for p in n.split("."))]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("prefect") and "._" in a.name]
        elif isinstance(node, ast.Attribute) and node.attr in ("_client", "drain_all"):
            found.append(node.attr)
        elif isinstance(node, ast.Assign):  # a flow's function replaced: ``flow.fn = …``
            found += ["fn" for t in node.targets if isinstance(t, ast.Attribute) and t.attr == "fn"]
    return found


def test_no_module_but_the_seams_touches_a_private_part_of_prefect() -> None:
    """Private Prefect modules (``prefect.runner._starter_engine``), the sync client's
    ``_client``, a flow's ``fn`` replaced and the workers' ``drain_all`` are reached only
    through ``server.prefect_seams``."""
    seams = SRC / "server" / "prefect_seams.py"
    touching = {
        str(p.relative_to(SRC)): hits
        for p in sorted(SRC.rglob("*.py"))
        if p != seams and (hits := _private_prefect_touches(p))
    }
    assert touching == {}
    assert _private_prefect_touches(seams)  # the check finds what the seams do


def test_serve_starts_flow_runs_through_starter_engine_run_process() -> None:
    """``flow_run_processes`` replaces this module attribute while ``serve`` runs (each flow
    run's process in a session of its own); Prefect's starter looks it up each time."""
    from prefect.runner import _starter_engine

    params = inspect.signature(_starter_engine.run_process).parameters
    assert "task_status_handler" in params
    assert any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    starter = inspect.getsource(_starter_engine.EngineCommandStarter)
    assert "await run_process(" in starter

    original = _starter_engine.run_process
    seen = []

    async def start(run: object, command: list[str], kwargs: dict[str, object]) -> str:
        seen.append((run, command, kwargs))
        return "started"

    with prefect_seams.flow_run_processes(start):
        replaced = _starter_engine.run_process
        assert asyncio.run(replaced(["python", "-m", "x"], env={})) == "started"
    assert seen == [(original, ["python", "-m", "x"], {"env": {}})]
    assert _starter_engine.run_process is original  # put back when serving ends


def test_the_sync_client_keeps_its_http_client_as_client_underscore() -> None:
    """``task_run_counter`` counts recorded task runs with ``client._client.post``."""
    import httpx
    from prefect.client.orchestration import SyncPrefectClient

    assert "self._client" in inspect.getsource(SyncPrefectClient.__init__)
    assert callable(httpx.Client.post)
    assert not hasattr(SyncPrefectClient, "count_task_runs")  # else: use it, drop the seam


def test_the_event_and_log_workers_drain_with_a_timeout() -> None:
    """``drain_event_and_log_workers`` drains both before a temporary server stops, and
    drops their progress line by its text."""
    from prefect._internal.concurrency import services
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (EventsWorker, APILogWorker):
        assert "timeout" in inspect.signature(worker.drain_all).parameters
    assert f'"{prefect_seams.DRAIN_PROGRESS}: ' in inspect.getsource(services)


def test_the_server_app_is_made_by_create_app() -> None:
    """``server_app`` is ``prefect.server.api.server.create_app()``, served with uvicorn."""
    from prefect.server.api import server

    assert callable(server.create_app)
    params = inspect.signature(server.create_app).parameters
    assert all(p.default is not inspect.Parameter.empty for p in params.values())


def test_the_ui_app_serves_the_v2_bundle_and_points_it_at_the_ui_api_url() -> None:
    """``server_ui_app`` (the reusable server's UI, built on demand) serves the v2 runs page
    and tells the pages the API address ``PREFECT_UI_API_URL`` names."""
    import anyio
    import httpx
    from prefect.settings import PREFECT_UI_API_URL, temporary_settings

    from honesteval.server.prefect_seams import server_ui_app

    async def ask(app: object) -> tuple[dict, httpx.Response]:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://ui") as client:
            settings = (await client.get("/ui-settings")).json()
            return settings, await client.get("/v2/runs", headers={"accept": "text/html"})

    with temporary_settings(updates={PREFECT_UI_API_URL: "http://127.0.0.1:4999/api"}):
        settings, page = anyio.run(ask, server_ui_app())
    assert settings["api_url"] == "http://127.0.0.1:4999/api"
    assert "v2" in settings["available_uis"]
    assert page.status_code == 200 and "<html" in page.text.lower()


def test_the_task_run_state_markers_find_the_lines_prefect_writes() -> None:
    """``orchestration.tasks`` and ``server.in_process`` drop Prefect's lines about a task
    run in an InfraError/ScorerError state by ``task_run_state_markers``: they must match the
    lines as Prefect formats them, and no line about another state."""
    from prefect import task_engine
    from prefect.states import Completed, Failed

    engine = inspect.getsource(task_engine)
    assert 'f"Finished in state {display_state}"' in engine
    assert 'f"Task run failed with {failure_type}: {exc_or_state!r}"' in engine
    markers = prefect_seams.task_run_state_markers(["InfraError"])
    infra, other = Failed(name="InfraError", message="x"), Failed(name="Failed", message="x")
    for state, dropped in ((infra, True), (other, False), (Completed(), False)):
        for line in (f"Finished in state {state}", f"Task run failed with state: {state!r}"):
            assert any(m in line for m in markers) is dropped, line


def test_a_flow_is_called_through_its_fn_and_validated_from_its_signature() -> None:
    """``with_function`` copies a flow with another ``fn`` (the API's planned flows), and
    ``signature_of`` is what Prefect validates parameters from: Prefect reads ``self.fn``
    when a flow is called and ``inspect.signature`` for its parameters."""
    from prefect import Flow, flow, flow_engine
    from prefect.utilities import callables

    assert "get_call_parameters(self.fn" in inspect.getsource(Flow.__call__)
    assert "call_with_parameters(self.flow.fn" in inspect.getsource(flow_engine)
    assert "inspect.signature" in inspect.getsource(callables.parameter_schema)
    assert "inspect.signature" in inspect.getsource(callables.get_call_parameters)

    @flow(name="seam-probe")
    def probe(project: str, n_trials: int | None = None) -> str:
        return "template"

    def other(*args: object, **kwargs: object) -> str:
        return "planned"

    other.__signature__ = prefect_seams.signature_of(probe.fn)  # type: ignore[attr-defined]
    copy = prefect_seams.with_function(probe, other)
    assert copy.fn is other
    assert (copy.name, copy.parameters) == (probe.name, probe.parameters)
    assert probe.fn is not other  # the template is untouched
    assert callables.get_call_parameters(copy.fn, ("p",), {"n_trials": 3}) == {
        "project": "p",
        "n_trials": 3,
    }


def test_py_key_value_reads_its_beartype_switch_from_the_servers_environment() -> None:
    """The servers honesteval starts set ``PY_KEY_VALUE_DISABLE_BEARTYPE`` (``SERVER_DEFAULTS``):
    py-key-value, which docket imports in Prefect's server, must read that name and skip
    beartype's checks for it (strategy O0), unless the user said otherwise."""
    import subprocess
    import sys

    from honesteval.server.server_process import server_env, temporary_server_env

    probe = "import beartype, key_value.aio as k; print(k.strategy is beartype.BeartypeStrategy.O0)"

    def skips_checks(env: dict[str, str]) -> bool:
        out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True)
        assert out.returncode == 0, out.stderr.decode()[-500:]
        return out.stdout.decode().strip() == "True"

    user = {k: v for k, v in os.environ.items() if k != "PY_KEY_VALUE_DISABLE_BEARTYPE"}
    assert skips_checks(temporary_server_env(user))
    assert not skips_checks(temporary_server_env({**user, "PY_KEY_VALUE_DISABLE_BEARTYPE": "0"}))
    assert not skips_checks(user)  # py-key-value's own default: the checks run
    assert server_env(None)["PY_KEY_VALUE_DISABLE_BEARTYPE"] == os.environ.get(
        "PY_KEY_VALUE_DISABLE_BEARTYPE", "true"
    )


def test_the_server_app_asks_twice_for_one_form_of_its_settings_and_the_copy_is_exact() -> None:
    """``settings_as_environment_once`` (``server_app``): the method keeps its arguments;
    ``create_app`` asks for one form of the current settings more than once (else the memo
    saves nothing); inside the block every answer equals Prefect's own and is a copy; after
    it the method is Prefect's again."""
    import prefect.main  # noqa: F401  (Prefect's logging set up, as in a server; create_app redoes it)
    from prefect.server.api.server import create_app
    from prefect.settings import get_current_settings
    from prefect.settings.base import PrefectBaseSettings

    params = inspect.signature(PrefectBaseSettings.to_environment_variables).parameters
    assert list(params) == ["self", "exclude_unset", "include_secrets", "include_aliases"]
    original = PrefectBaseSettings.to_environment_variables
    settings = get_current_settings()
    expected = {
        aliases: settings.to_environment_variables(include_aliases=aliases)
        for aliases in (False, True)
    }
    asked: list[tuple[object, ...]] = []
    with prefect_seams.settings_as_environment_once():
        once = PrefectBaseSettings.to_environment_variables

        def counted(self: PrefectBaseSettings, *args: object, **kwargs: object) -> object:
            if self is settings:
                asked.append((*args, *sorted(kwargs.items())))
            return once(self, *args, **kwargs)  # type: ignore[arg-type]

        PrefectBaseSettings.to_environment_variables = counted  # type: ignore[method-assign,assignment]
        try:
            create_app(ignore_cache=True)
        finally:
            PrefectBaseSettings.to_environment_variables = once  # type: ignore[method-assign]
        for aliases, form in expected.items():
            answer = settings.to_environment_variables(include_aliases=aliases)
            assert answer == form
            answer["PREFECT_API_URL"] = "changed"  # a copy: the next answer is whole
            assert settings.to_environment_variables(include_aliases=aliases) == form
    assert PrefectBaseSettings.to_environment_variables is original
    assert len(asked) > len(set(asked)), asked


def test_every_form_of_settings_as_environment_in_the_block_is_prefects_own() -> None:
    """Inside ``settings_as_environment_once`` each level's dump leaves its nested settings
    out: every form (unset values left out or not, secrets, aliases) of the default settings
    and of settings with nested values and a secret set equals Prefect's own answer; after the
    block ``model_dump`` is pydantic's again and dumps nested settings whole."""
    import itertools

    from prefect.settings import Settings, get_current_settings
    from prefect.settings.base import PrefectBaseSettings

    set_deep = Settings(
        api={"key": "a-secret-key", "url": "http://127.0.0.1:4200/api"},
        server={"api": {"port": 4321}, "services": {"late_runs": {"enabled": False}}},
        logging={"level": "DEBUG"},
    )
    forms = list(itertools.product([False, True], repeat=3))
    objects = [get_current_settings(), set_deep]
    expected = [
        [o.to_environment_variables(*form) for form in forms]
        for o in objects  # Prefect's own
    ]
    set_only, hidden = (
        expected[1][forms.index((True, True, False))],
        expected[1][forms.index((True, False, False))],
    )
    assert set_only["PREFECT_API_KEY"] == "a-secret-key" and hidden["PREFECT_API_KEY"] == "*" * 10
    assert set_only["PREFECT_SERVER_API_PORT"] == "4321"
    with prefect_seams.settings_as_environment_once():
        for o, answers in zip(objects, expected, strict=True):
            for form, answer in zip(forms, answers, strict=True):
                assert o.to_environment_variables(*form) == answer, form
    assert "model_dump" not in vars(PrefectBaseSettings)
    assert set_deep.model_dump()["server"]["api"]["port"] == 4321


def test_a_request_builds_only_the_included_routers_its_path_could_match(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """``routers_built_when_their_paths_are_asked`` (``server_app``): FastAPI keeps Prefect's
    resource routers as ``_IncludedRouter`` routes of the API app, built on the first request
    that walks past them; with the seam, the client's version check builds only the admin
    router and still answers; and no route is ever skipped that could match: every route's
    path, as FastAPI builds it, starts with the literal start the seam compares."""
    import httpx
    from fastapi.routing import _IncludedRouter
    from prefect.server.api.server import create_app
    from starlette.routing import Mount

    monkeypatch.setattr(_IncludedRouter, "matches", _IncludedRouter.matches)  # restored after
    prefect_seams.routers_built_when_their_paths_are_asked()
    prefect_seams.routers_built_when_their_paths_are_asked()  # idempotent: wrapped once
    assert _IncludedRouter.matches.__wrapped__.__name__ == "matches"  # type: ignore[attr-defined]
    app = create_app(ignore_cache=True)
    (api,) = [r.app for r in app.routes if isinstance(r, Mount) and r.path == "/api"]
    included = [r for r in api.routes if isinstance(r, _IncludedRouter)]
    assert len(included) > 20  # one per resource (31 in 3.9.1)
    assert all(r._effective_candidates_version is None for r in included)  # nothing built yet

    async def ask(path: str) -> httpx.Response:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://server") as client:
            return await client.get(path)

    reply = asyncio.run(ask("/api/admin/version"))
    assert reply.status_code == 200 and reply.json() == prefect.__version__
    built = {r.original_router.prefix for r in included if r._effective_candidates_version}
    assert "/admin" in built and "/flows" not in built and "/deployments" not in built
    assert len(built) <= 3  # the admin router and the root ones (no literal start)
    for router in included:
        start = prefect_seams._literal_start(router)
        for route in router.effective_candidates():
            path = getattr(route.starlette_route, "path", None) or route.path
            assert path.startswith(start), (start, path)


#: Every route of Prefect's API app as FastAPI builds the copy it serves, and the OpenAPI
#: document, as JSON (a child process: routes are declared once per process, at import).
_DESCRIBE_ROUTES = """
import asyncio, json, re, sys
from honesteval.server import prefect_seams
if sys.argv[1] == "seam":  # as the server's process does (models first)
    prefect_seams.models_built_when_first_used()
    prefect_seams.routes_built_once_when_included()
from fastapi.routing import APIRoute, _EffectiveRouteContext, _IncludedRouter
from prefect.server.api.server import create_app
from prefect.server.utilities.server import PrefectAPIRoute
from starlette.routing import Mount

def r(x):  # a repr without memory addresses
    return re.sub(" at 0x[0-9a-f]+", "", repr(x))

def field(f):
    return None if f is None else [f.name, r(f.field_info.annotation), f.mode]

def dependant(d):
    return {
        "call": getattr(d.call, "__qualname__", r(d.call)),
        "params": [[p.name for p in ps] for ps in (
            d.path_params, d.query_params, d.header_params, d.cookie_params, d.body_params)],
        "needs": [dependant(s) for s in d.dependencies],
    }

app = create_app(ignore_cache=True)
(api,) = [r.app for r in app.routes if isinstance(r, Mount) and r.path == "/api"]
included = [i for i in api.routes if isinstance(i, _IncludedRouter)]
declared = [r for i in included for r in i.original_router.routes if isinstance(r, PrefectAPIRoute)]
unbuilt_before = sum("_honesteval_declared" in r.__dict__ for r in declared)

async def ask(path):
    import httpx
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://server") as client:
        return (await client.get(path)).json()

version = asyncio.run(ask("/api/admin/version"))
(admin,) = [i for i in included if i.original_router.prefix == "/admin"]
admin_copies = sorted(type(c).__name__ for c in admin.effective_candidates())
copies = [  # the copies of APIRoutes (not nested routers, mounts or plain routes)
    c for i in included for c in i.effective_candidates()
    if isinstance(c, _EffectiveRouteContext) and isinstance(c.original_route, APIRoute)
]
matching = [  # what matching a request reads, before anything else is read
    [c.path, c.path_regex.pattern, c.path_format, sorted(c.methods), c.name,
     c.endpoint.__qualname__, sorted((k, type(v).__name__) for k, v in c.param_convertors.items()),
     type(c.original_route).__name__, c.starlette_route is None]
    for c in copies
]
routes = []
for c in copies:
    routes.append({
        "path": c.path, "methods": sorted(c.methods), "name": c.name,
        "unique_id": c.unique_id, "status": c.status_code,
        "response_model": r(c.response_model), "response_class": r(c.response_class),
        "tags": [str(t) for t in c.tags], "summary": c.summary,
        "description": c.description, "schema": c.include_in_schema,
        "deprecated": c.deprecated, "dependant": dependant(c.dependant),
        "body": field(c.body_field), "response": field(c.response_field),
        "responses": sorted(map(str, c.response_fields)), "stream": r(c.stream_item_type),
        "sse": c.is_sse_stream, "jsonl": c.is_json_stream, "embed": c._embed_body_fields,
        "declared_route": type(c.original_route).__name__, "copy": type(c).__name__,
    })
print(json.dumps({
    "declared": len(declared), "unbuilt_before": unbuilt_before,
    "unbuilt_after": sum("_honesteval_declared" in r.__dict__ for r in declared),
    "routes": routes, "openapi": app.openapi(), "matching": matching, "version": version,
    "admin_copies": admin_copies,
}, sort_keys=True, default=r))
"""


def test_prefect_routes_built_once_when_served_are_the_routes_fastapi_builds() -> None:
    """``routes_built_once_when_included`` (``server_app``): Prefect's declared API routes are
    not built when declared, nor while the app includes them and makes its copies; a request
    builds the copy that serves it and no other copy of its router; what matching reads of a
    copy before it is built, every copy once built (path, methods, names, status, models,
    dependencies, body and response fields) and the OpenAPI document are what FastAPI builds
    without the seam."""
    import json
    import subprocess
    import sys

    def described(mode: str) -> dict:
        out = subprocess.run(
            [sys.executable, "-c", _DESCRIBE_ROUTES, mode], capture_output=True, text=True
        )
        assert out.returncode == 0, out.stderr[-2000:]
        return json.loads(out.stdout)  # type: ignore[no-any-return]

    fastapi_builds, with_seam = described("fastapi"), described("seam")
    assert fastapi_builds["unbuilt_before"] == 0
    assert with_seam["declared"] == fastapi_builds["declared"] > 150  # ~190 in 3.9.1
    assert with_seam["unbuilt_before"] == with_seam["unbuilt_after"] == with_seam["declared"]
    assert with_seam["version"] == fastapi_builds["version"] == prefect.__version__
    # the version check built its own copy only (5 routes in the admin router in 3.9.1)
    assert set(fastapi_builds["admin_copies"]) == {"_EffectiveRouteContext"}
    assert with_seam["admin_copies"].count("_EffectiveRouteContext") == 1
    assert with_seam["admin_copies"].count("CopyBuiltWhenServed") >= 3
    assert len(with_seam["matching"]) == len(fastapi_builds["matching"]) > 150
    for matched, fastapi_matched in zip(
        with_seam["matching"], fastapi_builds["matching"], strict=True
    ):
        assert matched == fastapi_matched
    assert len(with_seam["routes"]) == len(fastapi_builds["routes"]) > 150
    for built, fastapi_built in zip(with_seam["routes"], fastapi_builds["routes"], strict=True):
        assert built == fastapi_built
    assert with_seam["openapi"] == fastapi_builds["openapi"]


def test_a_model_declared_after_the_seam_is_built_at_its_first_use() -> None:
    """pydantic's own ``defer_build`` is every model's default once the seam ran: a model's
    fields are there at once, its validator is built at its first use and validates as an
    eagerly built one does; a model that asks to be built at once still is."""
    import subprocess
    import sys

    probe = """
import pydantic
from honesteval.server import prefect_seams
prefect_seams.models_built_when_first_used()
class Run(pydantic.BaseModel):
    name: str
    trials: int = 4
class Eager(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(defer_build=False)
    x: int
assert list(Run.model_fields) == ["name", "trials"]
assert not Run.__pydantic_complete__ and Eager.__pydantic_complete__
run = Run.model_validate({"name": "r", "trials": "7"})
assert Run.__pydantic_complete__ and run.trials == 7
assert run.model_dump() == {"name": "r", "trials": 7}
try:
    Run.model_validate({"trials": "many"})
except pydantic.ValidationError as exc:
    print(exc.error_count())
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "2"  # name missing, trials not an integer


def test_a_declared_prefect_route_read_for_more_than_its_path_is_built_first() -> None:
    """An unbuilt declared route answers any attribute as the route FastAPI built: read once,
    it is built (then it is a plain ``APIRoute``), and a missing attribute is still missing."""
    import subprocess
    import sys

    probe = """
from honesteval.server import prefect_seams
prefect_seams.routes_built_once_when_included()
prefect_seams.routes_built_once_when_included()  # idempotent
from prefect.server.utilities.server import PrefectRouter
router = PrefectRouter(prefix="/things")
@router.get("/{thing_id}")
async def read_thing(thing_id: int) -> dict[str, int]:
    '''Read one thing.'''
    return {"id": thing_id}
route, = router.routes
assert "_honesteval_declared" in route.__dict__ and route.path == "/things/{thing_id}"
assert route.name == "read_thing"
assert [p.name for p in route.dependant.path_params] == ["thing_id"]  # built now
assert "_honesteval_declared" not in route.__dict__
assert route.methods == {"GET"} and route.description == "Read one thing."
assert route.response_field is not None and route.unique_id == "read_thing_things__thing_id__get"
try:
    route.no_such_attribute
except AttributeError:
    print("ok")
"""
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
