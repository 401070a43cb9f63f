"""``plan`` and the gate's notice say what a screen and a confirmation are expected to cost,
from the cost and tokens the stored trials reported (a fake priced target)."""

from __future__ import annotations

from pathlib import Path

import pytest

import honesteval
from honesteval.gating.power import plan_lines, plan_sample_size
from honesteval.gating.spend import measured_trial_cost
from honesteval.project.loader import load_project
from tests.helpers import priced_project

# Every trial costs 0.01 + 0.001 x (seed % 3) dollars and 100 tokens x (seed + 1); the
# answer is right at even seeds.


@pytest.fixture
def priced(tmp_path: Path) -> Path:
    return priced_project(tmp_path, cost="0.01 + 0.001 * (seed % 3)", tokens="100 * (seed + 1)")


def test_the_mean_measured_trial_prices_a_screen_and_a_confirmation(priced: Path) -> None:
    proj = load_project(priced)
    assert measured_trial_cost(proj).n_measured == 0
    honesteval.evaluate(priced, "baseline", split="val", orchestration="local")
    n_val = len(proj.frozen_split()["val"])
    # 3 trials a task at seeds 0, 1, 2 (the scaffold's): the mean over trials by hand
    usd = (0.010 + 0.011 + 0.012) / 3
    tokens = (100 + 200 + 300) / 3
    cost = measured_trial_cost(proj)
    assert cost.n_measured == 3 * n_val
    assert cost.usd == pytest.approx(usd) and cost.tokens == pytest.approx(tokens)
    report = plan_sample_size(priced, 0.1)
    spend = report["expected_cost"]
    confirm = report["confirm_trials"]
    assert spend["screen_trials"] == n_val * 3
    assert spend["screen_usd"] == pytest.approx(usd * n_val * 3)
    assert spend["confirmation_trials"] == 2 * n_val * confirm
    assert spend["confirmation_usd"] == pytest.approx(usd * 2 * n_val * confirm)
    line = next(x for x in plan_lines(report) if x.startswith("expected cost"))
    assert f"~${usd * n_val * 3:,.2f}, ~{tokens * n_val * 3:,.0f} tokens" in line
    assert f"~${usd * 2 * n_val * confirm:,.2f}" in line


def test_the_gate_notice_prices_the_screen_and_its_confirmation(
    priced: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from honesteval.cli.gate import _gate_notice
    from honesteval.gating.config import confirm_trials
    from honesteval.models import GateRequest

    honesteval.gate(priced, "baseline", orchestration="local")  # the baseline: 3 trials a task
    (priced / "candidates" / "next").mkdir()
    (priced / "candidates" / "next" / "prompt.txt").write_text("Another prompt.\n")
    proj = load_project(priced)
    n_val = len(proj.frozen_split()["val"])
    capsys.readouterr()
    _gate_notice(honesteval.prepare_gate(proj, GateRequest(candidate="next")))
    notice = capsys.readouterr().err
    usd = (0.010 + 0.011 + 0.012) / 3
    confirmation = 2 * n_val * confirm_trials(proj.gate_config, 3)
    # the screen runs only the candidate's trials: the best's are stored
    assert f"expected cost of the screen: ~${usd * n_val * 3:,.2f}" in notice
    assert f"({n_val * 3} trials at the mean of {3 * n_val} measured)" in notice
    assert f"of its confirmation, at most: ~${usd * confirmation:,.2f}" in notice
