"""``honesteval init``, ``check`` and ``refreeze-splits``: a project's files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from honesteval.cli.common import EXIT_OK, EXIT_REJECTED, JsonOpt, ProjectOpt
from honesteval.cli.output import print_json, rich_console


def init_command(directory: Annotated[Path, typer.Argument(help="folder to create")]) -> int:
    """Scaffold a project: honesteval.yaml, tasks.jsonl, a target, a scorer, a candidate."""
    from honesteval.project.scaffold import scaffold_project

    path = scaffold_project(directory)
    print(f"created {path}; next: honesteval check --project {directory}")
    return EXIT_OK


def check_command(
    project: ProjectOpt = Path("."),
    candidate: Annotated[str | None, typer.Option(help="candidate to probe")] = None,
    as_json: JsonOpt = False,
) -> int:
    """Validate the project file and probe the adapter (stable tasks, seeds that matter)."""
    from honesteval.evaluation.checks import check_project

    results = check_project(str(project), candidate)
    if as_json:
        print_json(json.dumps([r.__dict__ for r in results], indent=2))
    else:
        console = rich_console()
        style = {"ok": "green", "warn": "bold red", "fail": "bold red"}
        for r in results:
            console.print(f"[{style[r.level]}]{r.level.upper():4}[/] {r.name}: {r.detail}")
    return EXIT_REJECTED if results.failed else EXIT_OK


def refreeze_splits_command(project: ProjectOpt = Path(".")) -> int:
    """Write a lost splits.json again, refused if a task with stored trials would cross the
    test boundary."""
    from honesteval.project.loader import load_project

    split = load_project(project).refreeze_split()
    counts = ", ".join(f"{len(split[name])} {name}" for name in ("train", "val", "test"))
    rich_console().print(
        f"split re-frozen: {counts}; no task with stored trials changed sides of test"
    )
    return EXIT_OK
