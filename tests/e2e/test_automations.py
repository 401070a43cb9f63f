"""``honesteval automations install`` against a real long-lived server (``honesteval server``
on 127.0.0.1, its triggers on): the three automations exist with the right triggers, a second
install updates them in place, and a drift event (emitted as the nightly emits it) fires the
drift automation, as the server's event feed shows."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from honesteval.server.localserver import LocalServer
from tests.helpers import copy_database, run_cli

PROJECT = "Nightly Proj"  # the resource ids use its slug: nightly-proj


@pytest.fixture(scope="module")
def server(tmp_path_factory, migrated_prefect_db) -> Iterator[LocalServer]:
    home = tmp_path_factory.mktemp("automations-home")
    copy_database(migrated_prefect_db, home / "prefect.db")
    with LocalServer(home, log=home / "server.log") as running:
        yield running


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Any:
    from tests.helpers import ProjectFactory

    return ProjectFactory(tmp_path_factory.mktemp("automations"))(
        name="nightly", config={"name": PROJECT}
    )


def _automations(server: LocalServer) -> dict[str, dict[str, Any]]:
    reply = httpx.post(f"{server.api_url}/automations/filter", json={}, timeout=30)
    reply.raise_for_status()
    return {a["name"]: a for a in reply.json()}


def _install(server: LocalServer, root: Any, *more: str) -> list[str]:
    done = run_cli("automations", "install", "--project", str(root), *more, env=server.env)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


@pytest.mark.quick
def test_install_creates_three_automations_and_a_second_updates_them(server, project):
    first = _install(server, project)
    names = [
        f"honesteval {PROJECT}: coverage low",
        f"honesteval {PROJECT}: drift",
        f"honesteval {PROJECT}: nightly did not run",
    ]
    assert [line.split(" (")[0] for line in first] == [f"created: {n}" for n in names]
    found = _automations(server)
    assert sorted(found) == sorted(names)
    coverage, drift, nightly = (found[n]["trigger"] for n in names)
    assert coverage["expect"] == ["honesteval.coverage.low"]
    assert coverage["match"] == {"prefect.resource.id": "honesteval.project.nightly-proj"}
    assert coverage["posture"] == "Reactive" and coverage["threshold"] == 1
    assert drift["expect"] == ["honesteval.drift.detected"]
    assert drift["match"] == {"prefect.resource.id": "honesteval.candidate.nightly-proj.*"}
    assert drift["posture"] == "Reactive"
    assert nightly["expect"] == ["honesteval.best.reevaluated"]
    assert nightly["match"] == {"prefect.resource.id": "honesteval.project.nightly-proj"}
    # no nightly event for a day and 2 h of slack: 26 h
    assert nightly["posture"] == "Proactive" and nightly["within"] == 26 * 3600
    assert all(found[n]["actions"] == [{"type": "do-nothing"}] for n in names)

    ids = {n: found[n]["id"] for n in names}
    second = _install(server, project, "--nightly-slack-h", "6")
    assert [line.split(" (")[0] for line in second] == [f"updated: {n}" for n in names]
    again = _automations(server)
    assert sorted(again) == sorted(names)  # no copies
    assert {n: again[n]["id"] for n in names} == ids
    assert again[names[2]]["trigger"]["within"] == 30 * 3600


def test_a_drift_event_fires_the_drift_automation(server, project):
    _install(server, project)
    drift_id = _automations(server)[f"honesteval {PROJECT}: drift"]["id"]
    # the event as reevaluate-best emits it on a drifted best
    code = (
        "from honesteval.models import DriftReport\n"
        "from honesteval.orchestration.flows._events import emit_drift\n"
        "import sys, json\n"
        "report = DriftReport.model_validate(json.loads(sys.argv[1]))\n"
        f"emit_drift({PROJECT!r}, report)\n"
    )
    subprocess.run(
        [sys.executable, "-c", code, _drifted()], env=server.env, check=True, timeout=120
    )
    body = {
        "filter": {
            "event": {"name": ["prefect.automation.triggered"]},
            "resource": {"id": [f"prefect.automation.{drift_id}"]},
        },
        "limit": 10,
    }
    deadline = time.monotonic() + 90
    fired: list[dict[str, Any]] = []
    while not fired and time.monotonic() < deadline:
        reply = httpx.post(f"{server.api_url}/events/filter", json=body, timeout=30)
        reply.raise_for_status()
        fired = reply.json()["events"]
        time.sleep(0.5)
    assert fired, "the drift automation did not fire"
    # the firing names the drift event and the candidate it is about
    triggering = fired[0]["payload"]["triggering_event"]
    assert triggering["event"] == "honesteval.drift.detected"
    assert triggering["resource"]["prefect.resource.id"] == "honesteval.candidate.nightly-proj.base"


def _drifted() -> str:
    import json

    return json.dumps(
        {
            "status": "drifted",
            "message": "current best has drifted",
            "candidate": "base",
            "fingerprint": "f" * 12,
            "stored_reward": 1.0,
            "new_reward": 0.0,
            "delta": -1.0,
            "se": 0.0,
            "bar": 0.1,
            "n_paired": 8,
            "stored_base_seed": 0,
            "new_base_seed": 7,
        }
    )
