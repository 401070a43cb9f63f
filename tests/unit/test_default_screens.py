"""The default screens (issue 50): the verdict first, then its evidence, coverage with the
failed and missing trials named, and what changed or the command that settles it; gate in at
most 6 lines, evaluate in at most 8, the rest under --verbose."""

from __future__ import annotations

from honesteval.models import GateDecision, OnlineState, TaskTrials
from honesteval.stats import aggregate
from honesteval.views.summary import (
    EVALUATE_LINES,
    GATE_LINES,
    evaluation_lines,
    fitted,
    gate_lines,
    number,
)
from tests.helpers import screen_trial

AGAIN = "honesteval gate --project myproj --candidate careful"


def result(name: str, statuses: list[list[str]], rewards: list[list[float | None]]):
    tasks = [
        TaskTrials(id=f"q{i:02d}", statuses=s, rewards=r)
        for i, (s, r) in enumerate(zip(statuses, rewards, strict=True))
    ]
    return aggregate(tasks).model_copy(update={"candidate": name})


def decision(**update) -> GateDecision:
    fields = {
        "accept": True,
        "reason": "careful beats baseline by +0.40 ± 0.07 on 20 tasks, confirmed on fresh "
        "seeds. CONFIRMED on fresh seeds at alpha_1 = 0.0109 (lord++): ACCEPT",
        "mode": "paired",
        "delta": 0.4,
        "se": 0.0688,
        "n_paired": 20,
        "current": "baseline",
        "candidate": "careful",
        "candidate_fingerprint": "f" * 64,
        "current_coverage": 1.0,
        "candidate_coverage": 1.0,
        "promoted": True,
        "stage": "confirm",
        "level": 0.010937,
        "online": OnlineState(tests=1, rule="lord++", alpha=0.05),
        "screen_delta": 0.4,
        "e_value": 473.8,
        "e_value_bar": 1 / 0.010937,
        "confirm_rounds": 2,
        "confirm_budget": 9,
    }
    return GateDecision(**{**fields, **update})


def test_numbers_are_read_as_a_person_reads_them():
    assert [number(x) for x in (473.8, 91.43, 4.3, 0.6234)] == ["474", "91", "4.3", "0.62"]


def test_an_accepted_confirmation_says_its_evidence_and_the_new_best():
    both = [result(n, [["ok"]] * 20, [[1.0]] * 20) for n in ("baseline", "careful")]
    lines = gate_lines(decision(), both, {}, AGAIN)
    assert lines == [
        "ACCEPT: careful beats baseline by +0.40 ± 0.07 on 20 tasks, confirmed on fresh seeds",
        "  evidence  screen passed; confirmed on fresh seeds in 2 of at most 9 rounds: evidence "
        "474 of the 91 needed",
        "  coverage  baseline 20/20 tasks, careful 20/20 tasks; every trial ok",
        "  best      careful is now the best (was baseline)",
    ]


def test_a_rejected_screen_names_the_failed_and_the_missing_trials_of_each_side():
    d = decision(
        accept=False,
        promoted=False,
        reason="careful does not beat baseline: Δ -0.40 ± 0.11 on 6 tasks. REJECT: ...",
        delta=-0.4,
        bar=0.1124,
        stage="screen",
        screen_round=1,
        screen_rounds=3,
        screen_stop="futility",
        e_value=None,
        e_value_bar=None,
        confirm_rounds=None,
    )
    current = result("baseline", [["ok"], ["ok"], ["infra_error"]], [[1.0], [1.0], [None]])
    candidate = result("careful", [["failed"], ["ok"], ["ok"]], [[0.0], [1.0], [1.0]])
    failed = [
        screen_trial(f"q{i:02d}", 0, "failed", "RuntimeError: no room\nTraceback") for i in (9, 3)
    ]
    missing = [screen_trial("q02", 0, "infra_error", "InfraError: down")]
    lines = gate_lines(d, [current, candidate], {"careful": failed, "baseline": missing}, AGAIN)
    assert len(lines) <= GATE_LINES
    assert lines[0].startswith("REJECT: careful does not beat baseline: Δ -0.40 ± 0.11")
    assert lines[1] == (
        "  evidence  screen not passed: Δ -0.40 is not over the bar +0.11; ran 1 of 3 rounds: "
        "it could no longer pass"
    )
    # coverage 2/3 for the side that lacks q02 whole; both sides' trials not ok, by kind
    assert lines[2] == "  coverage  baseline 2/3 tasks, careful 3/3 tasks"
    assert lines[3] == (
        "  failed    careful 2 trials on 2 tasks (q03, q09), e.g. q09 seed 0: RuntimeError: no room"
    )
    assert lines[4] == (
        "  missing   baseline 1 trial (infra_error) on 1 task (q02), e.g. q02 seed 0: "
        "InfraError: down"
    )
    assert lines[5] == "  best      baseline stays the best"


