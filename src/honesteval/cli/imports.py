"""``honesteval import inspect``: results run elsewhere, stored as honesteval trials."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from honesteval.cli.common import JsonOpt, ProjectOpt
from honesteval.cli.output import report_evaluation, stderr_line


def inspect_command(
    logs: Annotated[list[Path], typer.Argument(help="Inspect logs (.eval or .json) of one run")],
    candidate: Annotated[str, typer.Option(help="the candidate these logs ran")],
    project: ProjectOpt = Path("."),
    scorer: Annotated[
        str | None, typer.Option(help="the score that is the reward: NAME or NAME/KEY")
    ] = None,
    errors: Annotated[
        str, typer.Option(help="a sample error is: missing (data; the default) or failure")
    ] = "missing",
    limits: Annotated[
        str, typer.Option(help="a sample that hit a limit is: failure (the default) or missing")
    ] = "failure",
    as_json: JsonOpt = False,
) -> int:
    """Store Inspect logs as a candidate's trials on val (sample → task, epoch → trial);
    exit 3 when the coverage is below min_coverage. See docs/inspect.md."""
    from honesteval import api
    from honesteval.project.loader import load_project

    summary = api.import_inspect(
        project,
        logs,
        candidate,
        scorer=scorer,
        errors=errors,  # type: ignore[arg-type]  # the API checks it: one line when wrong
        limits=limits,  # type: ignore[arg-type]
    )
    if summary.created_project:
        stderr_line(f"created project {project} from the log: its samples are the val tasks")
    if summary.created_candidate:
        stderr_line(f"created candidate {candidate} in {project / 'candidates'}")
    skipped = f"; {summary.skipped} samples outside val skipped" if summary.skipped else ""
    stderr_line(
        f"imported {summary.trials} trials of {candidate} from {summary.logs} log(s){skipped}"
    )
    return report_evaluation(summary.result, load_project(project), as_json)
