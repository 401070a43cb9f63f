"""The ``honesteval`` command line (typer).

Exit codes: 0 ok/accepted, 1 rejected (or a failed probe), 2 usage or config error,
3 indecisive (or low coverage), 4 internal error (a bug: one line, the traceback in a file),
130 interrupted (Ctrl-C or SIGTERM). A user's bad input is one line on stderr, never a
traceback.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import shutil
import sys
import tempfile
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from honesteval.errors import HonestevalError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Honest, variance-aware evaluation and significance gating.",
)

EXIT_OK, EXIT_REJECTED, EXIT_USAGE, EXIT_INDECISIVE = 0, 1, 2, 3
EXIT_INTERNAL, EXIT_INTERRUPTED = 4, 130

ProjectOpt = Annotated[
    Path, typer.Option("--project", "-p", help="project folder (default: current directory)")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="machine-readable JSON on stdout")]
CsvOpt = Annotated[bool, typer.Option("--csv", help="CSV on stdout (one row per trial/task)")]


def _one_format(as_json: bool, as_csv: bool) -> None:
    if as_json and as_csv:
        raise HonestevalError("--json and --csv exclude each other: pick one")


def _show_version(value: bool) -> None:
    if value:
        from honesteval import __version__

        print(f"honesteval {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_show_version, is_eager=True, help="print the version and exit"
        ),
    ] = False,
) -> None:
    """Honest, variance-aware evaluation and significance gating."""


def _prefect_defaults() -> None:
    """Offline-friendly, quiet defaults; a user's own environment wins."""
    for key, value in {
        "PREFECT_LOGGING_LEVEL": "WARNING",
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "60",
    }.items():
        os.environ.setdefault(key, value)


# The real stdout, kept while a --json/--csv command runs with sys.stdout pointed at stderr:
# a print() in a python target (or anything else) cannot break what a machine reads.
_json_stdout: list[Any] = []


def _print_json(text: str) -> None:
    out = _json_stdout[-1] if _json_stdout else sys.stdout
    out.write(text if text.endswith("\n") else text + "\n")
    out.flush()


def _stderr_line(message: str) -> None:
    print(message, file=sys.stderr)


def _console() -> Any:
    from rich.console import Console

    return Console(soft_wrap=True)


def _print_result(result: Any) -> None:
    from rich.table import Table

    from honesteval.views.text import (
        coverage_text,
        fmt,
        interval_lines,
        missing_text,
        pass_k_rows,
        trial_counts,
    )

    console = _console()
    r = result
    console.print(f"[bold]{r.candidate}[/bold] on {r.split}  (fingerprint {r.fingerprint[:12]})")
    console.print(f"  reward    {fmt(r.reward)} ± {fmt(r.stderr)}  (SE, {r.stderr_method})")
    for label, text in interval_lines(r):
        console.print(f"  {label:9} {text}", markup=False, highlight=False)
    console.print(f"  coverage  {coverage_text(r)}")
    missing = missing_text(r)
    if missing is not None:
        console.print(f"  missing   {missing}", markup=False, highlight=False)
    console.print(f"  trials    {r.n_trials} per task: {trial_counts(r)}")
    rows = pass_k_rows(r)
    if rows:
        table = Table(*rows[0], box=None, pad_edge=False)
        for row in rows:
            table.add_row(*(str(v) for v in row.values()))
        console.print(table)
    for w in r.warnings:
        console.print(f"  [yellow]warning:[/yellow] {w}")


@contextlib.contextmanager
def _live_progress() -> Iterator[None]:
    """Progress on stderr while trials run: a bar per evaluation on a terminal, moving per
    trial; elsewhere (a pipe, a log, CI) a line every few seconds. Both say done/total,
    ok/failed/missing and an ETA, and print what the flow announces (a confirmation, why)."""
    from honesteval.evaluation.progress import ProgressLines, listening

    if not sys.stderr.isatty():
        with ProgressLines(_stderr_line) as lines, listening(lines):
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


def _parse_int_list(text: str | None, what: str) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise HonestevalError(f"{what} must be comma-separated integers, got {text!r}") from None


