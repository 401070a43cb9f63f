"""``honesteval serve``: the deployments of a project (the local server: ``localserver``)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from honesteval.errors import ConfigError
from honesteval.project.loader import load_project
from honesteval.server import live_runs
from honesteval.server.prefect_seams import deployment_parameters

DEFAULT_CRON = "0 3 * * *"
#: The deployments ``honesteval serve`` (and ``deployments/prefect.yaml``) registers, as
#: ``flow/deployment``: ``prefect deployment run evaluate/val`` is the command users type.
#: ``evaluate/val`` and ``gate/val`` share a name; the UI's deployments list tells them apart
#: by their flow, their description and their tags (:data:`DEPLOYMENT_TAGS`).
DEPLOYMENTS = (
    "evaluate/val",
    "evaluate/train",
    "gate/val",
    "reevaluate-best/nightly",
)
#: Each deployment's tags: what it does and on which split (the UI shows them in its list).
DEPLOYMENT_TAGS = {
    "evaluate/val": ["honesteval", "evaluate", "split:val"],
    "evaluate/train": ["honesteval", "evaluate", "split:train"],
    "gate/val": ["honesteval", "gate", "split:val"],
    "reevaluate-best/nightly": ["honesteval", "nightly", "split:val"],
}
#: Gates of one project run one at a time: a second waits, queued, in the UI
#: (``AwaitingConcurrencySlot``) instead of racing the first to the ledger (where the file
#: lock would make it ``REJECT (stale)`` after paying for its trials).
GATE_CONCURRENCY = 1


def deployments_for(project: str | Path, cron: str = DEFAULT_CRON) -> list[Any]:
    """The four :data:`DEPLOYMENTS`, with the project bound as a parameter.

    ``evaluate/val``, ``evaluate/train``, ``gate/val`` (pass
    ``candidate``; one run at a time, the others queued: :data:`GATE_CONCURRENCY`) and
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
            description="evaluate: score a candidate on val (reward ± SE, coverage)",
            tags=DEPLOYMENT_TAGS["evaluate/val"],
        ),
        evaluate.to_deployment(
            name="train",
            parameters={"project": root, "split": "train"},
            description="evaluate: score a candidate on train (reward ± SE, coverage)",
            tags=DEPLOYMENT_TAGS["evaluate/train"],
        ),
        gate.to_deployment(
            name="val",
            parameters={"project": root},
            description="gate: promote a candidate over the current best on val only if it "
            "really beats it (one gate at a time)",
            tags=DEPLOYMENT_TAGS["gate/val"],
            concurrency_limit=GATE_CONCURRENCY,
        ),
        reevaluate_best.to_deployment(
            name="nightly",
            parameters={"project": root},
            schedules=[nightly],
            description="Re-run the current best on val with fresh seeds; report drift",
            tags=DEPLOYMENT_TAGS["reevaluate-best/nightly"],
        ),
    ]
    for deployment in deployments:
        assert isinstance(deployment, RunnerDeployment)  # to_deployment is sync here
        offer_candidates(deployment_parameters(deployment), proj.candidate_names())
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


#: After serve's first SIGINT/SIGTERM, how long the flow runs in flight get to stop: each is
#: asked once (SIGINT, as a terminal's Ctrl-C), stops its targets, gives a python target or
#: scorer :data:`~honesteval.interrupts.GRACE_S`, records what it kept and ends ``Cancelled``.
#: A run still going after that is killed and marked ``Crashed``.
RUN_STOP_S = 8.0
#: Then how long Prefect's runner may take to stop (it pauses the schedules, retrying for a
#: minute while a busy server answers 503) before serve exits anyway, saying so.
PAUSE_S = 6.0
#: After a second signal, how long serve may spend marking the runs it killed ``Crashed``.
AGAIN_S = 1.5
#: How long a question to the server may take while serve stops.
HEALTH_TIMEOUT_S = 2.0
#: Exit codes: stopped with no run in flight (serve's normal end), and with runs stopped.
EXIT_STOPPED, EXIT_INTERRUPTED = 0, 130

_FINAL = ("COMPLETED", "FAILED", "CANCELLED", "CRASHED")
_KEPT = re.compile(r"(\d+ of \d+ trials kept)")


