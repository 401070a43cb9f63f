"""``honesteval ledger verify|repair``: the search ledger (decisions.jsonl)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from honesteval.cli.common import EXIT_OK, ProjectOpt


def verify_command(project: ProjectOpt = Path(".")) -> int:
    """Replay the ledger: exit 0 when intact, 2 (one line) when broken."""
    from honesteval.gating.ledger import search_ledger
    from honesteval.project.loader import load_project

    led = search_ledger(load_project(project))
    led.check()
    state = led.state
    print(
        f"search ledger intact: {led.lines} line(s), {state.tests} confirmation(s), "
        f"{len(state.promotions)} promoted, {len(led.open_reservations())} open, "
        f"{led.repairs} repair(s)"
        + (
            f"; line {led.torn_tail} is a torn tail (a write that never finished, no record: "
            "the next append sets it aside in its torn_tail)"
            if led.torn_tail is not None
            else ""
        )
    )
    return EXIT_OK


def repair_command(
    project: ProjectOpt = Path("."),
    accept_break: Annotated[
        str | None,
        typer.Option(
            help="accept the break, with your reason (recorded in the ledger): best.json "
            "stays, the search goes on from before the break, every confirmation the rest "
            "shows counted as spent, no promotion after it credited"
        ),
    ] = None,
) -> int:
    """Repair a broken ledger, recorded as a ledger line; never a silent reset.

    Without --accept-break only a crash between a promotion and best.json is repaired (the
    log wins: best.json is rebuilt from the promoted result's stored trials).
    """
    from honesteval.gating.ledger import repair_ledger
    from honesteval.project.loader import load_project

    print(repair_ledger(load_project(project), accept_break))
    return EXIT_OK