def test_an_indecisive_confirmation_gives_the_command_that_settles_it():
    d = decision(
        accept=False,
        promoted=False,
        indecisive=True,
        reason="careful vs baseline is undecided at Δ +0.20 ± 0.05 on 20 tasks. INDECISIVE: "
        "not confirmed: ...; about 7 more round(s) would likely settle it: gate again with "
        "confirm_trials >= 9 (the same confirmation continues, at the same alpha_j)",
        e_value=12.0,
        confirm_rounds=2,
        confirm_budget=2,
    )
    lines = gate_lines(d, [], {}, AGAIN)
    assert lines[1].endswith(
        "not confirmed on fresh seeds in 2 of at most 2 rounds: evidence 12 of the 91 needed"
    )
    assert lines[-1] == (
        f"  next      baseline stays the best; to settle it: {AGAIN} --confirm-trials 9 (the "
        "same confirmation continues)"
    )


def test_a_short_confirmation_names_what_stands_in_the_way_and_its_settling_budget():
    d = decision(
        accept=False,
        promoted=False,
        indecisive=True,
        reason="INDECISIVE: not confirmed: at the gain seen about 16 round(s) in all would "
        "likely settle it: gate again with --confirm-trials 16",
        e_value=1.6,
        confirm_rounds=2,
        confirm_budget=6,
        confirm_stop="short",
        confirm_short="missing",
        confirm_settle=16,
        confirm_missing=["t03", "t07"],
    )
    assert gate_lines(d, [], {}, AGAIN)[-1] == (
        f"  next      baseline stays the best; to settle it: {AGAIN} --confirm-trials 16 (the "
        "same confirmation continues; in the way: missing trials on t03, t07)"
    )
    budget = d.model_copy(update={"confirm_short": "budget", "confirm_missing": []})
    assert gate_lines(budget, [], {}, AGAIN)[-1].endswith("in the way: the budget of 6 rounds)")


def test_a_budget_stop_says_what_ran_and_how_to_go_on():
    d = decision(
        accept=False,
        promoted=False,
        indecisive=True,
        baseline=True,
        current=None,
        reason="careful is undecided: the budget was reached before its trials ran. budget "
        "reached: 15 of 30 trials (spent $0.10 of $0.10). The 15 not started would cost $0.10",
        budget={"budget": {"usd": 0.1}, "spent_usd": 0.1},
    )
    lines = gate_lines(d, [], {}, AGAIN)
    assert lines[1] == "  evidence  budget reached: 15 of 30 trials (spent $0.10 of $0.10)"
    assert lines[-1] == (
        f"  next      no best yet; to settle it: {AGAIN} with a larger --budget-usd or "
        "--budget-tokens (stored trials are reused)"
    )


def test_evaluate_says_reward_interval_coverage_and_each_status_in_a_line():
    r = result(
        "careful",
        [["ok", "failed"], ["ok", "ok"], ["infra_error", "infra_error"]],
        [[1.0, 0.0], [1.0, 0.0], [None, None]],
    )
    records = [
        screen_trial("q00", 1, "failed", "RuntimeError: x"),
        screen_trial("q02", 0, "infra_error"),
    ]
    lines = evaluation_lines(r, records)
    # task means 0.5 and 0.5: reward 0.50, SE 0 (two equal means)
    assert lines[0] == "careful on val: reward 0.50 ± 0.00 on 3 tasks × 2 trials"
    assert lines[2] == "  coverage  2/3 tasks scored; 6 trials: 3 ok, 1 failed, 2 missing"
    assert "  failed: 1 trial on 1 task, e.g. q00 (seed 1): RuntimeError: x" in lines
    assert "  infra_error: 1 trial on 1 task, e.g. q02 (seed 0): no error text" in lines
    assert any(line.startswith("  missing   1 of 3 tasks missing whole") for line in lines)
    assert len(lines) <= EVALUATE_LINES


def test_a_long_screen_is_cut_with_a_line_saying_how_much_more_verbose_shows():
    lines = [f"line {i}" for i in range(11)]
    assert fitted(lines, 8) == [*lines[:7], "  ... 4 more lines: --verbose"]
    assert fitted(lines[:8], 8) == lines[:8]
