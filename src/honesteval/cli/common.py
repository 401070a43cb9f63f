"""What the command modules share: the exit codes, the common options, their checks, and
the early start of the reusable Prefect server."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, TypedDict

import typer

from honesteval.errors import HonestevalError
from honesteval.settings_help import SETTINGS_HELP

EXIT_OK, EXIT_REJECTED, EXIT_USAGE, EXIT_INDECISIVE = 0, 1, 2, 3
EXIT_INTERNAL, EXIT_INTERRUPTED = 4, 130


ProjectOpt = Annotated[
    Path, typer.Option("--project", "-p", help="project folder (default: current directory)")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="machine-readable JSON on stdout")]
VerboseOpt = Annotated[
    bool,
    typer.Option(
        "--verbose", "-v", help="every number on the screen (default: the answer in a few lines)"
    ),
]
CsvOpt = Annotated[bool, typer.Option("--csv", help="CSV on stdout (one row per trial/task)")]
#: What a report prints as: the terminal's text, or markdown fit for a pull-request comment.
TEXT_FORMATS = ("text", "markdown")
FormatOpt = Annotated[
    str, typer.Option("--format", help="text, or markdown (a pull-request comment)")
]


#: Where trials run: the options ``evaluate`` and ``gate`` share (:func:`distribution`).
BatchSizeOpt = Annotated[int | None, typer.Option(help=SETTINGS_HELP["batch_size"])]
TaskRunnerOpt = Annotated[str, typer.Option(help=SETTINGS_HELP["task_runner"])]
DaskAddressOpt = Annotated[str | None, typer.Option(help=SETTINGS_HELP["dask_address"])]


#: The spend cap of one command: the request's ``budget`` (:func:`budget_given`).
BudgetUsdOpt = Annotated[
    float | None, typer.Option("--budget-usd", help=SETTINGS_HELP["budget_usd"])
]
BudgetTokensOpt = Annotated[
    int | None, typer.Option("--budget-tokens", help=SETTINGS_HELP["budget_tokens"])
]


def budget_given(usd: float | None, tokens: int | None) -> dict[str, float | int] | None:
    """``--budget-usd`` / ``--budget-tokens`` as a request's ``budget`` (None: neither given;
    the request checks the values)."""
    given = {k: v for k, v in (("usd", usd), ("tokens", tokens)) if v is not None}
    return given or None


class Distribution(TypedDict):
    """A request's fields for where and how many at once its trials run."""

    max_concurrency: int | None
    batch_size: int | None
    task_runner: str
    dask_address: str | None


def distribution(
    max_concurrency: int | None, batch_size: int | None, task_runner: str, dask_address: str | None
) -> Distribution:
    """Where trials run, as a request's fields: checked, one line for a bad value, and the
    ``[dask]`` extra found before anything starts."""
    from honesteval.evaluation.plan import check_positive

    check_positive("--max-concurrency", max_concurrency)
    check_positive("--batch-size", batch_size)
    if task_runner not in ("thread", "dask"):
        raise HonestevalError(f"--task-runner must be thread or dask, got {task_runner!r}")
    kind = "dask" if dask_address else task_runner  # an address only makes sense for Dask
    if kind == "dask":
        from honesteval.orchestration.flows import dask_task_runner

        dask_task_runner(1, dask_address)  # the extra is there (nothing starts yet)
    return {
        "max_concurrency": max_concurrency,
        "batch_size": batch_size,
        "task_runner": kind,
        "dask_address": dask_address,
    }


def one_format(as_json: bool, as_csv: bool) -> None:
    if as_json and as_csv:
        raise HonestevalError("--json and --csv exclude each other: pick one")


def text_format(fmt: str, as_json: bool) -> bool:
    """Whether ``--format`` asks for markdown; a bad value or one beside --json is refused."""
    if fmt not in TEXT_FORMATS:
        raise HonestevalError(f"unknown --format {fmt!r}: use {' or '.join(TEXT_FORMATS)}")
    if as_json and fmt != "text":
        raise HonestevalError("--format markdown and --json/--csv exclude each other: pick one")
    return fmt == "markdown"


def parse_int_list(text: str | None, what: str) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise HonestevalError(f"{what} must be comma-separated integers, got {text!r}") from None


def start_server_early() -> None:
    """A command that runs flows starts (or joins) the reusable Prefect server first, so it
    boots while the command imports, validates and plans (``honesteval.server.sitting``)."""
    from honesteval.server.sitting import start_early

    start_early()
