"""The parts of Prefect honesteval relies on that Prefect does not promise to keep, all in
:mod:`honesteval.server.prefect_seams`: each test fails on a Prefect that removes or reshapes
one (CI runs them on the newest Prefect 3 and on the oldest pyproject.toml allows), before a
user meets it at run time.
"""

from __future__ import annotations

import ast
import inspect
import re
import tomllib
from pathlib import Path

import prefect

from honesteval.server import prefect_seams

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "honesteval"


def test_prefect_is_allowed_from_a_tested_3_minor_up_to_the_next_major() -> None:
    """Users keep their own Prefect 3: pyproject.toml allows every release from the oldest
    minor CI tests (``.ci/run`` reads this bound) below 4, and the installed one is in it."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (prefect_dep,) = [d for d in deps if re.match(r"prefect[<>=]", d)]
    bound = re.fullmatch(r"prefect>=3\.(\d+),<4", prefect_dep)
    assert bound is not None, prefect_dep
    major, minor = (int(part) for part in prefect.__version__.split(".")[:2])
    assert major == 3 and minor >= int(bound.group(1))


def _private_prefect_touches(path: Path) -> list[str]:
    """``prefect…_private`` modules imported, and ``._name`` attributes read off a name
    imported from Prefect (``client._client``)."""
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
        elif isinstance(node, ast.Attribute) and node.attr in (
            "_client",
            "drain_all",
            "_parameter_openapi_schema",
        ):
            found.append(node.attr)
        elif isinstance(node, ast.Assign):  # a flow's function replaced: ``flow.fn = …``
            found += ["fn" for t in node.targets if isinstance(t, ast.Attribute) and t.attr == "fn"]
    return found


def test_no_module_but_the_seams_touches_a_private_part_of_prefect() -> None:
    """Private Prefect modules (``prefect._internal``), the sync client's
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


def test_the_sync_client_keeps_its_http_client_as_client_underscore() -> None:
    """``task_run_counter`` counts recorded task runs with ``client._client.post``."""
    import httpx
    from prefect.client.orchestration import SyncPrefectClient

    assert "self._client" in inspect.getsource(SyncPrefectClient.__init__)
    assert callable(httpx.Client.post)
    assert not hasattr(SyncPrefectClient, "count_task_runs")  # else: use it, drop the seam


def test_a_deployment_registers_the_parameter_schema_serve_edits() -> None:
    """``deployment_parameters`` hands serve the schema ``to_deployment`` computed, and that
    schema is what the deployment registers: a candidate choice made there reaches the UI."""
    from prefect import flow
    from prefect.deployments.runner import RunnerDeployment

    @flow
    def pick(candidate: str | None = None) -> None:
        """A flow with the ``candidate`` parameter the gate's deployment has."""

    deployment = pick.to_deployment(name="seam")
    properties = prefect_seams.deployment_parameters(deployment)
    assert "candidate" in properties
    properties["candidate"]["enum"] = ["a", "b"]
    assert "self._parameter_openapi_schema.model_dump(" in inspect.getsource(RunnerDeployment)
    assert deployment._parameter_openapi_schema.model_dump()["properties"]["candidate"]["enum"] == [
        "a",
        "b",
    ]


def test_the_event_and_log_workers_drain_with_a_timeout() -> None:
    """``drain_event_and_log_workers`` drains both before a temporary server stops, and
    drops their progress line by its text."""
    from prefect._internal.concurrency import services
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (EventsWorker, APILogWorker):
        assert "timeout" in inspect.signature(worker.drain_all).parameters
    assert f'"{prefect_seams.DRAIN_PROGRESS}: ' in inspect.getsource(services)


def test_the_ui_app_serves_the_v2_bundle_and_points_it_at_the_ui_api_url() -> None:
    """The reusable server's UI, built on demand (``localserver._ui_app``, Prefect's
    ``create_ui_app``), serves the v2 runs page and tells the pages the API address
    ``PREFECT_UI_API_URL`` names."""
    import anyio
    import httpx
    from prefect.settings import PREFECT_UI_API_URL, temporary_settings

    from honesteval.server.localserver import _ui_app

    async def ask(app: object) -> tuple[dict, httpx.Response]:
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://ui") as client:
            settings = (await client.get("/ui-settings")).json()
            return settings, await client.get("/v2/runs", headers={"accept": "text/html"})

    with temporary_settings(updates={PREFECT_UI_API_URL: "http://127.0.0.1:4999/api"}):
        settings, page = anyio.run(ask, _ui_app())
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
