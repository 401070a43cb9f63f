"""The default confirmation's trial-level e-process: the bets, its exact level, its verdicts.

Expected values come from a direct loop over the rule's formulas, exact enumeration of every
outcome of small Bernoulli worlds, and seeded Monte Carlo with its binomial standard error;
never from the code's own output.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from honesteval.models import GateConfig
from honesteval.stats import (
    evidence_ceiling,
    round_rewards,
    rounds_decide,
    trial_evidence,
    trial_log_e,
    unreachable,
)
from honesteval.stats._eprocess import MAX_BET, log_capital, round_weights
from tests.gate_helpers import rounds_result

#: The gamblers' bets by hand: 0.8 halved three times, equally weighted.
GRID = [0.1, 0.2, 0.4, 0.8]


def reference_log_e(cand: np.ndarray, cur: np.ndarray) -> list[float]:
    """log E after each round by hand: the mean over GRID of Π (1 + λ·d) over every trial so
    far, each gambler betting its λ on every trial; a missing reward at the worst case for the
    candidate."""
    capitals, path = [1.0] * len(GRID), []
    for r in range(cand.shape[0]):
        d = [
            (0.0 if math.isnan(a) else a) - (1.0 if math.isnan(b) else b)
            for a, b in zip(cand[r], cur[r], strict=True)
        ]
        capitals = [
            c * math.prod(1 + lam * x for x in d) for c, lam in zip(capitals, GRID, strict=True)
        ]
        path.append(math.log(sum(capitals) / len(GRID)))
    return path


def test_the_capital_is_the_mean_of_the_gamblers_products():
    rng = np.random.default_rng(7)
    cand = (rng.random((9, 7)) < 0.6).astype(float)
    cur = (rng.random((9, 7)) < 0.4).astype(float)
    cand[3, 2] = np.nan  # an infra error: counted at the worst case
    assert trial_log_e(cand, cur) == pytest.approx(reference_log_e(cand, cur), rel=1e-12)
    # one bet per round: the order of the tasks cannot move it
    perm = rng.permutation(7)
    assert trial_log_e(cand[:, perm], cur[:, perm]) == pytest.approx(trial_log_e(cand, cur))


def test_deltas_all_equal_grow_by_the_hand_formula():
    cand, cur = np.full((4, 3), 0.75), np.full((4, 3), 0.25)  # every delta 0.5, 12 trials
    expected = math.log(sum((1 + 0.5 * lam) ** 12 for lam in GRID) / 4)
    assert trial_log_e(cand, cur)[-1] == pytest.approx(expected, rel=1e-12)
    ceiling = math.log(sum((1 + lam) ** 12 for lam in GRID) / 4)
    assert evidence_ceiling(3, 4) == pytest.approx(ceiling, rel=1e-12)


def test_each_rounds_bets_are_fixed_by_the_earlier_rounds_only():
    """Predictable: changing round r and later moves neither the capital before r nor the
    weights of round r; the round's factor is the weights' average of one-bet-a-round
    factors, each bet within [0.1, MAX_BET] (every factor ≥ 1 − 0.8 > 0)."""
    rng = np.random.default_rng(21)
    d = rng.choice([-1.0, 0.0, 1.0], size=(8, 5))
    log_e, weights = log_capital(d), round_weights(d)
    for r in range(1, 8):
        changed = d.copy()
        changed[r:] = rng.choice([-1.0, 0.0, 1.0], size=(8 - r, 5))
        assert log_capital(changed)[:r] == pytest.approx(log_e[:r], rel=1e-12)
        np.testing.assert_allclose(round_weights(changed)[: r + 1], weights[: r + 1], rtol=1e-12)
    assert weights.sum(axis=-1) == pytest.approx(np.ones(8))
    assert weights[0] == pytest.approx(np.full(4, 1 / 4))
    for r in range(1, 8):
        factor = sum(
            w * math.prod(1 + lam * x for x in d[r])
            for w, lam in zip(weights[r], GRID, strict=True)
        )
        assert log_e[r] - log_e[r - 1] == pytest.approx(math.log(factor), rel=1e-10)
    assert MAX_BET == GRID[-1] < 1


def _bernoulli_deltas(p_cand: float, p_cur: float) -> list[tuple[float, float]]:
    """(delta, probability) of one paired trial with independent Bernoulli sides."""
    return [
        (1.0, p_cand * (1 - p_cur)),
        (-1.0, (1 - p_cand) * p_cur),
        (0.0, p_cand * p_cur + (1 - p_cand) * (1 - p_cur)),
    ]


def test_the_level_holds_exactly_when_one_task_gains_what_another_loses():
    """Every outcome of 3 rounds on 2 tasks, task 1 gaining 0.6 and task 2 losing 0.6 (the sum
    is 0, the null's edge): E[E_3] ≤ 1, and P(sup_r E_r ≥ 1/α) ≤ α (Ville)."""
    tasks = [_bernoulli_deltas(0.9, 0.3), _bernoulli_deltas(0.2, 0.8)]
    per_round = [((a, b), pa * pb) for (a, pa), (b, pb) in itertools.product(tasks[0], tasks[1])]
    paths = list(itertools.product(per_round, repeat=3))
    d = np.array([[pair for pair, _ in path] for path in paths])  # (paths, rounds, tasks)
    prob = np.array([math.prod(p for _, p in path) for path in paths])
    log_e = trial_log_e(np.clip(d, 0, 1), np.clip(-d, 0, 1))  # d = cand − cur
    assert prob.sum() == pytest.approx(1.0)
    # each gambler: E[Π_t (1 + λ d_t)] = ((1 + 0.6λ)(1 − 0.6λ))^rounds, the tasks and rounds
    # independent; the capital's mean is the gamblers' mean, below 1
    for r in range(3):
        exact = sum((1 - 0.36 * lam * lam) ** (r + 1) for lam in GRID) / 4
        assert float(prob @ np.exp(log_e[:, r])) == pytest.approx(exact, rel=1e-12)
        assert exact < 1
    for alpha in (0.1, 0.25, 0.5):
        rejected = float(prob @ (log_e.max(axis=-1) >= math.log(1 / alpha)))
        assert 0 < rejected <= alpha  # reachable (not vacuous), and at most alpha


def _null_world(effects: np.ndarray, reps: int, rounds: int, seed: int) -> np.ndarray:
    """Binary rewards: each task's rate drawn in [0.35, 0.65], the candidate's shifted by
    ``effects`` (their sum is 0); returns sup_r log E per repetition."""
    rng = np.random.default_rng(seed)
    n = effects.size
    p = rng.uniform(0.35, 0.65, (reps, 1, n))
    cur = (rng.random((reps, rounds, n)) < p).astype(float)
    cand = (rng.random((reps, rounds, n)) < np.clip(p + effects, 0, 1)).astype(float)
    result: np.ndarray = trial_log_e(cand, cur).max(axis=-1)
    return result


@pytest.mark.parametrize(
    "effects",
    [
        np.array([0.3, -0.3] * 6),  # half the tasks helped, half hurt
        np.array([0.33] + [-0.03] * 11),  # the whole gain on one task
    ],
    ids=["half-and-half", "one-task"],
)
def test_the_level_holds_in_seeded_monte_carlo(effects):
    alpha, reps = 0.05, 2000
    rate = float(np.mean(_null_world(effects, reps, 30, seed=11) >= math.log(1 / alpha)))
    assert rate <= alpha + 3 * math.sqrt(alpha * (1 - alpha) / reps)


_split = rounds_result


def test_round_rewards_puts_trial_r_of_task_t_at_r_t():
    cur = np.array([[0.0, 1.0], [1.0, np.nan]])
    cand = np.array([[1.0, 1.0], [0.5, 0.0]])
    got_cur, got_cand = round_rewards(_split(cur, "a"), _split(cand, "b"))
    np.testing.assert_array_equal(got_cur, cur)
    np.testing.assert_array_equal(got_cand, cand)


def test_a_large_gain_is_promoted_at_the_first_round_that_crosses():
    cand, cur = np.ones((5, 7)), np.zeros((5, 7))
    level = 0.0109
    d = rounds_decide(_split(cur, "best"), _split(cand, "new"), GateConfig(), level, budget=30)
    # round 1: mean over GRID of (1 + λ)^7 = 19.3 < 91.7; round 2: (1 + λ)^14, 969 ≥ 91.7
    assert sum((1 + lam) ** 7 for lam in GRID) / 4 < 1 / level
    assert d.accept and d.confirm_stop == "promote" and d.confirm_rounds == 2
    assert d.e_value == pytest.approx(sum((1 + lam) ** 14 for lam in GRID) / 4)
    assert d.reason.startswith("ACCEPT: evidence E = ")


def test_a_candidate_worse_on_every_trial_stops_for_futility_as_a_reject():
    cand, cur = np.zeros((2, 12)), np.ones((2, 12))
    d = rounds_decide(_split(cur, "best"), _split(cand, "new"), GateConfig(), 0.0109, 30)
    assert not d.accept and not d.indecisive and d.confirm_stop == "futile"
    assert d.reason.startswith("REJECT (futility)")


def test_a_budget_spent_in_between_is_indecisive_and_says_how_many_more_rounds():
    rng = np.random.default_rng(5)
    cur = (rng.random((4, 12)) < 0.4).astype(float)
    cand = cur.copy()
    cand[:, :3] = 1.0  # a gain on a quarter of the tasks: short of 1/alpha in 4 rounds
    ev = trial_evidence(cand, cur, 0.0109, budget=4)
    assert ev.verdict() == "exhausted" and ev.e_value < 1 / 0.0109
    d = rounds_decide(_split(cur, "best"), _split(cand, "new"), GateConfig(), 0.0109, 4)
    assert d.indecisive and not d.accept and d.confirm_stop == "exhausted"
    more = ev.rounds_to_settle()
    assert more is not None and f"about {more} more round(s)" in d.reason
    assert f"confirm_trials >= {4 + more}" in d.reason
    # the estimate: (log(1/α) − log E) / (expected growth a round at the observed mean)
    m, v = float((cand - cur).mean()), float((cand - cur).var())
    lam = min(m / (v + m * m), 0.8)
    growth = 12 * (lam * m - lam * lam * (v + m * m) / 2)
    assert more == math.ceil((math.log(1 / 0.0109) - math.log(ev.e_value)) / growth)


def test_a_bar_out_of_reach_is_said_before_any_trial():
    def most(trials: int) -> float:  # every delta +1: the mean over GRID of (1 + λ)^trials
        return sum((1 + lam) ** trials for lam in GRID) / 4

    # 2 tasks, 2 rounds: at most 4.469 < 91.7; the fewest rounds: 5 (4 reach 30.3)
    assert most(4) == pytest.approx(4.4692, abs=1e-4) and most(8) < 1 / 0.0109 <= most(10)
    why = unreachable(2, 2, 0.0109)
    assert why is not None and "at most E = 4.469" in why and "confirm_trials >= 5" in why
    assert evidence_ceiling(2, 4) < math.log(1 / 0.0109) <= evidence_ceiling(2, 5)
    assert unreachable(12, 30, 0.0109) is None