def _report_evaluation(result: Any, project: Any, as_json: bool, as_csv: bool = False) -> int:
    """Print an evaluation's SplitResult; exit 3 when its coverage is below min_coverage."""
    if as_json:
        _print_json(result.model_dump_json(indent=2))
    elif as_csv:
        from honesteval.store.state_dir import Store
        from honesteval.views.export import render, result_records

        _print_json(render(result_records(Store(project.state_dir), result), "csv"))
    else:
        _print_result(result)
    return EXIT_INDECISIVE if result.coverage < project.gate_config.min_coverage else EXIT_OK


def _start_server_early() -> None:
    """A command that runs flows starts (or joins) the reusable Prefect server first, so it
    boots while the command imports, validates and plans (``honesteval.server.sitting``)."""
    from honesteval.server.sitting import start_early

    start_early()


@app.command()
def evaluate(
    project: ProjectOpt = Path("."),
    candidate: Annotated[str | None, typer.Option(help="default: the current best")] = None,
    split: Annotated[str, typer.Option(help="train or val (test is sealed)")] = "val",
    trials: Annotated[int | None, typer.Option(help="trials per task")] = None,
    base_seed: Annotated[int | None, typer.Option(help="trial k uses base_seed + k")] = None,
    ks: Annotated[str | None, typer.Option(help="pass^k / pass@k ks, e.g. 1,2,3")] = None,
    task_ids: Annotated[str | None, typer.Option(help="comma-separated subset")] = None,
    max_concurrency: Annotated[int | None, typer.Option(help="trials in flight")] = None,
    batch_size: Annotated[int | None, typer.Option(help="trials per task run (auto)")] = None,
    fresh: Annotated[bool, typer.Option(help="ignore stored trials")] = False,
    task_runner: Annotated[str, typer.Option(help="thread or dask")] = "thread",
    dask_address: Annotated[str | None, typer.Option(help="tcp://host:8786")] = None,
    as_json: JsonOpt = False,
    as_csv: CsvOpt = False,
) -> int:
    """Evaluate a candidate: reward ± SE, 95% CI, coverage, pass^k and pass@k."""
    _start_server_early()
    from honesteval import api

    _one_format(as_json, as_csv)
    ks_list = _parse_int_list(ks, "--ks")
    ids = None if task_ids is None else [t for t in task_ids.split(",") if t]
    from honesteval.evaluation.plan import check_positive

    check_positive("--max-concurrency", max_concurrency)
    check_positive("--batch-size", batch_size)
    if dask_address:
        task_runner = "dask"  # an address only makes sense for Dask
    if task_runner not in ("thread", "dask"):
        raise HonestevalError(f"--task-runner must be thread or dask, got {task_runner!r}")
    if task_runner == "dask":
        from honesteval.orchestration.flows._dask import dask_task_runner

        dask_task_runner(1, dask_address)  # the [dask] extra is there (nothing starts yet)
    proj = api.load_project(project)
    with _live_progress():
        result = api.evaluate(
            proj,
            candidate,
            split=split,
            trials=trials,
            base_seed=base_seed,
            ks=ks_list,
            task_ids=ids,
            max_concurrency=max_concurrency,
            fresh=fresh,
            batch_size=batch_size,
            task_runner=task_runner,  # type: ignore[arg-type]
            dask_address=dask_address,
            echo=_stderr_line,
        )
    return _report_evaluation(result, proj, as_json, as_csv)


@app.command()
def check(
    project: ProjectOpt = Path("."),
    candidate: Annotated[str | None, typer.Option(help="candidate to probe")] = None,
    as_json: JsonOpt = False,
) -> int:
    """Validate the project file and probe the adapter (stable tasks, seeds that matter)."""
    from honesteval.evaluation.checks import check_project

    results = check_project(str(project), candidate)
    if as_json:
        _print_json(json.dumps([r.__dict__ for r in results], indent=2))
    else:
        console = _console()
        style = {"ok": "green", "warn": "bold red", "fail": "bold red"}
        for r in results:
            console.print(f"[{style[r.level]}]{r.level.upper():4}[/] {r.name}: {r.detail}")
    return EXIT_REJECTED if results.failed else EXIT_OK


