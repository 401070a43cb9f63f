"""A spend budget stops a run at the cap with nothing lost (a fake priced target, trials in
this process): the trials that fit ran and are stored, the rest never started and have no
record (missing data, never a zero), and a rerun with a larger budget runs only them."""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path

import pytest

import honesteval
from honesteval.errors import ConfigError
from honesteval.evaluation.budget import SpendGuard, budget_of
from honesteval.models import Budget, TrialRecord
from honesteval.project.loader import load_project
from honesteval.store.state_dir import Store
from tests.helpers import priced_project, stored_trials


@pytest.fixture
def priced(tmp_path: Path) -> Path:
    """Every trial costs $0.01 and 100 tokens; the answer is right at even seeds."""
    return priced_project(tmp_path)


def n_val(root: Path) -> int:
    return len(load_project(root).frozen_split()["val"])


@pytest.mark.parametrize("concurrency", [1, 4])
def test_the_budget_stops_the_run_at_the_cap_and_keeps_what_ran(
    priced: Path, concurrency: int
) -> None:
    planned = 3 * n_val(priced)
    # $0.055 at $0.01 a trial: 5 trials fit ($0.05), a 6th would pass it ($0.06)
    result = honesteval.evaluate(
        priced,
        "baseline",
        budget=Budget(usd=0.055),
        max_concurrency=concurrency,
        orchestration="local",
    )
    assert result.trials_ran == 5
    assert result.trials_planned == planned
    assert result.trials_not_started == planned - 5
    assert result.budget is not None and result.budget.budget.usd == 0.055
    assert result.budget.spent_usd == pytest.approx(0.05)
    # nothing lost, nothing invented: the 5 that ran are on disk, the rest have no record
    on_disk = stored_trials(priced, "val", "baseline")
    assert len(on_disk) == 5 and {r["status"] for r in on_disk} == {"ok"}
    # missing data, not zeros: the first 5 planned trials run (task by task, 3 a task): one
    # task whole and one with 2 trials are scored, the other tasks are missing whole
    assert result.n_scored == 2
    assert [len(t.statuses) for t in result.per_task[:3]] == [3, 2, 0]
    assert result.coverage == pytest.approx(result.n_scored / result.n_tasks)
    assert result.trials_ok == 5


def test_a_rerun_with_a_larger_budget_goes_on_paying_nothing_twice(priced: Path) -> None:
    planned = 3 * n_val(priced)
    honesteval.evaluate(priced, "baseline", budget=Budget(usd=0.055), orchestration="local")
    # $0.105 more: 10 more trials fit, the 5 stored are reused at no cost
    again = honesteval.evaluate(priced, "baseline", budget=Budget(usd=0.105), orchestration="local")
    assert (again.trials_reused, again.trials_ran) == (5, 10)
    assert again.trials_not_started == planned - 15
    assert again.budget is not None and again.budget.spent_usd == pytest.approx(0.10)
    done = honesteval.evaluate(priced, "baseline", orchestration="local")  # no cap
    assert (done.trials_reused, done.trials_ran, done.trials_not_started) == (15, planned - 15, 0)
    assert done.budget is None and done.coverage == 1.0
    assert len(stored_trials(priced, "val", "baseline")) == planned


def test_a_gate_the_budget_stops_is_indecisive_and_says_what_the_rest_costs(
    priced: Path,
) -> None:
    planned = 3 * n_val(priced)
    first = honesteval.gate(priced, "baseline", budget=Budget(usd=0.055), orchestration="local")
    assert (first.accept, first.indecisive, first.promoted) == (False, True, False)
    # 5 of the baseline's trials ran at $0.01; the other planned - 5 at the mean of those 5
    rest = planned - 5
    assert first.reason.startswith(
        "baseline is undecided: the budget was reached before its trials ran. "
        f"budget reached: 5 of {planned} trials (spent $0.05 of $0.055). The {rest} not "
        f"started would cost ~${0.01 * rest:,.2f}, ~{100 * rest:,} tokens"
    )
    assert first.budget is not None and first.budget.spent_usd == pytest.approx(0.05)
    assert Store(load_project(priced).state_dir).read_best() is None  # nothing promoted
    assert honesteval.gate(priced, "baseline", orchestration="local").accept  # the rest ran
    assert len(stored_trials(priced, "val", "baseline")) == planned
    # A challenger's staged screen, round 1 (one trial a task, both sides): the best's are
    # stored, 5 of the challenger's fit; no later round starts.
    (priced / "candidates" / "v2").mkdir()
    (priced / "candidates" / "v2" / "prompt.txt").write_text("Check your work.\n")
    screen = honesteval.gate(priced, "v2", budget=Budget(usd=0.055), orchestration="local")
    assert screen.indecisive and not screen.accept
    n = n_val(priced)
    assert f"budget reached: {n + 5} of {2 * n} trials (spent $0.05 of $0.055)" in screen.reason
    assert len(stored_trials(priced, "val", "v2")) == 5
    best = Store(load_project(priced).state_dir).read_best()
    assert best is not None and best.name == "baseline"


