"""What a team sees in the Prefect UI every morning, read back from the API of a real server:
run names and tags, the Logs tab of a LowCoverage run, the gate-decision artifact, and a
state name that tells a rejected gate from an accepted one."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from prefect.client.orchestration import get_client

from honesteval.flows import evaluate, gate, reevaluate_best
from tests.e2e.test_secrets import flow_run_logs
from tests.orchestration.test_flow_gate import gate_project
from tests.prefect_reads import artifacts

pytestmark = pytest.mark.usefixtures("prefect_backend")


def read_run(state):
    with get_client(sync_client=True) as client:
        return client.read_flow_run(state.state_details.flow_run_id)


@pytest.mark.quick
def test_a_rejected_gate_ends_completed_named_rejected_with_its_verdict_in_tags(make_project):
    root = gate_project(make_project)
    gate(str(root), "base")
    rejected = gate(str(root), "worse", return_state=True)
    assert rejected.type.value == "COMPLETED" and rejected.name == "Rejected"
    run = read_run(rejected)
    assert run.state.name == "Rejected" and run.state.type.value == "COMPLETED"
    assert {"honesteval", "candidate:worse", "split:val", "verdict:reject"} <= set(run.tags)

    # single stage: 8 val tasks are too few for the confirmation's e-value at alpha_1
    accepted = gate(str(root), "better", confirm=False, return_state=True)
    assert accepted.name == "Completed" and "verdict:accept" in read_run(accepted).tags


def test_gate_decision_artifact_leads_with_the_reason_and_a_small_table(make_project):
    root = gate_project(make_project, candidates={"base": 1.0, "worse": 0.5})
    gate(str(root), "base")
    state = gate(str(root), "worse", return_state=True)
    d = state.result()
    md = artifacts(state.state_details.flow_run_id)[f"gate-decision-{root.name}"]["data"]
    lines = md.splitlines()
    assert lines[0] == "# Gate: REJECT: worse vs current best base"
    # the reason's first sentence, in bold: who lost to whom by how much, in one line
    assert lines[2] == f"**worse does not beat base: Δ {d.delta:+.2f} ± {d.se:.2f} on 8 tasks**"
    # the small table: Δ, SE, bar, paired tasks (8 val tasks), the regressions by name
    assert lines[4] == "| Δ | SE | bar (Δ) | paired tasks | regressions |"
    # 'base' passes every trial, 'worse' half of them: the tasks it failed are regressions,
    # named in the artifact as the CLI names them
    assert d.regressions and d.se > 0
    assert lines[6] == (
        f"| {d.delta:+.4f} | {d.se:.4f} | {d.bar:.4f} ({d.bar_multiplier:.3g}×SE) | 8 | "
        f"{', '.join(d.regressions)} |"
    )
    # the default staged screen stopped after round 1 of 4: Δ < 0 is below round 1's futility
    # boundary √(1/4)·(1 − z_0.5·√(3/4)) = 0.5 (in z), so it ran one trial a task
    assert d.delta < 0 and (d.screen_stop, d.screen_round, d.screen_rounds) == ("futility", 1, 4)
    # both sides: coverage and trials by status (the round's 8 tasks × 1 trial, none missing)
    assert "| | current best `base` | candidate `worse` |" in md
    assert "| coverage | 1.00 (8/8 tasks) | 1.00 (8/8 tasks) |" in md
    every = "8 ok, 0 failed, 0 missing (0 infra_error, 0 scorer_error) of 8"  # wrong: 'ok', 0
    assert f"| trials | {every} | {every} |" in md
    # the raw record, folded below the summary
    details = md.index("<details>")
    assert details > md.index("| trials |") and "| mode | paired |" in md[details:]
    assert "| mode |" not in md[:details]


def test_low_coverage_logs_one_short_line_per_missing_trial_and_a_summary(make_project):
    root = gate_project(make_project, config={"retries": 1})
    down = ["g00", "g01", "g02", "g03", "g04", "g05"]
    (root / "candidates" / "base" / "outage.txt").write_text(" ".join(down))
    state = evaluate(str(root), "base", "val", n_trials=2, return_state=True)
    assert state.name == "LowCoverage"
    logs = flow_run_logs(state.state_details.flow_run_id, until="trials are missing data")
    # 6 tasks down × seeds 0, 1, each tried twice (1 retry)
    expected = {
        f"{task} seed {seed}: infra_error after 2 attempts: InfraError: outage"
        for task in down
        for seed in (0, 1)
    }
    per_trial = [line for line in logs if re.match(r"g\d\d seed \d", line)]
    assert sorted(per_trial) == sorted(expected)
    summary = [line for line in logs if "trials are missing data" in line]
    assert summary == [
        "base on val: 12 of 16 trials are missing data (12 infra_error, 0 scorer_error); "
        "coverage 2/8 = 0.25, below min_coverage 0.60"
    ]
    text = "\n".join(logs)
    assert "TrialRecord(" not in text and "NoneType: None" not in text
    assert re.search(r"[0-9a-f]{64}", text) is None  # no fingerprints
    assert "Finished in state InfraError" not in text


def test_nightly_reevaluation_is_named_and_tagged_for_its_best(make_project):
    root = gate_project(make_project, candidates={"base": 1.0})
    gate(str(root), "base")
    state = reevaluate_best(str(root), return_state=True)
    run = read_run(state)
    assert run.name == f"reevaluate-base-{datetime.now(UTC):%Y-%m-%d}"
    assert {"honesteval", "candidate:base"} <= set(run.tags)


def test_a_confirmed_decision_shows_its_e_value_against_its_bar():
    """A confirmation is decided by its betting e-value against 1/alpha_j, not by Δ against a
    bar in SEs: the small table says so (one decision as the ledger records it)."""
    from honesteval.models import GateDecision
    from honesteval.views.text import decision_markdown

    d = GateDecision(
        accept=True,
        reason="careful beats baseline by +0.38 ± 0.03 on 20 tasks, confirmed on fresh seeds. "
        "CONFIRMED on fresh seeds at alpha_1 = 0.0109 (lord++): ACCEPT | screen: ACCEPT",
        mode="paired",
        delta=0.3778,
        se=0.0346,
        e_value_bar=91.43,
        n_paired=20,
        candidate="careful",
        candidate_fingerprint="f" * 64,
        current="baseline",
        stage="confirm",
        level=0.010937,
        e_value=533.5,
        promoted=True,
    )
    lines = decision_markdown(d).splitlines()
    assert (
        lines[2]
        == "**careful beats baseline by +0.38 ± 0.03 on 20 tasks, confirmed on fresh seeds**"
    )
    # a confirmation has no bar in Δ: its e-value and threshold take the column
    assert lines[4] == "| Δ | SE | e-value | paired tasks | regressions |"
    assert lines[6] == "| +0.3778 | 0.0346 | 533.5, threshold 1/alpha_j = 91.43 | 20 | none |"
    # a decision recorded before the threshold had its own field: 1 / 0.010937 = 91.43 (by hand)
    old = d.model_copy(update={"e_value_bar": None, "bar": 12.0})
    assert "533.5, threshold 1/alpha_j = 91.43 |" in decision_markdown(old)
    assert decision_markdown(d).count("| verdict |") == 1  # once, in the folded record
