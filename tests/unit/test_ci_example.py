"""examples/ci: the GitHub Actions workflow gates with the CLI's markdown output, keeps the
gate's state between runs, comments on the pull request and fails the check by the
documented exit codes (1 rejected, 2 bad input, 4 internal error; 0 and 3 pass)."""

from __future__ import annotations

import shlex
from pathlib import Path

import yaml

WORKFLOW = Path(__file__).resolve().parents[2] / "examples" / "ci" / "honesteval-gate.yml"


def _steps() -> dict[str, dict]:
    flow = yaml.safe_load(WORKFLOW.read_text())
    [job] = flow["jobs"].values()
    return {step.get("name", step.get("uses", step.get("run", ""))): step for step in job["steps"]}


def test_the_gate_step_runs_the_cli_with_markdown_output() -> None:
    from typer.main import get_command

    from honesteval.cli import app

    run = _steps()["Gate the pull request's candidate"]["run"]
    [line] = [ln for ln in run.splitlines() if ln.strip().startswith("honesteval gate")]
    words = shlex.split(line.split(">")[0])
    gate = get_command(app).commands["gate"]  # type: ignore[attr-defined]
    context = gate.make_context("gate", words[2:])  # the CLI parses every option as written
    assert context.params["fmt"] == "markdown" and context.params["candidate"] == "pr"


def test_the_state_and_the_comment_survive_a_failed_gate() -> None:
    steps = _steps()
    restore, save = steps["Restore the gate's state"], steps["Save the gate's state"]
    assert restore["with"]["path"] == save["with"]["path"] == "evals/.honesteval"
    assert save["if"] == "always()"  # a rejection is recorded in the ledger: keep it
    assert "gh pr comment" in steps["Comment on the pull request"]["run"]
    assert steps["Comment on the pull request"]["if"].startswith("always()")


def test_the_check_fails_on_reject_and_errors_only() -> None:
    import subprocess

    script = _steps()["Fail on a rejection or an error (not on indecisive)"]["run"]
    for code, fails in ((0, False), (1, True), (2, True), (3, False), (4, True)):
        body = script.replace("${{ steps.gate.outputs.code }}", str(code))
        done = subprocess.run(["bash", "-c", body], capture_output=True)
        assert (done.returncode != 0) is fails, (code, done.returncode)