def test_a_token_budget_and_the_project_budget(priced: Path) -> None:
    config = priced / "honesteval.yaml"
    config.write_text(config.read_text() + "budget: {usd: 10.0, tokens: 250}\n")
    # 100 tokens a trial: 2 fit 250, a 3rd would take 300
    result = honesteval.evaluate(priced, "baseline", orchestration="local")
    assert (result.trials_ran, result.budget and result.budget.spent_tokens) == (2, 200)
    # the request's field replaces the project's: 450 tokens is 4 trials, 2 of them stored
    more = honesteval.evaluate(priced, "baseline", budget=Budget(tokens=450), orchestration="local")
    assert (more.trials_reused, more.trials_ran) == (2, 4)


def test_a_budget_is_merged_field_by_field_and_bad_values_are_refused(priced: Path) -> None:
    config = priced / "honesteval.yaml"
    config.write_text(config.read_text() + "budget: {usd: 2.0}\n")
    proj = load_project(priced)
    assert budget_of(proj, Budget(tokens=5)) == Budget(usd=2.0, tokens=5)
    assert budget_of(proj, None) == Budget(usd=2.0)
    for bad in ({"usd": -1.0}, {"usd": "abc"}, {"tokens": 0}):
        with pytest.raises(ConfigError, match=r"budget\.(usd|tokens)"):
            honesteval.evaluate(priced, "baseline", budget=bad, orchestration="local")  # type: ignore[arg-type]
    for bad_yaml in ("budget: {usd: -1}\n", "budget: {usd: abc}\n", "budget: {dollars: 1}\n"):
        config.write_text(re.sub(r"budget: .*\n", bad_yaml, config.read_text()))
        with pytest.raises(ConfigError, match="budget"):
            load_project(priced)


def test_the_ledger_keeps_a_search_spend_and_a_search_budget_counts_it(
    priced: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from honesteval.cli.main import main
    from honesteval.gating.spend import search_spent

    n = n_val(priced)
    first = honesteval.gate(priced, "baseline", orchestration="local")  # no cap: 3n trials
    assert first.spent_usd == pytest.approx(0.01 * 3 * n)
    assert first.spent_tokens == 100 * 3 * n
    ledger = (priced / ".honesteval" / "decisions.jsonl").read_text().splitlines()
    assert json.loads(ledger[-1])["spent_usd"] == pytest.approx(0.01 * 3 * n)  # in the line
    # The search may spend $0.05 + 3n·$0.01 in all: 5 trials are left for the next gate.
    config = priced / "honesteval.yaml"
    cap = 0.055 + 0.01 * 3 * n
    config.write_text(config.read_text() + f"search_budget: {{usd: {cap}}}\n")
    (priced / "candidates" / "v2").mkdir()
    (priced / "candidates" / "v2" / "prompt.txt").write_text("Check your work.\n")
    second = honesteval.gate(priced, "v2", orchestration="local")
    assert second.indecisive and second.spent_usd == pytest.approx(0.05)
    assert len(stored_trials(priced, "val", "v2")) == 5
    assert "the search's budget" in second.reason
    assert search_spent(load_project(priced)) == (
        pytest.approx(0.01 * 3 * n + 0.05),
        100 * (3 * n + 5),
    )
    # Less than a trial is left: no trial starts, nothing is spent, the chain stays intact.
    third = honesteval.gate(priced, "v2", orchestration="local")
    assert third.indecisive and third.spent_usd is None
    assert len(stored_trials(priced, "val", "v2")) == 5
    with pytest.raises(SystemExit) as exit_code:
        main(["ledger", "verify", "--project", str(priced)])
    assert (
        exit_code.value.code == 0 and "search ledger intact: 3 line(s)" in capsys.readouterr().out
    )


def test_trials_start_in_plan_order_whichever_thread_asks_first() -> None:
    # room for 2 trials at $0.01 each; the thread of the trial planned third asks first, as a
    # fast trial's thread does when it comes back for its next trial before earlier ones woke
    cost = TrialRecord(
        task_id="a",
        trial=0,
        seed=0,
        candidate="c",
        fingerprint="f",
        split="val",
        status="ok",
        reward=1.0,
        cost=0.01,
        started_at="",
    )
    guard = SpendGuard(Budget(usd=0.025), prior=[cost])
    with ThreadPoolExecutor(max_workers=1) as pool:
        third = pool.submit(guard.admit, 2)
        with pytest.raises(FutureTimeout):
            third.result(timeout=0.2)  # it waits for the two planned before it
        assert (guard.admit(0), guard.admit(1)) == (True, True)
        guard.settle([cost.model_copy(update={"seed": s}) for s in (1, 2)])
        assert third.result(timeout=10) is False  # $0.02 spent: a third would pass $0.025
    assert guard.reached and guard.spent_usd == pytest.approx(0.02)
