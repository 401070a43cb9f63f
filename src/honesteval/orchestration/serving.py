"""``honesteval serve``: the deployments of a project (the local server: ``localserver``)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from honesteval.errors import ConfigError
from honesteval.project.loader import load_project

DEFAULT_CRON = "0 3 * * *"


def deployments_for(project: str | Path, cron: str = DEFAULT_CRON) -> list[Any]:
    """The four deployments, with the project bound as a parameter.

    ``evaluate/val``, ``evaluate/train``, ``gate/val`` (pass ``candidate``) and
    ``reevaluate-best/nightly`` (cron, UTC). Bad parameters (``split=test``, ``n_trials=0``)
    are refused by Prefect before a run is created: the flows' signatures are the schema.
    """
    from prefect.deployments.runner import RunnerDeployment
    from prefect.schedules import Cron

    from honesteval.orchestration.flows import evaluate, gate, reevaluate_best

    proj = load_project(project)  # a bad project fails here, before serving
    root = str(proj.root)
    try:
        nightly = Cron(cron, timezone="UTC")
    except Exception as exc:
        raise ConfigError(f"--cron {cron!r} is not a valid cron expression: {exc}") from None
    deployments = [
        evaluate.to_deployment(
            name="val",
            parameters={"project": root, "split": "val"},
            description="Evaluate a candidate on val",
        ),
        evaluate.to_deployment(
            name="train",
            parameters={"project": root, "split": "train"},
            description="Evaluate a candidate on train",
        ),
        gate.to_deployment(
            name="val",
            parameters={"project": root},
            description="Gate a candidate against the current best on val",
        ),
        reevaluate_best.to_deployment(
            name="nightly",
            parameters={"project": root},
            schedules=[nightly],
            description="Re-run the current best on val with fresh seeds; report drift",
        ),
    ]
    for deployment in deployments:
        assert isinstance(deployment, RunnerDeployment)  # to_deployment is sync here
        offer_candidates(deployment._parameter_openapi_schema.properties, proj.candidate_names())
    return deployments


def offer_candidates(properties: dict[str, Any], names: list[str]) -> None:
    """Make the ``candidate`` parameter a choice among the candidates found now (the form in
    the UI shows a list; Prefect refuses another name before a run exists). Serve again to
    offer candidates added later."""
    schema = properties.get("candidate")
    if schema is None or not names:
        return
    choice = {"type": "string", "enum": sorted(names)}
    if "anyOf" in schema:  # optional: the current best when left empty
        schema["anyOf"] = [choice, {"type": "null"}]
    else:
        schema.pop("type", None)
        schema.update(choice)


#: After SIGINT/SIGTERM, how long Prefect's own shutdown (pausing the schedules, which it
#: retries after 2, 4, 8, 16, 32 s while a busy server answers 503) may take before serve exits
#: anyway. With the server gone there is nothing to pause: serve exits at once.
STOP_GRACE_S = 90.0
#: How long a health check of the server may take when a stop signal comes.
HEALTH_TIMEOUT_S = 2.0


class _StopWatch:
    """Makes a stop signal end ``serve`` in bounded time. The first SIGINT/SIGTERM starts a
    thread: if the Prefect server does not answer, serve exits right away (Prefect would
    retry pausing its schedules for a minute, logging reconnect tracebacks); else Prefect's
    graceful shutdown gets :data:`STOP_GRACE_S`. A second signal exits at once."""

    def __init__(self, api_url: str | None, say: Any):
        self.api_url = api_url
        self.say = say
        self.armed = threading.Event()

    def arm(self, signal_name: str) -> None:
        if self.armed.is_set():
            self.say(f"serve: second {signal_name}: stopping now")
            os._exit(0)
        self.armed.set()
        threading.Thread(target=self._watch, args=(signal_name,), daemon=True).start()

    def _server_answers(self) -> bool:
        if not self.api_url:
            return False
        import httpx

        try:
            return httpx.get(f"{self.api_url}/health", timeout=HEALTH_TIMEOUT_S).is_success
        except httpx.HTTPError:
            return False

    def _watch(self, signal_name: str) -> None:
        if not self._server_answers():
            self.say(
                f"serve: {signal_name}: the Prefect server at {self.api_url} does not answer; "
                "stopping now (its schedules stay as they are)"
            )
            os._exit(0)
        time.sleep(STOP_GRACE_S)
        self.say(f"serve: still stopping {STOP_GRACE_S:.0f} s after {signal_name}; exiting now")
        os._exit(0)


def serve(project: str | Path, *, cron: str = DEFAULT_CRON, limit: int | None = None) -> None:
    from prefect import serve as prefect_serve
    from prefect.runner import Runner
    from prefect.settings import PREFECT_API_URL

    deployments = deployments_for(project, cron)
    watch = _StopWatch(PREFECT_API_URL.value(), lambda text: print(text, file=sys.stderr))

    def on_sigint(signum: int, frame: Any) -> None:
        watch.arm("SIGINT")
        signal.default_int_handler(signum, frame)  # KeyboardInterrupt: Prefect's own stop

    # Prefect's runner installs its SIGTERM handler when it starts: wrap it (this process
    # only serves).
    prefect_sigterm = Runner.handle_sigterm

    def on_sigterm(self: Runner, *args: Any, **kwargs: Any) -> None:
        watch.arm("SIGTERM")
        prefect_sigterm(self, *args, **kwargs)

    Runner.handle_sigterm = on_sigterm  # type: ignore[method-assign]
    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        prefect_serve(*deployments, limit=limit)
    finally:
        signal.signal(signal.SIGINT, previous)
        Runner.handle_sigterm = prefect_sigterm  # type: ignore[method-assign]
