"""``honesteval serve`` and ``honesteval server``: deployments and the local Prefect server."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from honesteval.cli.common import ProjectOpt
from honesteval.cli.output import stderr_line
from honesteval.errors import HonestevalError


def serve_command(
    project: ProjectOpt = Path("."),
    cron: Annotated[str, typer.Option(help="schedule of reevaluate-best/nightly (UTC)")] = (
        "0 3 * * *"
    ),
    limit: Annotated[int | None, typer.Option(help="flow runs at once")] = None,
) -> int:
    """Serve evaluate/val, evaluate/train, gate/val and
    reevaluate-best/nightly."""
    from honesteval.project.loader import load_project
    from honesteval.server.localserver import PrefectApi

    load_project(project)  # a bad project is one line before any server starts
    # Before Prefect is imported (it reads its API address then): an announced `honesteval
    # server` is used; else a temporary server of honesteval's, in a session of its own (the
    # one Prefect would start shares serve's process group: a Ctrl-C in the terminal stopped
    # it at once, before the runs in flight could record their end).
    with PrefectApi(echo=stderr_line) as api:
        from honesteval.orchestration import serving

        serving.deployments_for(project, cron)  # validate before announcing anything
        api.ready()
        if api.server is not None:
            stderr_line(
                f"using a temporary Prefect server at {api.api_url}: it stops with serve "
                "(`honesteval server` in another terminal keeps the runs and their UI)"
            )
        print(
            f"serving {', '.join(serving.DEPLOYMENTS)} ({cron} UTC) for {project.resolve()}; "
            "Ctrl-C stops"
        )
        return serving.serve(project, cron=cron, limit=limit)


def server_command(
    action: Annotated[
        str | None,
        typer.Argument(
            help="stop: stop the server running for this PREFECT_HOME (the reusable one "
            "honesteval commands start, or one started with `honesteval server`)",
            show_default=False,
        ),
    ] = None,
    host: Annotated[str, typer.Option(help="address to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port")] = 4200,
    database_url: Annotated[
        str | None, typer.Option(help="e.g. postgresql+asyncpg://user:pw@host/db")
    ] = None,
) -> int:
    """Start a local Prefect server and its UI, recording every task run in PREFECT_HOME's
    database (the sitting's: every run so far shows); `honesteval server stop` stops it."""
    if action == "stop":
        from honesteval.server.sitting import stop_server

        return stop_server(stderr_line)
    if action is not None:
        raise HonestevalError(f"`honesteval server` takes no argument but stop, got {action!r}")
    from honesteval.server.localserver import run_server

    return run_server(host=host, port=port, database_url=database_url)


#: The page ``honesteval ui`` opens: the flow runs list of Prefect's newer UI.
UI_RUNS = "/v2/runs"


def ui_command() -> int:
    """Open the Prefect UI of the server running for this PREFECT_HOME in a browser (a
    `honesteval server`, or the reusable one commands start); the URL is printed too, for a
    machine without one."""
    import webbrowser

    from honesteval.server.sitting import read_announcement

    found = read_announcement()
    if found is None or not found.running():
        raise HonestevalError(
            "no Prefect server runs for this PREFECT_HOME: start one with `honesteval server` "
            "(or run any command that evaluates); its UI shows every run of the sitting"
        )
    url = found.api_url.removesuffix("/api") + UI_RUNS
    print(url, flush=True)  # before anything the browser prints
    if not webbrowser.open(url):
        stderr_line("no browser found here: open the URL above")
    return 0