class _RunProcesses:
    """The flow runs this serve process started, each in a child process (``python -m
    prefect.engine``) that moves to a session of its own and notes itself for serve
    (:mod:`honesteval.orchestration.served_run`): a terminal's Ctrl-C reaches serve alone,
    and serve asks each run to stop exactly once (a second signal would stop it at once,
    before it records what it kept). A run still starting, not noted yet, is asked as soon as
    it notes itself."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.asked: dict[str, tuple[int, int]] = {}  # flow run id -> (pid, start time)

    def running(self) -> dict[str, tuple[int, int]]:
        """The runs whose process still runs: noted ones, and those asked to stop (a run drops
        its note as its process exits)."""
        with self.lock:
            asked = dict(self.asked)
        ran = {run: p for run, p in asked.items() if live_runs.alive(*p)}
        return ran | live_runs.served_runs(os.getpid())

    def ask_to_stop(self) -> None:
        """SIGINT to every run not asked yet (its whole process group)."""
        running = self.running()
        with self.lock:
            new = {run: p for run, p in running.items() if run not in self.asked}
            self.asked.update(new)
        for pid, _ in new.values():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGINT)

    def wait(self, timeout_s: float) -> bool:
        """Until every run's process has ended (True), or ``timeout_s``; a run that notes
        itself meanwhile is asked to stop too."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.ask_to_stop()
            if not self.running():
                return True
            time.sleep(0.05)
        return not self.running()

    def kill(self) -> None:
        for pid, _ in self.running().values():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)

    @contextlib.contextmanager
    def marked(self) -> Iterator[None]:
        """While serving, the flow-run processes Prefect's runner starts know serve started
        them (:data:`~honesteval.server.live_runs.SERVED_BY`: they inherit the environment)."""
        previous = os.environ.get(live_runs.SERVED_BY)
        os.environ[live_runs.SERVED_BY] = str(os.getpid())
        try:
            yield
        finally:
            if previous is None:
                os.environ.pop(live_runs.SERVED_BY, None)
            else:
                os.environ[live_runs.SERVED_BY] = previous


