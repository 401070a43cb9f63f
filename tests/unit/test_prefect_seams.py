"""Prefect's private parts honesteval touches, read from Prefect 3.9.1: each test fails on an
upgrade that removes or reshapes one, before a user meets it at run time. The bound in
pyproject.toml (``prefect>=3.9.1,<3.10``) is raised on purpose, after these pass on the new
version.
"""

from __future__ import annotations

import inspect
import os
import re
import tomllib
from pathlib import Path

import prefect

ROOT = Path(__file__).resolve().parents[2]
#: The Prefect minor these seams were read from.
READ_FROM = "3.9"


def test_the_declared_prefect_bound_is_the_minor_the_seams_were_read_from() -> None:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (prefect_dep,) = [d for d in deps if re.match(r"prefect[<>=]", d)]
    assert prefect_dep == f"prefect>=3.9.1,<{READ_FROM[:2]}{int(READ_FROM[2:]) + 1}"
    assert prefect.__version__.startswith(f"{READ_FROM}.")


def test_serve_starts_flow_runs_through_starter_engine_run_process() -> None:
    """``orchestration.serving`` replaces this module attribute to start each flow run in a
    session of its own; it passes ``start_new_session`` on and wraps ``task_status_handler``."""
    from prefect.runner import _starter_engine

    params = inspect.signature(_starter_engine.run_process).parameters
    assert "task_status_handler" in params
    assert any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    # the starter looks the name up in its module when it runs (``await run_process(``), so
    # the attribute serve replaces is the one called
    starter = inspect.getsource(_starter_engine.EngineCommandStarter)
    assert "await run_process(" in starter


def test_the_sync_client_keeps_its_http_client_as_client_underscore() -> None:
    """``server.in_process`` counts recorded task runs with ``client._client.post``."""
    from prefect.client.orchestration import SyncPrefectClient

    assert "self._client" in inspect.getsource(SyncPrefectClient.__init__)
    assert "post" in dir(__import__("httpx").Client)


def test_the_event_and_log_workers_drain_with_a_timeout() -> None:
    """``server.in_process.send_pending`` drains both before a temporary server stops."""
    from prefect.events.worker import EventsWorker
    from prefect.logging.handlers import APILogWorker

    for worker in (EventsWorker, APILogWorker):
        assert "timeout" in inspect.signature(worker.drain_all).parameters


def test_the_server_app_is_made_by_create_app() -> None:
    """``server.localserver`` serves ``prefect.server.api.server:create_app`` with uvicorn."""
    from prefect.server.api import server

    assert callable(server.create_app)
    assert "ephemeral" in inspect.signature(server.create_app).parameters


def test_the_log_texts_honesteval_filters_are_the_ones_prefect_writes() -> None:
    """``orchestration.tasks`` drops Prefect's ``Finished in state InfraError(...)`` and ``Task
    run failed with state: ...`` records by their text; ``server.in_process`` drops a draining
    worker's ``Still processing items`` line."""
    from prefect import task_engine
    from prefect._internal.concurrency import services

    engine = inspect.getsource(task_engine)
    assert 'f"Finished in state {display_state}"' in engine
    assert 'f"Task run failed with {failure_type}: {exc_or_state!r}"' in engine
    assert '"Still processing items: ' in inspect.getsource(services)


def test_a_flow_validates_its_parameters_from_the_wrapper_s_signature() -> None:
    """``orchestration.flows._execute`` hands Prefect a wrapper whose ``__signature__`` carries
    the flow's resolved annotations; Prefect reads parameters through ``inspect.signature``."""
    from prefect.utilities import callables

    assert "inspect.signature" in inspect.getsource(callables.parameter_schema)


def test_py_key_value_reads_its_beartype_switch_from_the_servers_environment() -> None:
    """The servers honesteval starts set ``PY_KEY_VALUE_DISABLE_BEARTYPE`` (``SERVER_DEFAULTS``):
    py-key-value, which docket imports in Prefect's server, must read that name and skip
    beartype's checks for it (strategy O0), unless the user said otherwise."""
    import subprocess
    import sys

    from honesteval.server.localserver import server_env, temporary_server_env

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
