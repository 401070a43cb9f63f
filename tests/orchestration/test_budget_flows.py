"""A spend budget through Prefect: the evaluate flow submits only the trials that fit, the CLI
says "budget reached" and exits 3, a gate the budget stops is INDECISIVE (exit 3), and a
rerun with a larger budget goes on, nothing paid twice (a fake priced target, real flows)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from honesteval.models import Budget
from honesteval.orchestration.flows import evaluate, gate
from honesteval.project.loader import load_project
from honesteval.store.state_dir import Store
from tests.helpers import priced_project, run_cli, stored_trials

pytestmark = pytest.mark.usefixtures("prefect_backend")


def priced(tmp_path: Path) -> Path:
    """Every trial costs $0.01 and 100 tokens. A candidate whose prompt says "check" is always
    right; any other is right at even seeds."""
    return priced_project(tmp_path, right="careful or seed % 2 == 0")


def n_val(root: Path) -> int:
    return len(load_project(root).frozen_split()["val"])


def all_stored(root: Path) -> int:
    return len(stored_trials(root))


@pytest.mark.parametrize("batch_size", [None, 4], ids=["per-trial", "batched"])
def test_the_evaluate_flow_starts_no_trial_past_the_cap(tmp_path: Path, batch_size: int) -> None:
    root = priced(tmp_path)
    planned = 3 * n_val(root)
    # $0.055 at $0.01 a trial: 5 fit, a 6th would pass it; batches are cut to what fits
    state = evaluate(
        str(root), "baseline", budget=Budget(usd=0.055), batch_size=batch_size, return_state=True
    )
    assert state.name == "BudgetReached"
    assert "budget reached: 5 of" in (state.message or "")
    result = state.result(raise_on_failure=False)
    assert (result.trials_ran, result.trials_not_started) == (5, planned - 5)
    assert result.budget.spent_usd == pytest.approx(0.05)
    assert all_stored(root) == 5  # the 5 that ran, and no record for the rest


@pytest.mark.quick
def test_the_cli_stops_at_the_cap_and_a_rerun_goes_on(tmp_path: Path, cli_env) -> None:
    root = priced(tmp_path)
    project = ["--project", str(root)]
    planned = 3 * n_val(root)
    for bad in ("-1", "abc"):  # one line, exit 2, nothing runs
        done = run_cli(
            "evaluate", *project, "--candidate", "baseline", "--budget-usd", bad, env=cli_env
        )
        errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
        assert done.returncode == 2 and len(errors) == 1, done.stderr
        assert "budget" in errors[0] and "Traceback" not in done.stderr
    assert all_stored(root) == 0

    done = run_cli(
        "evaluate",
        *project,
        "--candidate",
        "baseline",
        "--budget-usd",
        "0.055",
        "--json",
        env=cli_env,
    )
    assert done.returncode == 3, done.stderr
    assert (
        f"budget reached: 5 of {planned} trials of baseline on val (spent $0.05 of $0.055)"
        in done.stderr
    )
    payload = json.loads(done.stdout)
    assert payload["trials_not_started"] == planned - 5
    assert payload["budget"]["budget"] == {"usd": 0.055, "tokens": None}

    # The gate's baseline with $0.105 more: the 5 stored are reused, 10 more run, INDECISIVE
    done = run_cli(
        "gate", *project, "--candidate", "baseline", "--budget-usd", "0.105", env=cli_env
    )
    assert done.returncode == 3, done.stderr
    assert "INDECISIVE" in done.stdout
    assert f"budget reached: 15 of {planned} trials" in " ".join(done.stdout.split())
    assert all_stored(root) == 15
    assert Store(load_project(root).state_dir).read_best() is None

    done = run_cli("gate", *project, "--candidate", "baseline", env=cli_env)  # no cap: the rest
    assert done.returncode == 0, done.stderr
    assert all_stored(root) == planned


def test_a_confirmation_the_budget_stops_stays_open_and_a_rerun_finishes_it(
    tmp_path: Path,
) -> None:
    root = priced(tmp_path)
    (root / "candidates" / "careful").mkdir()
    (root / "candidates" / "careful" / "prompt.txt").write_text("Think, check your work.\n")
    gate(str(root), "baseline", return_state=True)  # the baseline, no cap
    before = all_stored(root)
    n = n_val(root)
    # $0.655 at $0.01 a trial: 65 trials in all, the screen's (careful's 3 a task: the
    # baseline's are stored) and 5 of the confirmation's first round (both sides, 1 a task)
    state = gate(str(root), "careful", budget=Budget(usd=0.655), return_state=True)
    decision = state.result(raise_on_failure=False)
    assert state.name == "Indecisive" and decision.indecisive and decision.budget is not None
    assert f"budget reached: 5 of {2 * n} trials (spent $0.65 of $0.655)" in decision.reason
    assert all_stored(root) - before == 3 * n + 5 == 65
    store = Store(load_project(root).state_dir)
    assert store.read_best().name == "baseline"  # type: ignore[union-attr]
    kinds = [
        json.loads(line)["kind"]
        for line in (root / ".honesteval" / "decisions.jsonl").read_text().splitlines()
    ]
    assert kinds == ["decision", "reservation"]  # its level reserved, nothing decided
    # The reservation stays open: the rerun continues the same confirmation, pays nothing
    # twice, and decides it.
    state = gate(str(root), "careful", return_state=True)
    final = state.result(raise_on_failure=False)
    assert final.accept and final.stage == "confirm"
    assert store.read_best().name == "careful"  # type: ignore[union-attr]