def _gate_notice(project: Path, candidate: str, trials: int | None, **overrides: Any) -> None:
    """Before a gate runs: what it will run, and why (on stderr). Said only once every check
    the gate makes before it spends anything has passed: bad input stays one line."""
    from honesteval.ledger.gate_ledger import confirm_trials as confirmation_trials
    from honesteval.ledger.gate_ledger import prepare_gate
    from honesteval.project.loader import load_project
    from honesteval.stats import screen_stopping, staged_rule
    from honesteval.views.text import gate_plan_notice

    proj = load_project(project)
    cfg, best, plan = prepare_gate(proj, candidate, n_trials=trials, **overrides)
    later = confirmation_trials(cfg, plan.n_trials) if cfg.confirm else None
    current = None if best is None else best.name
    staged = best is not None and staged_rule(screen_stopping(cfg), plan.n_trials) is not None
    _stderr_line(
        gate_plan_notice(candidate, current, len(plan.tasks), plan.n_trials, later, staged=staged)
    )


def _print_lines(lines: list[str]) -> None:
    console = _console()
    for line in lines:
        console.print(line, markup=False, highlight=False)


@app.command()
def gate(
    project: ProjectOpt = Path("."),
    candidate: Annotated[str, typer.Option(help="the challenger")] = "",
    trials: Annotated[int | None, typer.Option(help="trials per task")] = None,
    base_seed: Annotated[int | None, typer.Option(help="trial k uses base_seed + k")] = None,
    mode: Annotated[str | None, typer.Option(help="paired|significant|threshold|strict")] = None,
    k_se: Annotated[float | None, typer.Option(help="bar in standard errors")] = None,
    alpha: Annotated[float | None, typer.Option(help="one-sided level, replaces k_se")] = None,
    max_concurrency: Annotated[int | None, typer.Option(help="trials in flight")] = None,
    confirm: Annotated[
        bool | None,
        typer.Option(
            "--confirm/--no-confirm",
            help="confirm a screen pass on fresh seeds at the online level (default); "
            "--no-confirm: single stage, no search-level guarantee",
        ),
    ] = None,
    confirm_trials: Annotated[
        int | None, typer.Option(help="trials per task of the confirmation (default 3x)")
    ] = None,
    as_json: JsonOpt = False,
) -> int:
    """Gate a candidate against the current best on val: promote only a real gain."""
    _start_server_early()
    from honesteval import api

    if not candidate:
        raise HonestevalError("--candidate is required")
    from honesteval.evaluation.plan import check_positive

    check_positive("--max-concurrency", max_concurrency)
    # what the notice checks is what the gate then runs: one set of settings for both
    settings: dict[str, Any] = dict(
        base_seed=base_seed,
        mode=mode,
        k_se=k_se,
        alpha=alpha,
        confirm=confirm,
        confirm_trials=confirm_trials,
    )
    if not as_json:
        _gate_notice(project, candidate, trials, **settings)
    with _live_progress():
        decision = api.gate(
            project,
            candidate,
            trials=trials,
            max_concurrency=max_concurrency,
            orchestration="prefect",
            echo=_stderr_line,
            **settings,
        )
    if as_json:
        _print_json(decision.model_dump_json(indent=2))
    else:
        from honesteval.views.text import decision_lines

        _print_lines(decision_lines(decision))
    if decision.indecisive:
        return EXIT_INDECISIVE
    return EXIT_OK if decision.accept else EXIT_REJECTED


@app.command()
def rescore(
    project: ProjectOpt = Path("."),
    candidate: Annotated[str | None, typer.Option(help="default: the current best")] = None,
    split: Annotated[str, typer.Option(help="train or val")] = "val",
    trials: Annotated[int | None, typer.Option(help="trials per task")] = None,
    base_seed: Annotated[int | None, typer.Option(help="trial k uses base_seed + k")] = None,
    as_json: JsonOpt = False,
) -> int:
    """Re-grade stored rollouts with the current scorer; no target runs again."""
    _start_server_early()
    from honesteval import api

    proj = api.load_project(project)
    with _live_progress():
        result = api.rescore(
            proj,
            candidate,
            split=split,
            trials=trials,
            base_seed=base_seed,
            orchestration="prefect",
            echo=_stderr_line,
        )
    return _report_evaluation(result, proj, as_json)