class _Stop:
    """How ``serve`` stops on SIGINT or SIGTERM, in bounded time and in one line.

    The first signal: each run in flight is asked to stop (one that starts meanwhile, as soon
    as it notes itself) and gets :data:`RUN_STOP_S` (then it is killed); a run whose process
    ended without a final state is marked ``Crashed``, so none stays ``Running``; Prefect's
    runner then stops (it starts no new run, cancels one still starting, and pauses the
    schedules) within :data:`PAUSE_S`. One line says what became of each run; exit 130 if
    runs were stopped, else 0. With the server gone there is nothing to record or pause: out
    at once. A second signal kills the runs' processes and exits at once (130).
    """

    def __init__(self, runner: Any, runs: _RunProcesses, api_url: str | None, say: Any):
        self.runner = runner
        self.runs = runs
        self.api_url = api_url
        self.say = say
        self.armed = threading.Event()
        self.ended = threading.Lock()  # held by whoever prints the last line
        self.stopping: threading.Thread | None = None  # the stop thread, once a signal came
        self.line: str | None = None
        self.code = EXIT_STOPPED

    def on_signal(self, signum: int, _frame: object = None) -> None:
        """The handler of SIGINT and SIGTERM while serving (main thread: kept short)."""
        if self.armed.is_set():
            self.runs.kill()
            with contextlib.suppress(Exception):
                os.write(2, b"\ninterrupted again: stopped at once\n")
            # Their processes are gone: no run stays Running (a moment at most, then out).
            marking = threading.Thread(target=self._settle_all, daemon=True)
            marking.start()
            marking.join(AGAIN_S)
            os._exit(EXIT_INTERRUPTED)
        self.armed.set()
        name = signal.Signals(signum).name
        self.stopping = threading.Thread(target=self._stop, args=(name,), daemon=True)
        self.stopping.start()

    def _stop(self, signal_name: str) -> None:
        self.runs.ask_to_stop()
        if not self.runs.wait(RUN_STOP_S):
            self.runs.kill()
            self.runs.wait(2.0)
        if self.runs.asked:
            self.code = EXIT_INTERRUPTED
        if not self._server_answers():
            ended = "; ".join(f"flow run {run}" for run in self.runs.asked)
            self._exit(
                f"serve: {signal_name}: the Prefect server at {self.api_url} does not answer;"
                " stopping now (its schedules stay as they are"
                + (f"; {ended} could not be recorded" if ended else "")
                + ")"
            )
        outcomes = self._settle_all()
        if outcomes:
            self.line = f"interrupted: serve stopped {', '.join(outcomes)}; run it again to resume"
        deadline = time.monotonic() + PAUSE_S
        while not self.runner.started and time.monotonic() < deadline:
            time.sleep(0.05)  # a signal while the runner was still starting
        with contextlib.suppress(RuntimeError):  # it never started: nothing to pause
            self.runner.execute_in_background(self.runner.astop)
        time.sleep(max(0.0, deadline - time.monotonic()))
        self._exit(
            (self.line + "; " if self.line else "serve: ")
            + f"its schedules were not paused within {PAUSE_S:.0f} s (a busy or slow server)"
        )

    def _exit(self, line: str) -> None:
        """Say ``line`` and end the process now, unless serve is already ending."""
        if self.ended.acquire(blocking=False):
            self.say(line)
            os._exit(self.code)

    def let_the_stop_end_it(self) -> None:
        """Serve's main thread, while a stop is under way: wait for the stop thread, which
        ends the process on every path within its own bounds (it returns only if it failed).

        The runner can fail after a signal: Prefect's own shutdown pauses the schedules, and
        with the server gone that raises; the stop thread, which checks the server first,
        says the one line (a slow machine can let the runner get there first)."""
        if self.stopping is not None:
            self.stopping.join()

    def finish(self) -> int:
        """The runner stopped (serve's main thread): say what became of the runs."""
        if not self.ended.acquire(blocking=False):
            self.let_the_stop_end_it()  # the stop thread is saying its line and exiting
        if self.line:
            self.say(self.line)
        return self.code

    def _server_answers(self) -> bool:
        if not self.api_url:
            return False
        import httpx

        try:
            return httpx.get(f"{self.api_url}/health", timeout=HEALTH_TIMEOUT_S).is_success
        except httpx.HTTPError:
            return False

    def _settle_all(self) -> list[str]:
        """The outcome of every run serve asked to stop or killed (see :meth:`_outcome`)."""
        with self.runs.lock:
            asked = list(self.runs.asked)
        runs = list(dict.fromkeys([*asked, *self.runs.running()]))
        return [self._outcome(run) for run in runs]

    def _outcome(self, flow_run_id: str) -> str:
        """``evaluate-c1-val Cancelled (8 of 24 trials kept)``: the run's final state; a run
        whose process ended without one is marked ``Crashed`` here."""
        import httpx

        url = f"{self.api_url}/flow_runs/{flow_run_id}"
        try:
            run = httpx.get(url, timeout=HEALTH_TIMEOUT_S).json()
            state = run.get("state") or {}
            if state.get("type") not in _FINAL:
                message = (
                    "serve was stopped and this run's process ended before the run did;"
                    " its finished trials are stored"
                )
                body = {"state": {"type": "CRASHED", "name": "Crashed", "message": message}}
                httpx.post(f"{url}/set_state", json={**body, "force": True}, timeout=5)
                state = body["state"]
        except (httpx.HTTPError, ValueError):
            return f"flow run {flow_run_id} (its state could not be read)"
        kept = _KEPT.search(state.get("message") or "")
        detail = f" ({kept.group(1)})" if kept else ""
        return f"{run.get('name', flow_run_id)} {state.get('name', state.get('type'))}{detail}"


def serve(project: str | Path, *, cron: str = DEFAULT_CRON, limit: int | None = None) -> int:
    """Serve the deployments until SIGINT or SIGTERM (see :class:`_Stop`); the exit code."""
    from prefect.runner import Runner
    from prefect.settings import PREFECT_API_URL

    class ServeRunner(Runner):
        """Prefect's runner, which makes ``handle_sigterm`` the SIGTERM handler as it starts:
        serve's stop instead."""

        def handle_sigterm(self, *args: Any, **kwargs: Any) -> None:
            stop.on_signal(*args)

    deployments = deployments_for(project, cron)
    runner = ServeRunner(pause_on_shutdown=True, limit=limit)
    for deployment in deployments:
        runner.add_deployment(deployment)
    runs = _RunProcesses()
    stop = _Stop(runner, runs, PREFECT_API_URL.value(), lambda text: print(text, file=sys.stderr))
    previous = {sig: signal.signal(sig, stop.on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            with runs.marked():
                asyncio.run(runner.start())
        except Exception:
            if stop.armed.is_set():  # e.g. the runner paused schedules on a server that is gone
                stop.let_the_stop_end_it()
            raise
        return stop.finish()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
