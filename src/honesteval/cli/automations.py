"""``honesteval automations install``: the project's automations on a long-lived Prefect
server (coverage low, drift, a nightly that did not run)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from honesteval.cli.common import EXIT_OK, ProjectOpt
from honesteval.errors import HonestevalError

NotifyOpt = Annotated[
    str | None,
    typer.Option(
        help="A notification block (type/name, as `prefect block ls` shows it, e.g. "
        "slack-webhook/oncall) each automation sends through; empty: they only record firing."
    ),
]
SlackOpt = Annotated[
    float,
    typer.Option(
        "--nightly-slack-h",
        help="Hours past a day without a nightly re-evaluation before its automation fires.",
    ),
]


def _long_lived_api_url() -> str:
    """``PREFECT_API_URL``, else this PREFECT_HOME's running ``honesteval server``: the
    servers the CLI starts itself run no automations."""
    configured = os.environ.get("PREFECT_API_URL")
    if configured:
        return configured
    from honesteval.server.sitting import read_announcement

    found = read_announcement()
    if found is None or found.reusable or not found.running():
        raise HonestevalError(
            "automations act only in a long-lived Prefect server: start `honesteval server` "
            "(or set PREFECT_API_URL to yours), then run this again"
        )
    return found.api_url


def install_command(
    project: ProjectOpt = Path("."), notify: NotifyOpt = None, nightly_slack_h: SlackOpt = 2.0
) -> int:
    """Create the project's automations in Prefect (or update them: a second install changes
    them in place): coverage low, the best drifted, no nightly re-evaluation for a day."""
    from datetime import timedelta

    from honesteval.project.loader import load_project

    if nightly_slack_h < 0:
        raise HonestevalError(f"--nightly-slack-h must be 0 or more, got {nightly_slack_h}")
    name = load_project(project).config.name
    api_url = _long_lived_api_url()
    from honesteval.orchestration.automations import install

    done = install(api_url, name, notify, timedelta(hours=nightly_slack_h))
    for item in done:
        print(f"{'created' if item.created else 'updated'}: {item.name} ({item.id})")
    return EXIT_OK