@app.command()
def finalize(
    project: ProjectOpt = Path("."),
    candidate: Annotated[str | None, typer.Option(help="default: the current best")] = None,
    trials: Annotated[int | None, typer.Option(help="trials per task")] = None,
    as_json: JsonOpt = False,
) -> int:
    """Score the sealed test split once (a second call is refused)."""
    _start_server_early()
    from honesteval import api

    with _live_progress():
        result = api.finalize(
            project, candidate, trials=trials, orchestration="prefect", echo=_stderr_line
        )
    if as_json:
        _print_json(result.model_dump_json(indent=2))
    else:
        _print_result(result)
        _console().print("test split sealed: finalize will refuse from now on")
    return EXIT_OK


@app.command("refreeze-splits")
def refreeze_splits(project: ProjectOpt = Path(".")) -> int:
    """Write a lost splits.json again, refused if a task with stored trials would cross the
    test boundary."""
    from honesteval.project.loader import load_project

    split = load_project(project).refreeze_split()
    counts = ", ".join(f"{len(split[name])} {name}" for name in ("train", "val", "test"))
    _console().print(f"split re-frozen: {counts}; no task with stored trials changed sides of test")
    return EXIT_OK


@app.command()
def status(
    project: ProjectOpt = Path("."),
    last: Annotated[int, typer.Option(help="decisions, results and candidates shown")] = 10,
    as_json: JsonOpt = False,
) -> int:
    """The current best, the last decisions, the coverage history, the test seal."""
    from honesteval.views.status import project_status, status_lines

    report = project_status(project, last=last)
    if as_json:
        _print_json(json.dumps(report.as_json(), indent=2))
    else:
        _print_lines(status_lines(report))
    if not report.ledger.ok:
        _stderr_line(f"error: {report.ledger.message()}")
        return EXIT_USAGE
    return EXIT_OK


ledger_app = typer.Typer(
    no_args_is_help=True,
    help="The search ledger (decisions.jsonl): check it, repair it explicitly.",
)
app.add_typer(ledger_app, name="ledger")


@ledger_app.command("verify")
def ledger_verify(project: ProjectOpt = Path(".")) -> int:
    """Replay the ledger: exit 0 when intact, 2 (one line) when broken."""
    from honesteval.ledger.gate_ledger import search_ledger
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


