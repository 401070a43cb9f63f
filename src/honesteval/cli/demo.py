"""``honesteval demo``: gate the bundled circle-packing candidates."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Annotated

import typer

from honesteval.cli.common import EXIT_INDECISIVE, EXIT_OK, JsonOpt, start_server_early
from honesteval.cli.output import (
    live_progress,
    print_decision,
    print_json,
    print_result,
    rich_console,
    stderr_line,
)
from honesteval.errors import HonestevalError


def _example_dir(name: str) -> Path:
    for base in (Path.cwd() / "examples", Path(__file__).resolve().parents[3] / "examples"):
        if (base / name / "honesteval.yaml").is_file():
            return base / name
    raise HonestevalError(f"example {name!r} not found (run from a honesteval checkout)")


def demo_command(
    workdir: Annotated[
        Path, typer.Option("--dir", help="where the example is copied and kept")
    ] = Path("honesteval-demo"),
    trials: Annotated[int, typer.Option(help="trials per task")] = 3,
    as_json: JsonOpt = False,
) -> int:
    """Gate the two bundled circle-packing candidates: 'seed' becomes the baseline, then
    'restarts' is gated against it on the same seeds (one stage, to stay short)."""
    start_server_early()
    source = _example_dir("circle_packing")
    dest = workdir / "circle_packing"
    if not dest.exists():
        shutil.copytree(source, dest, ignore=shutil.ignore_patterns(".honesteval", "__pycache__"))
    from honesteval.project.loader import load_project

    proj = load_project(dest)
    names = proj.candidate_names()
    # The baseline first, then the challenger: the order a user would gate them in.
    names.sort(key=lambda n: (n != "seed", n))
    first, last = names[0], names[-1]
    n_tasks = len(proj.tasks("val"))
    stderr_line(
        f"demo: the circle-packing example, copied to {shell_path(dest)}. '{first}' is evaluated "
        f"on val ({n_tasks} tasks × {trials} trials, each an optimisation of about a second of "
        f"CPU, 4 at a time) and becomes the baseline; then '{last}' is evaluated on the same seeds "
        f"and gated against it in one stage (--no-confirm: a search should confirm a pass on "
        f"fresh seeds, see docs/gate.md). {DEMO_TIME}"
    )
    from honesteval import api
    from honesteval.orchestration.flow_runs import flow_runs

    with live_progress(), flow_runs(echo=stderr_line):  # one Prefect server for both gates
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
        print_json(json.dumps(payload, indent=2))
    else:
        from honesteval.store.reading import not_ok_trials

        for r in results:
            print_result(r, not_ok_trials(Store(proj.state_dir), r), verbose=False)
        rich_console().print("")
        print_decision(proj, decision, shell_path(dest))
        rich_console().print("\n" + "\n".join(next_lines(dest)), markup=False, highlight=False)
    if decision.indecisive:
        return EXIT_INDECISIVE
    return EXIT_OK


def shell_path(path: Path) -> str:
    """``path`` as this shell can type it: relative when under the current folder."""
    if path.is_absolute() and path.is_relative_to(Path.cwd()):
        path = path.relative_to(Path.cwd())
    return str(path)


def cli_invocation() -> str:
    """How this shell runs this very honesteval again: its name when PATH finds this install,
    else the script's path (``.venv/bin/honesteval`` after ``make demo``), else ``python -m``."""
    script = Path(sys.executable).parent / "honesteval"  # the venv's bin, symlinks kept
    found = shutil.which("honesteval")
    if found is not None and script.exists() and Path(found).samefile(script):
        return "honesteval"
    if script.exists():
        return shell_path(script)
    return f"{shell_path(Path(sys.executable))} -m honesteval.cli"


def next_lines(dest: Path) -> list[str]:
    """Where the demo's project is kept, and the two commands to look at it next."""
    cli, where = cli_invocation(), shell_path(dest)
    return [
        f"project: {where}",
        f"next: {cli} report --project {where} --open",
        f"      {cli} status --project {where}",
    ]


#: What the demo costs, measured (docs/performance.md): 5 min 18 s on 2 cores shared under a
#: load average of ~35, with a fresh PREFECT_HOME (its first server sets up a database).
DEMO_TIME = "Expect a few minutes (5 min 18 s measured on 2 heavily shared cores)."
