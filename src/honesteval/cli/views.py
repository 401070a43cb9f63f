"""``honesteval status``, ``compare``, ``export`` and ``report``: views of the stored state."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from honesteval.cli.common import (
    EXIT_OK,
    EXIT_USAGE,
    CsvOpt,
    FormatOpt,
    JsonOpt,
    ProjectOpt,
    one_format,
    text_format,
)
from honesteval.cli.output import print_json, print_lines, stderr_line
from honesteval.errors import HonestevalError


def status_command(
    project: ProjectOpt = Path("."),
    last: Annotated[int, typer.Option(help="decisions, results and candidates shown")] = 10,
    as_json: JsonOpt = False,
) -> int:
    """The current best, the last decisions, the coverage history, the test seal."""
    from honesteval.views.status import project_status, status_lines

    report = project_status(project, last=last)
    if as_json:
        print_json(json.dumps(report.as_json(), indent=2))
    else:
        print_lines(status_lines(report))
    if not report.ledger.ok:
        stderr_line(f"error: {report.ledger.message()}")
        return EXIT_USAGE
    return EXIT_OK


def compare_command(
    candidates: Annotated[
        list[str], typer.Argument(help="two or more; the first is the reference")
    ],
    project: ProjectOpt = Path("."),
    split: Annotated[str, typer.Option(help="train, val or test")] = "val",
    as_json: JsonOpt = False,
    as_csv: CsvOpt = False,
    fmt: FormatOpt = "text",
) -> int:
    """Candidates side by side per task, paired Δ ± SE against the first (stored results)."""
    from honesteval.views.compare import (
        compare_candidates,
        compare_csv,
        compare_lines,
        compare_markdown,
    )

    one_format(as_json, as_csv)
    markdown = text_format(fmt, as_json or as_csv)
    report = compare_candidates(project, candidates, split)
    if as_json:
        print_json(json.dumps(report, indent=2))
    elif as_csv:
        print_json(compare_csv(report))
    elif markdown:
        print_json(compare_markdown(report))
    else:
        print_lines(compare_lines(report))
    return EXIT_OK


def export_command(
    project: ProjectOpt = Path("."),
    fmt: Annotated[str, typer.Option("--format", help="jsonl or csv")] = "jsonl",
    split: Annotated[str | None, typer.Option(help="only this split")] = None,
    candidate: Annotated[str | None, typer.Option(help="only this candidate")] = None,
    out: Annotated[Path | None, typer.Option(help="write here (default: stdout)")] = None,
) -> int:
    """Stored trials, one row per trial (columns documented in honesteval.views.export)."""
    from honesteval.views.export import FORMATS, export_lines

    if fmt not in FORMATS:
        raise HonestevalError(f"unknown --format {fmt!r}: use {' or '.join(FORMATS)}")
    counted = _Counted(export_lines(project, fmt, split, candidate))
    if out is None:  # the data on stdout, what it was on stderr
        sys.stdout.writelines(counted)
        stderr_line(f"exported {counted.rows} trials as {fmt}")
    else:
        from honesteval.store.state_dir import atomic_write_lines

        atomic_write_lines(out, counted)
        size = _size_text(out.stat().st_size)
        print(f"wrote {counted.rows} trials as {fmt} to {out.resolve()} ({size})")
    return EXIT_OK


def report_command(
    project: ProjectOpt = Path("."),
    out: Annotated[
        Path | None, typer.Option(help="default: .honesteval/report.html in the project")
    ] = None,
    split: Annotated[str, typer.Option(help="train, val or test")] = "val",
    open_it: Annotated[
        bool, typer.Option("--open", help="open it in the default browser when written")
    ] = False,
) -> int:
    """One self-contained HTML report of the stored state (no network needed to open it)."""
    from honesteval.views.html import write_report

    path, _ = write_report(project, out, split)
    print(f"wrote {path.resolve()} ({_size_text(path.stat().st_size)})")
    if open_it:
        import webbrowser

        if not webbrowser.open(path.resolve().as_uri()):
            print(f"no browser found to open it; open {path.resolve().as_uri()}", file=sys.stderr)
    return EXIT_OK


class _Counted:
    """Export's lines as they stream past, counted: ``rows``, the trials (the first line is
    the format's header, empty for JSONL)."""

    def __init__(self, lines: Any):
        self.lines = lines
        self.rows = -1

    def __iter__(self) -> Iterator[str]:
        for line in self.lines:
            self.rows += 1
            yield line


def _size_text(n_bytes: int) -> str:
    """``812 bytes``, ``41.3 KB``, ``1.85 MB`` (powers of 1000, as file managers say)."""
    if n_bytes < 1000:
        return f"{n_bytes} bytes"
    if n_bytes < 1_000_000:
        return f"{n_bytes / 1000:.1f} KB"
    return f"{n_bytes / 1_000_000:.2f} MB"
