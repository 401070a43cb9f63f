"""A spend budget stops a run at the cap with nothing lost (a fake priced target, trials in
this process): the trials that fit ran and are stored, the rest never started and have no
record (missing data, never a zero), and a rerun with a larger budget runs only them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import honesteval
from honesteval.errors import ConfigError
from honesteval.evaluation.budget import budget_of
from honesteval.models import Budget
from honesteval.project.loader import load_project
from honesteval.project.scaffold import scaffold_project
from tests.helpers import stored_trials

# Every trial costs $0.01 and 100 tokens; the answer is right at even seeds.
PRICED = """
from honesteval import Rollout, Score


class Priced:
    def __init__(self, **options):
        pass

    def run_target(self, task, candidate, *, seed):
        return Rollout(output=seed % 2 == 0, cost=0.01, tokens=100)

    def score(self, task, rollout):
        return Score(reward=1.0 if rollout.output else 0.0)
"""


@pytest.fixture
def priced(tmp_path: Path) -> Path:
    scaffold_project(tmp_path)
    (tmp_path / "priced.py").write_text(PRICED)
    config = tmp_path / "honesteval.yaml"
    text = re.sub(
        r"adapter:\n(  .*\n)+",
        "adapter: {kind: custom, target: 'priced:Priced'}\n",
        config.read_text(),
    )
    config.write_text(text)
    return tmp_path


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