@ledger_app.command("repair")
def ledger_repair(
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
    from honesteval.ledger.gate_ledger import repair_ledger
    from honesteval.project.loader import load_project

    print(repair_ledger(load_project(project), accept_break))
    return EXIT_OK


@app.command()
def plan(
    effect: Annotated[float, typer.Option(help="the gain to detect, e.g. 0.03")],
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> int:
    """How many tasks or trials detect EFFECT at 80% power (Miller 2024, Eq. 9-10)."""
    from honesteval.ledger.sample_size import plan_lines, plan_sample_size

    report = plan_sample_size(project, effect)
    if as_json:
        _print_json(json.dumps(report, indent=2))
    else:
        _print_lines(plan_lines(report))
    return EXIT_OK


@app.command()
def compare(
    candidates: Annotated[
        list[str], typer.Argument(help="two or more; the first is the reference")
    ],
    project: ProjectOpt = Path("."),
    split: Annotated[str, typer.Option(help="train, val or test")] = "val",
    as_json: JsonOpt = False,
    as_csv: CsvOpt = False,
) -> int:
    """Candidates side by side per task, paired Δ ± SE against the first (stored results)."""
    from honesteval.views.compare import compare_candidates, compare_csv, compare_lines

    _one_format(as_json, as_csv)
    report = compare_candidates(project, candidates, split)
    if as_json:
        _print_json(json.dumps(report, indent=2))
    elif as_csv:
        _print_json(compare_csv(report))
    else:
        _print_lines(compare_lines(report))
    return EXIT_OK


@app.command()
def export(
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
        _stderr_line(f"exported {counted.rows} trials as {fmt}")
    else:
        from honesteval.store.state_dir import atomic_write_lines

        atomic_write_lines(out, counted)
        size = _size_text(out.stat().st_size)
        print(f"wrote {counted.rows} trials as {fmt} to {out.resolve()} ({size})")
    return EXIT_OK


@app.command()
def report(
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


@app.command()
def serve(
    project: ProjectOpt = Path("."),
    cron: Annotated[str, typer.Option(help="schedule of reevaluate-best/nightly (UTC)")] = (
        "0 3 * * *"
    ),
    limit: Annotated[int | None, typer.Option(help="flow runs at once")] = None,
) -> int:
    """Serve evaluate/val, evaluate/train, gate/val and reevaluate-best/nightly."""
    from honesteval.project.loader import load_project
    from honesteval.server.localserver import PrefectApi

    load_project(project)  # a bad project is one line before any server starts
    # Before Prefect is imported (it reads its API address then): an announced `honesteval
    # server` is used; else a temporary server of honesteval's, in a session of its own (the
    # one Prefect would start shares serve's process group: a Ctrl-C in the terminal stopped
    # it at once, before the runs in flight could record their end).
    with PrefectApi(echo=_stderr_line) as api:
        from honesteval.orchestration import serving

        serving.deployments_for(project, cron)  # validate before announcing anything
        api.ready()
        if api.server is not None:
            _stderr_line(
                f"using a temporary Prefect server at {api.api_url}: it stops with serve "
                "(`honesteval server` in another terminal keeps the runs and their UI)"
            )
        print(
            f"serving evaluate/val, evaluate/train, gate/val, reevaluate-best/nightly ({cron} UTC)"
            f" for {project.resolve()}; Ctrl-C stops"
        )
        return serving.serve(project, cron=cron, limit=limit)


@app.command()
def server(
    action: Annotated[
        str | None,
        typer.Argument(
            help="stop: stop the server running for this PREFECT_HOME (the reusable one "
            "honesteval commands start, or one started with `honesteval server`)",
            show_default=False,
        ),
    ] = None,
    project: ProjectOpt = Path("."),
    host: Annotated[str, typer.Option(help="address to bind")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port")] = 4200,
    database_url: Annotated[
        str | None, typer.Option(help="e.g. postgresql+asyncpg://user:pw@host/db")
    ] = None,
) -> int:
    """Start a local Prefect server that records every task run (SQLite in the project);
    `honesteval server stop` stops the one running for this PREFECT_HOME."""
    if action == "stop":
        from honesteval.server.sitting import stop_server

        return stop_server(_stderr_line)
    if action is not None:
        raise HonestevalError(f"`honesteval server` takes no argument but stop, got {action!r}")
    from honesteval.server.localserver import run_server

    proj = project if (project / "honesteval.yaml").is_file() or project.is_file() else None
    return run_server(proj, host=host, port=port, database_url=database_url)


def _example_dir(name: str) -> Path:
    for base in (Path.cwd() / "examples", Path(__file__).resolve().parents[3] / "examples"):
        if (base / name / "honesteval.yaml").is_file():
            return base / name
    raise HonestevalError(f"example {name!r} not found (run from a honesteval checkout)")


@app.command()
def demo(
    workdir: Annotated[
        Path | None, typer.Option("--dir", help="where to copy the example (default: temp)")
    ] = None,
    trials: Annotated[int, typer.Option(help="trials per task")] = 3,
    as_json: JsonOpt = False,
) -> int:
    """Gate the two bundled circle-packing candidates: 'seed' becomes the baseline, then
    'restarts' is gated against it on the same seeds (one stage, to stay short)."""
    _start_server_early()
    source = _example_dir("circle_packing")
    target = workdir or Path(tempfile.mkdtemp(prefix="honesteval-demo-"))
    dest = target / "circle_packing"
    if not dest.exists():
        shutil.copytree(source, dest, ignore=shutil.ignore_patterns(".honesteval", "__pycache__"))
    from honesteval.project.loader import load_project

    proj = load_project(dest)
    names = proj.candidate_names()
    # The baseline first, then the challenger: the order a user would gate them in.
    names.sort(key=lambda n: (n != "seed", n))
    first, last = names[0], names[-1]
    n_tasks = len(proj.tasks("val"))
    _stderr_line(
        f"demo: the circle-packing example, copied to {dest}. '{first}' is evaluated on val "
        f"({n_tasks} tasks × {trials} trials, each an optimisation of about a second of CPU, "
        f"4 at a time) and becomes the baseline; then '{last}' is evaluated on the same seeds "
        f"and gated against it in one stage (--no-confirm: a search should confirm a pass on "
        f"fresh seeds, see docs/gate.md). {DEMO_TIME}"
    )
    from honesteval import api
    from honesteval.orchestration.flow_runs import flow_runs

    with _live_progress(), flow_runs(echo=_stderr_line):  # one Prefect server for both gates
        baseline = api.gate(proj, first, trials=trials, orchestration="prefect")
        decision = api.gate(proj, last, trials=trials, confirm=False, orchestration="prefect")
    from honesteval.store.reading import latest_results
    from honesteval.store.state_dir import Store

    latest = latest_results(Store(proj.state_dir), "val")
    results = [latest[name] for name in names]
    if as_json:
        payload = {
            "results": [r.model_dump(mode="json") for r in results],
            "decisions": [d.model_dump(mode="json") for d in (baseline, decision)],
        }
        _print_json(json.dumps(payload, indent=2))
    else:
        from honesteval.views.text import decision_lines

        for r in results:
            _print_result(r)
        _console().print("")
        _print_lines(decision_lines(decision))
        _console().print(
            f"\nproject: {dest}\nnext: honesteval report --project {dest} --open\n"
            f"      honesteval status --project {dest}"
        )
    if decision.indecisive:
        return EXIT_INDECISIVE
    return EXIT_OK


#: What the demo costs, measured (docs/performance.md): 5 min 18 s on 2 cores shared under a
#: load average of ~35, with a fresh PREFECT_HOME (its first server sets up a database).
DEMO_TIME = "Expect a few minutes (5 min 18 s measured on 2 heavily shared cores)."


@app.command()
def init(directory: Annotated[Path, typer.Argument(help="folder to create")]) -> int:
    """Scaffold a project: honesteval.yaml, tasks.jsonl, a target, a scorer, a candidate."""
    from honesteval.project.scaffold import scaffold_project

    path = scaffold_project(directory)
    print(f"created {path}; next: honesteval check --project {directory}")
    return EXIT_OK


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app, turn user errors into one line and exit code 2.

    Whatever a command prints (results, probe errors, Prefect's console logs) goes through a
    redacting stream: a configured key never reaches the terminal.
    """
    from honesteval.redaction import RedactingStream

    saved = sys.stdout, sys.stderr, warnings.showwarning
    sys.stdout = RedactingStream(sys.stdout)
    sys.stderr = RedactingStream(sys.stderr)
    warnings.showwarning = _one_line_warning  # a warning is one line, like an error
    words = sys.argv[1:] if argv is None else argv
    as_json = "--json" in words or "--csv" in words
    if as_json:
        _json_stdout.append(sys.stdout)
        sys.stdout = sys.stderr
    try:
        _main(argv)
    finally:
        if as_json:
            _json_stdout.pop()
        sys.stdout, sys.stderr, warnings.showwarning = saved


def _one_line_warning(message: Warning | str, category: type[Warning], *_: Any, **__: Any) -> None:
    print(f"warning: {message}", file=sys.stderr)


def _main(argv: list[str] | None) -> None:
    from honesteval import interrupts

    _prefect_defaults()
    try:
        with interrupts.stop_on_signals():
            code = app(args=argv, standalone_mode=False)
    except interrupts.Stopped as exc:
        print(exc, file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except (typer.Abort, KeyboardInterrupt):
        print(interrupts.STOPPED_LINE, file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    except typer.TyperException as exc:  # typer's (vendored click's) usage errors
        if type(exc).__name__ == "NoArgsIsHelpError":
            print(exc.format_message())
            sys.exit(EXIT_OK)
        format_message = getattr(exc, "format_message", None)
        message = format_message() if format_message else str(exc)
        print(f"error: {message}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    except HonestevalError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    except OSError as exc:  # read-only folder, full disk: what is on disk is already safe
        print(f"error: {interrupts.storage_error_line(exc)}", file=sys.stderr)
        sys.exit(EXIT_USAGE)
    except Exception as exc:  # a bug: one line here, the whole story in a file
        if interrupts.requested():  # what the stop broke off, not a bug
            print(interrupts.STOPPED_LINE, file=sys.stderr)
            sys.exit(EXIT_INTERRUPTED)
        words = sys.argv[1:] if argv is None else argv
        command_name = next((w for w in words if not w.startswith("-")), "")
        saved = _save_traceback(exc, words)
        print(
            f"error: internal error in `honesteval {command_name}`: {type(exc).__name__}: "
            f"{str(exc)[:300]} (traceback: {saved}; the project's state is as it was)",
            file=sys.stderr,
        )
        sys.exit(EXIT_INTERNAL)
    sys.exit(code if isinstance(code, int) else EXIT_OK)


def _project_option(words: list[str]) -> Path:
    """The project folder a command line names (``--project``/``-p``), else the current one."""
    for i, word in enumerate(words):
        if word in ("--project", "-p") and i + 1 < len(words):
            return Path(words[i + 1])
        if word.startswith("--project="):
            return Path(word.split("=", 1)[1])
    return Path(".")


def _save_traceback(exc: BaseException, words: list[str]) -> str:
    """Write ``exc``'s traceback (secrets redacted) to ``errors/`` in the project's state
    folder, or to a temporary file when there is no project or it cannot be written; the
    file's path, or why nothing was written."""
    import time
    import traceback

    from honesteval.redaction import redact
    from honesteval.store.state_dir import STATE_DIR

    text = redact(f"honesteval {' '.join(words)}\n" + "".join(traceback.format_exception(exc)))
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    name = f"internal-error-{stamp}-{os.getpid()}.txt"
    project = _project_option(words)
    if project.is_file():
        project = project.parent
    folders = [project / STATE_DIR / "errors"] if (project / "honesteval.yaml").is_file() else []
    for folder in [*folders, Path(tempfile.gettempdir())]:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / name
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)  # private
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
            return str(path)
        except OSError:
            continue
    return "not saved: no writable folder"


def command() -> None:
    """The ``honesteval`` command: :func:`main`, then a quick end to the process.

    Python's own shutdown frees every object one by one: with Prefect loaded that took
    0.5-0.7 s after the work was done (a 200-trial evaluate, whole process: 0.52-0.73 s from
    the end of :func:`main` to the exit; 0.07-0.11 s with this). This does what that shutdown
    does first, in its order: wait for threads that are not daemons, run the exit handlers
    (Prefect sends its last events and log lines; logging flushes), flush every open file and
    both streams. Then nothing is left to lose, and the process ends. Where this Python lacks
    either hook, or on an exit that is not a plain code, Python's normal shutdown runs instead.
    """
    from honesteval import interrupts

    code: str | int | None = EXIT_OK
    try:
        main()
    except SystemExit as exc:
        code = EXIT_OK if exc.code is None else exc.code
    if interrupts.requested() and isinstance(code, int):
        # Stopped: threads still giving up their calls are not waited for, and Prefect's exit
        # handlers would send what is queued to a server already stopped (its queue had its
        # moment before the stop); what this process wrote is flushed.
        interrupts.kill_children_now()
        _flush_open_files()
        os._exit(code)
    wait_for_threads = getattr(threading, "_shutdown", None)
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
    if not isinstance(code, int) or wait_for_threads is None or run_exit_handlers is None:
        sys.exit(code)
    wait_for_threads()
    run_exit_handlers()
    _flush_open_files()
    os._exit(code)


def _flush_open_files() -> None:
    """Flush every file still open, as Python's teardown would when it frees them: a python
    target that appends to a file it never flushes or closes keeps its last lines, and the
    command's own output is complete. Text layers first (they write into their buffers),
    then buffers, then the two streams.

    Looking through every object is the cost: one pass, by type (``isinstance`` on every
    object, twice, took 0.17-0.18 s after a 2,000-trial run's ~208,000 objects; this pass
    62-86 ms there, 21 ms after a 200-trial run)."""
    import gc
    import io

    kinds = (io.TextIOWrapper, io.BufferedWriter, io.BufferedRandom)
    files = [o for o in gc.get_objects() if issubclass(type(o), kinds)]
    files.sort(key=lambda f: not isinstance(f, io.TextIOWrapper))  # text layers first
    for stream in [*files, sys.stdout, sys.stderr]:
        with contextlib.suppress(Exception):  # closed, detached, or a broken pipe
            stream.flush()


if __name__ == "__main__":
    command()
