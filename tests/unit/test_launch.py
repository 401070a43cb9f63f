"""The ``honesteval`` script starts the reusable server before the command line's imports."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

#: A fresh interpreter runs the script's early start with the server's start recorded, not
#: made: what was imported, and Prefect's defaults, at the moment it would start.
PROBE = """
import json, os, sys
from honesteval.server import sitting
seen = []
def record():
    loaded = [m for m in ("typer", "honesteval.cli", "prefect", "pydantic") if m in sys.modules]
    seen.append({"loaded": loaded, "logging": os.environ.get("PREFECT_LOGGING_LEVEL")})
sitting.start_early = record
from honesteval import launch
launch.start_before_imports(json.loads(sys.argv[1]))
print(json.dumps(seen))
"""


def _early_starts(words: list[str]) -> list[dict[str, object]]:
    env = {"PATH": "/usr/bin:/bin", "DO_NOT_TRACK": "1"}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(words)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    return list(json.loads(out))


def test_a_flow_command_starts_the_server_before_typer_the_cli_or_prefect_load() -> None:
    assert _early_starts(["evaluate", "--project", "p"]) == [{"loaded": [], "logging": "WARNING"}]


@pytest.mark.parametrize(
    "words",
    [[], ["status"], ["evaluate", "--help"], ["gate", "-h"], ["--version"], ["report", "x"]],
)
def test_help_and_commands_that_run_no_flow_start_nothing(words: list[str]) -> None:
    assert _early_starts(words) == []


def test_every_command_that_starts_the_server_in_its_body_starts_it_early() -> None:
    """The early start covers exactly the commands whose body calls start_server_early."""
    import ast
    from pathlib import Path

    from honesteval import launch

    cli = Path(launch.__file__).parent / "cli"
    starting: set[str] = set()
    for module in cli.glob("*.py"):
        for fn in ast.walk(ast.parse(module.read_text())):
            if isinstance(fn, ast.FunctionDef) and any(
                isinstance(n, ast.Call) and getattr(n.func, "id", "") == "start_server_early"
                for n in ast.walk(fn)
            ):
                starting.add(fn.name)
    assert starting == {f"{c}_command" for c in launch.FLOW_COMMANDS}
