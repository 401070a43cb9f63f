"""The confirmation's futility: REJECT only when the trials both sides ran say the candidate
is not better; INDECISIVE, with the ``--confirm-trials`` that would settle it, when only the
budget or the missing trials stand between a shown gain and the bar.

Expected rounds come from the e-process's rule by hand: the capital is the equally weighted
mean of four gamblers' constant bets λ ∈ {0.1, 0.2, 0.4, 0.8}, so a constant delta g on n
tasks has E_R = mean_λ (1 + λg)^(nR).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import honesteval
from honesteval.gating.power import plan_lines, plan_sample_size
from honesteval.models import MAX_TRIALS, GateConfig
from honesteval.stats import new_online_state, rounds_decide
from honesteval.views.text import decision_lines, gain_sequence_interval
from tests.gate_helpers import rounds_result
from tests.helpers import priced_project

ALPHA_1 = 1 / 91.43


BETS = (0.1, 0.2, 0.4, 0.8)


def hand_rounds(n_tasks: int, gain: float, alpha: float = ALPHA_1) -> int:
    """The first R with mean_λ (1 + λ·gain)^(n·R) ≥ 1/alpha (beyond MAX_TRIALS: MAX_TRIALS + 1)."""
    for rounds in range(1, MAX_TRIALS + 2):
        log_terms = [n_tasks * rounds * math.log1p(lam * gain) for lam in BETS]
        top = max(log_terms)
        log_e = top + math.log(sum(math.exp(t - top) for t in log_terms) / len(BETS))
        if log_e >= math.log(1 / alpha):
            return rounds
    return MAX_TRIALS + 1


def shown(d) -> str:
    """The default screen's lines of ``d`` as a confirmation's decision."""
    return "\n".join(
        decision_lines(d.model_copy(update={"stage": "confirm", "online": new_online_state()}))
    )


def run_rounds(cur: np.ndarray, cand: np.ndarray, budget: int):
    """The confirmation's loop: one more round until the decision says it stopped."""
    for k in range(1, cur.shape[0] + 1):
        d = rounds_decide(
            rounds_result(cur[:k], "best"), rounds_result(cand[:k], "new"), GateConfig(),
            ALPHA_1, budget,
        )  # fmt: skip
        if d.confirm_stop is not None:
            return d
    return d


def test_a_consistent_gain_the_budget_cannot_confirm_is_indecisive_and_names_the_rounds():
    cur = np.full((16, 5), 0.5)
    cand = cur + 0.1
    d = run_rounds(cur, cand, budget=6)
    assert d.indecisive and not d.accept and d.confirm_rounds == 2
    assert (d.confirm_stop, d.confirm_short) == ("short", "budget")
    needed = hand_rounds(5, 0.1)
    assert d.confirm_settle == needed == 16
    assert f"--confirm-trials {needed}" in d.reason and "REJECT" not in d.reason
    # two rounds of ten trials: the interval is the whole range, and is said as that
    assert gain_sequence_interval(d.gain_cs95) == "too few trials for an interval on the gain"
    text = shown(d)
    assert f"--confirm-trials {needed} would likely settle it" in text and "[-1.0000" not in text
    assert "on these val tasks (biased upwards by the stop); too few trials for an" in text
    # that budget settles it: the same e-process crosses in that round, not before
    d = run_rounds(cur, cand, budget=needed)
    assert d.accept and d.confirm_stop == "promote" and d.confirm_rounds == needed


def test_a_gain_no_allowed_budget_confirms_is_rejected_and_one_a_budget_does_is_not():
    cur = np.full((2, 5), 0.5)
    assert hand_rounds(5, 0.0001) > MAX_TRIALS
    d = run_rounds(cur, cur + 0.0001, budget=6)
    assert not d.accept and not d.indecisive and d.confirm_stop == "futile"
    assert f"within {MAX_TRIALS} rounds" in d.reason
    d = run_rounds(cur, cur + 0.001, budget=6)
    assert d.indecisive and d.confirm_settle == hand_rounds(5, 0.001) <= MAX_TRIALS


def test_a_gain_the_trials_do_not_show_is_rejected_for_futility():
    # 12 tasks, budget 3: of 24 paired trials, two gain 1, one loses 1, the rest tie. Mean
    # +1/24, SE sqrt((3 − 1/24) / 23 / 24) = 0.073: not shown above 0, and even mean + 2 SE
    # cannot reach 1/alpha in the one round left
    cur = np.full((2, 12), 0.5)
    cand = cur.copy()
    cand[0, 0] = cand[1, 1] = 1.0
    cand[0, 2] = 0.0
    d = run_rounds(cur, cand, budget=3)
    assert not d.accept and not d.indecisive and d.confirm_stop == "futile"
    assert d.reason.startswith("REJECT (futility)") and "not shown better" in d.reason


def test_missing_trials_that_keep_a_shown_gain_from_the_bar_are_indecisive_and_named():
    cur = np.full((6, 6), 0.5)
    cand = np.full((6, 6), 0.8)
    # the same rounds with every trial scored promote: the gain is there
    assert run_rounds(cur, cand, budget=6).accept
    cand[:, 4:] = np.nan  # the candidate's trials on t04 and t05 are refused in every round
    d = run_rounds(cur, cand, budget=6)
    assert d.indecisive and not d.accept
    assert (d.confirm_stop, d.confirm_short) == ("short", "missing")
    assert d.confirm_missing == ["t04", "t05"]
    assert "keep it from the bar" in d.reason and d.confirm_settle is not None
    assert "missing trials on t04, t05" in shown(d)


def test_a_candidate_no_better_is_rejected_whatever_trials_it_lacks():
    cur = np.full((2, 8), 0.6)
    cand = np.full((2, 8), 0.5)
    cand[:, 0] = np.nan  # an outage on one task does not turn "worse" into INDECISIVE
    d = run_rounds(cur, cand, budget=9)
    assert not d.accept and not d.indecisive and d.confirm_stop == "futile"
    assert "not better" in d.reason


@pytest.mark.parametrize(
    ("cs", "text"),
    [((-0.9999999981, 0.9999999981), "too few trials for an interval on the gain"),
     ((-0.25, 0.5), "[-0.2500, +0.5000]")],
)  # fmt: skip
def test_only_an_interval_narrower_than_the_range_is_printed_as_one(cs, text):
    assert gain_sequence_interval(cs) == text


def test_plan_says_how_many_confirmation_rounds_an_effect_needs(tmp_path):
    root = priced_project(tmp_path, cost="0.01", tokens="100")
    honesteval.evaluate(root, "baseline", split="val", orchestration="local")
    small, large = plan_sample_size(root, 0.01), plan_sample_size(root, 0.9)
    budget = small["confirm_trials"]
    # a small gain needs more rounds than the budget, a large one fewer (the rounds needed
    # fall as the gain grows), and the line says which
    assert small["confirm_rounds_needed"] is None or small["confirm_rounds_needed"] > budget
    assert large["confirm_rounds_needed"] is not None and large["confirm_rounds_needed"] <= budget
    small_line = next(x for x in plan_lines(small) if "confirmation rounds" in x)
    large_line = next(x for x in plan_lines(large) if "confirmation rounds" in x)
    assert "no budget confirms it" in small_line or (
        f"set gate.confirm_trials: {small['confirm_rounds_needed']}" in small_line
    )
    assert f"about {large['confirm_rounds_needed']} confirmation rounds" in large_line
    assert f"(budget {budget})" in large_line
