"""examples/ci: the GitHub Actions workflow gates with the CLI's markdown output, keeps the
base branch's gate state (saved by pushes to main only), comments on the pull request and
fails the check by the exit codes its header documents (1 rejected, 2 bad input, 4
internal error; 0 and 3 pass). tests/e2e/test_ci_workflow.py runs its steps on two branches."""

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

    run = _steps()["Gate the candidate"]["run"].replace("\\\n", " ")
    [line] = [ln for ln in run.splitlines() if ln.strip().startswith("honesteval gate")]
    words = shlex.split(line.split(">")[0])
    gate = get_command(app).commands["gate"]  # type: ignore[attr-defined]
    context = gate.make_context("gate", words[2:])  # the CLI parses every option as written
    assert context.params["fmt"] == "markdown"
    assert context.params["candidate"] == "${{ steps.candidate.outputs.name }}"


def test_the_state_is_the_base_branchs_and_survives_a_failed_gate() -> None:
    steps = _steps()
    restore = steps["Restore the base branch's gate state"]
    save = steps["Save the gate's state (main only)"]
    state = "evals/.honesteval\nevals/candidates/pr-*\n"  # the best's folder with it
    assert restore["with"]["path"] == save["with"]["path"] == state
    # a rejection is recorded in main's ledger: kept; a pull request's runs are not saved
    assert save["if"] == "always() && github.event_name == 'push'"
    assert restore["with"]["restore-keys"] == "honesteval-state-main-"
    assert save["with"]["key"].startswith("honesteval-state-main-")
    assert "gh pr comment" in steps["Comment on the pull request"]["run"]
    assert steps["Comment on the pull request"]["if"].startswith("always()")


def test_it_runs_on_pushes_to_main_and_on_pull_requests() -> None:
    flow = yaml.safe_load(WORKFLOW.read_text())
    triggers = flow[True]  # YAML 1.1 reads the key `on` as True
    assert triggers["push"]["branches"] == ["main"] and "pull_request" in triggers
    install = _steps()["Install honesteval from this repository"]["run"]
    assert install == "pip install '.[inspect]'"  # the checkout, not a package index


def test_the_check_fails_on_reject_and_errors_only() -> None:
    import subprocess

    script = _steps()["Fail on a rejection or an error (not on indecisive)"]["run"]
    header = WORKFLOW.read_text().split("\nname:")[0]
    assert "the job fails on 1, 2 and 4" in header  # the header says what the code does
    for code, fails in ((0, False), (1, True), (2, True), (3, False), (4, True)):
        body = script.replace("${{ steps.gate.outputs.code }}", str(code))
        done = subprocess.run(["bash", "-c", body], capture_output=True)
        assert (done.returncode != 0) is fails, (code, done.returncode)
