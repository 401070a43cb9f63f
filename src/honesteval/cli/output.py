"""What the commands print: JSON kept on the real stdout, one-line messages on stderr, a
result, lines, and the live progress while trials run."""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator, Sequence
from typing import Any

from honesteval.cli.common import EXIT_INDECISIVE, EXIT_OK

# The real stdout, kept while a --json/--csv command runs with sys.stdout pointed at stderr:
# a print() in a python target (or anything else) cannot break what a machine reads.
json_stdout: list[Any] = []

#: What ``--json`` tells of each trial that did not end ok (the trial file holds the rest).
NOT_OK_FIELDS = {"task_id", "seed", "trial", "status", "attempts", "error"}


def print_json(text: str) -> None:
    out = json_stdout[-1] if json_stdout else sys.stdout
    out.write(text if text.endswith("\n") else text + "\n")
    out.flush()


def stderr_line(message: str) -> None:
    print(message, file=sys.stderr)


def rich_console() -> Any:
    from rich.console import Console

    return Console(soft_wrap=True)


def print_result(result: Any, not_ok: Sequence[Any] = (), verbose: bool = True) -> None:
    """A SplitResult for a person; ``not_ok``: its trials that did not end ok, told in one
    line per status with a first example (the JSON carries every one). Not ``verbose``: the
    default screen, a few lines (:func:`honesteval.views.summary.evaluation_lines`)."""
    if not verbose:
        from honesteval.views.summary import evaluation_lines

        print_lines(evaluation_lines(result, not_ok))
        return
    from rich.table import Table

    from honesteval.views.text import (
        coverage_text,
        failure_lines,
        fmt,
        interval_lines,
        missing_text,
        pass_k_rows,
        trial_counts,
    )

    console = rich_console()
    r = result
    console.print(f"[bold]{r.candidate}[/bold] on {r.split}  (fingerprint {r.fingerprint[:12]})")
    console.print(f"  reward    {fmt(r.reward)} ± {fmt(r.stderr)}  (SE, {r.stderr_method})")
    # the reported 95% CI is the interval; the others fold under "details", one line each
    folded = False
    for label, text in interval_lines(r):
        if label == "95% CI":
            line = f"  {label:9} {text}"
        else:
            line = f"  {'' if folded else 'details':9} {label} {text}"
            folded = True
        console.print(line, markup=False, highlight=False)
    console.print(f"  coverage  {coverage_text(r)}")
    missing = missing_text(r)
    if missing is not None:
        console.print(f"  missing   {missing}", markup=False, highlight=False)
    console.print(f"  trials    {r.n_trials} per task: {trial_counts(r)}")
    for line in failure_lines(not_ok):
        console.print(f"  {line}", markup=False, highlight=False)
    rows = pass_k_rows(r)
    if rows:
        table = Table(*rows[0], box=None, pad_edge=False)
        for row in rows:
            table.add_row(*(str(v) for v in row.values()))
        console.print(table)
    for w in r.warnings:
        console.print(f"  [yellow]warning:[/yellow] {w}")


def print_decision(project: Any, decision: Any, typed: Any, verbose: bool = False) -> None:
    """A GateDecision for a person: the default screen (its failed and missing trials read
    from the store), or with ``verbose`` every number. ``typed``: the project folder as the
    user typed it, for the command that would settle an INDECISIVE decision."""
    if verbose:
        from honesteval.views.text import decision_lines

        print_lines(decision_lines(decision))
        return
    import shlex

    from honesteval.store.reading import decided_on, not_ok_trials
    from honesteval.store.state_dir import Store
    from honesteval.views.summary import gate_lines

    store = Store(project.state_dir)
    results = decided_on(store, decision)
    not_ok = {r.candidate: not_ok_trials(store, r) for r in results}
    again = shlex.join(
        ["honesteval", "gate", "--project", str(typed), "--candidate", decision.candidate]
    )
    print_lines(gate_lines(decision, results, not_ok, again))


def print_lines(lines: list[str]) -> None:
    console = rich_console()
    for line in lines:
        console.print(line, markup=False, highlight=False)


@contextlib.contextmanager
def live_progress() -> Iterator[None]:
    """Progress on stderr while trials run: a bar per evaluation on a terminal, moving per
    trial; elsewhere (a pipe, a log, CI) a line every few seconds. Both say done/total,
    ok/failed/missing and an ETA, and print what the flow announces (a confirmation, why)."""
    from honesteval.evaluation.progress import ProgressLines, listening

    if not sys.stderr.isatty():
        with ProgressLines(stderr_line) as lines, listening(lines):
            yield
        return
    with _ProgressBars() as bars, listening(bars):
        yield


class _ProgressBars:
    """A rich progress bar per evaluation in flight (only on a terminal)."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn

        self.bar = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            "{task.fields[counts]}",
            TimeElapsedColumn(),
            "ETA {task.fields[eta]}",
            console=Console(stderr=True),
            transient=True,
        )
        self.ids: dict[str, Any] = {}

    def progress(self, snapshot: Any) -> None:
        from honesteval.evaluation.progress import clock

        eta = snapshot.eta_s()
        fields = {"counts": snapshot.counts_text(), "eta": "?" if eta is None else clock(eta)}
        if snapshot.label not in self.ids:
            self.ids[snapshot.label] = self.bar.add_task(
                snapshot.label, total=snapshot.total, **fields
            )
        self.bar.update(
            self.ids[snapshot.label], completed=snapshot.done, total=snapshot.total, **fields
        )

    def announce(self, text: str) -> None:
        self.bar.console.print(text, markup=False, highlight=False)

    def __enter__(self) -> _ProgressBars:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.bar.__exit__(*exc)


def report_evaluation(
    result: Any, project: Any, as_json: bool, as_csv: bool = False, verbose: bool = False
) -> int:
    """Print an evaluation's SplitResult, its trials that did not end ok named (``--json``:
    every one under ``trials_not_ok``; ``verbose``: every number); exit 3 when its coverage
    is below min_coverage or the budget kept trials from starting (the line saying so goes to
    stderr)."""
    from honesteval.evaluation.budget import budget_line
    from honesteval.store.reading import not_ok_trials
    from honesteval.store.state_dir import Store

    store = Store(project.state_dir)
    if as_csv:
        from honesteval.views.export import render, result_records

        print_json(render(result_records(store, result), "csv"))
    elif as_json:
        payload = result.model_dump(mode="json")
        payload["trials_not_ok"] = [
            r.model_dump(mode="json", include=NOT_OK_FIELDS) for r in not_ok_trials(store, result)
        ]
        print_json(json.dumps(payload, indent=2))
    else:
        print_result(result, not_ok_trials(store, result), verbose)
    if result.budget is not None:
        stderr_line(budget_line(result))
        return EXIT_INDECISIVE
    return EXIT_INDECISIVE if result.coverage < project.gate_config.min_coverage else EXIT_OK
