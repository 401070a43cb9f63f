"""What the command modules share: the exit codes, the common options, their checks, and
the early start of the reusable Prefect server."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from honesteval.errors import HonestevalError

EXIT_OK, EXIT_REJECTED, EXIT_USAGE, EXIT_INDECISIVE = 0, 1, 2, 3
EXIT_INTERNAL, EXIT_INTERRUPTED = 4, 130


ProjectOpt = Annotated[
    Path, typer.Option("--project", "-p", help="project folder (default: current directory)")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="machine-readable JSON on stdout")]
CsvOpt = Annotated[bool, typer.Option("--csv", help="CSV on stdout (one row per trial/task)")]
FormatOpt = Annotated[
    str | None,
    typer.Option("--format", help="text, json or markdown (a pull-request comment) on stdout"),
]
OUTPUT_FORMATS = ("text", "json", "markdown")
#: The formats a machine reads from stdout: nothing else may be printed there meanwhile.
MACHINE_FORMATS = ("json", "markdown")


def one_format(as_json: bool, as_csv: bool) -> None:
    if as_json and as_csv:
        raise HonestevalError("--json and --csv exclude each other: pick one")


def output_format(fmt: str | None, as_json: bool) -> str:
    """What a command prints: ``--format`` (text, json, markdown), ``--json`` its shorthand.

    >>> output_format(None, False), output_format("markdown", False), output_format(None, True)
    ('text', 'markdown', 'json')
    """
    if fmt is not None and fmt not in OUTPUT_FORMATS:
        raise HonestevalError(f"--format must be one of {', '.join(OUTPUT_FORMATS)}, got {fmt!r}")
    if as_json and fmt not in (None, "json"):
        raise HonestevalError(f"--json and --format {fmt} exclude each other: pick one")
    return "json" if as_json else fmt or "text"


def machine_output(words: list[str]) -> bool:
    """Whether the command line asks for output a machine reads (``--json``, ``--csv``,
    ``--format json|markdown``): then stdout carries only that.

    >>> machine_output(["gate", "--format", "markdown"]), machine_output(["gate", "--format=text"])
    (True, False)
    """
    if "--json" in words or "--csv" in words:
        return True
    for i, word in enumerate(words):
        value = word.partition("=")[2] if word.startswith("--format=") else None
        if word == "--format" and i + 1 < len(words):
            value = words[i + 1]
        if value in MACHINE_FORMATS:
            return True
    return False


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
