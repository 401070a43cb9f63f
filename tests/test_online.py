"""Online levels (LORD++, online fallback) and the betting test, against hand-written formulas."""

from __future__ import annotations

import math

import numpy as np
import pytest

from honesteval.stats import (
    advance,
    betting_log_wealth,
    gamma,
    new_online_state,
    next_level,
    sequential_stops,
    sequential_test,
    wealth_left,
)


def zeta_16() -> float:
    """ζ(1.6) by direct summation plus the Euler–Maclaurin tail (error ~1e-13)."""
    n = 200_000
    head = math.fsum(j**-1.6 for j in range(1, n + 1))
    return head + n**-0.6 / 0.6 - n**-1.6 / 2


Z = zeta_16()


def g(j: int) -> float:
    return j**-1.6 / Z if j >= 1 else 0.0


def run(rule: str, promoted: list[bool], alpha: float = 0.05):
    state = new_online_state(rule, alpha)
    levels = []
    for p in promoted:
        level = next_level(state)
        levels.append(level)
        state = advance(state, level, p)
    return state, levels


def test_gamma_is_normalised_and_decays():
    assert gamma(1) == pytest.approx(1 / Z, rel=1e-9)
    assert gamma(7) == pytest.approx(7**-1.6 / Z, rel=1e-9)
    assert gamma(0) == 0.0


def test_lord_plus_plus_levels_by_the_formula():
    alpha, w0 = 0.05, 0.025
    promoted = [False, True, False, True, False, False]  # τ1 = 2, τ2 = 4
    state, levels = run("lord++", promoted, alpha)
    expected = [
        w0 * g(1),
        w0 * g(2),
        w0 * g(3) + (alpha - w0) * g(1),
        w0 * g(4) + (alpha - w0) * g(2),
        w0 * g(5) + (alpha - w0) * g(3) + alpha * g(1),
        w0 * g(6) + (alpha - w0) * g(4) + alpha * g(2),
    ]
    assert levels == pytest.approx(expected, rel=1e-9)
    assert state.tests == 6 and state.promotions == [2, 4]
    assert wealth_left(state) == pytest.approx(w0 + (alpha - w0) + alpha - sum(expected))


def test_fallback_levels_by_the_formula():
    alpha = 0.1
    promoted = [False, True, True, False, False]
    state, levels = run("fallback", promoted, alpha)
    a1 = alpha * g(1)
    a2 = alpha * g(2)
    a3 = alpha * g(3) + a2
    a4 = alpha * g(4) + a3
    a5 = alpha * g(5)  # the 4th did not promote: nothing carried
    assert levels == pytest.approx([a1, a2, a3, a4, a5], rel=1e-9)
    spent_gamma = sum(g(j) for j in range(1, 6))
    assert wealth_left(state) == pytest.approx(alpha * (1 - spent_gamma))


def test_no_promotion_spends_at_most_w0_and_levels_never_exceed_wealth():
    state, levels = run("lord++", [False] * 5000)
    assert sum(levels) < 0.025  # P(any false promotion) <= w0 when nothing is better
    rng = np.random.default_rng(3)
    for rule in ("lord++", "fallback"):
        state = new_online_state(rule, 0.05)
        for _ in range(300):
            level = next_level(state)
            assert 0 < level <= wealth_left(state) + 1e-15
            state = advance(state, level, bool(rng.random() < 0.2))


def aGRAPA_by_hand(xs: list[float], c: float = 0.5, prior_var: float = 0.25) -> list[float]:
    """λ_i from x_1..x_{i-1}: m = Σx/(i), v = (prior_var + Σ(x − x̄)²)/(i), λ = m/(v + m²)."""
    bets = []
    for i in range(len(xs)):
        past = xs[:i]
        m = sum(past) / (i + 1)
        ss = sum((x - sum(past) / i) ** 2 for x in past) if i else 0.0
        v = (prior_var + ss) / (i + 1)
        bets.append(min(max(m / (v + m * m), 0.0), c))
    return bets


def test_betting_wealth_by_hand():
    xs = [1.0, 1.0, 0.5, -1.0, 0.0, 1.0]
    bets = aGRAPA_by_hand(xs)
    expected = np.cumsum([math.log(1 + b * x) for b, x in zip(bets, xs, strict=True)])
    assert betting_log_wealth(xs) == pytest.approx(expected, rel=1e-12)
    assert bets[0] == 0.0 and bets[1] == 0.5  # nothing seen yet: no bet; then capped at c
    # K after 3 observations = 1 · 1.5 · 1.25 = 1.875 (≥ 1/α for α = 0.6, not for α = 0.5)
    assert sequential_test(xs[:3], 0.6).reject
    assert not sequential_test(xs[:3], 0.5).reject


def test_sequential_test_is_valid_under_the_null_and_stops_early_under_the_alternative():
    rng = np.random.default_rng(11)
    null = rng.choice([-1.0, 0.0, 1.0], size=(4000, 300))
    reject, used, _ = sequential_stops(null, np.full(4000, 0.1))
    se = math.sqrt(0.1 * 0.9 / 4000)
    assert reject.mean() <= 0.1 + 3 * se  # Ville: P(sup K ≥ 1/α) ≤ α
    better = rng.choice([-1.0, 0.0, 1.0], p=[0.15, 0.35, 0.5], size=(200, 300))  # mean 0.35
    reject, used, e_value = sequential_stops(better, np.full(200, 0.01))
    assert reject.mean() > 0.95 and np.median(used) < 150
    assert np.all(e_value[reject] >= 100)


def test_sequential_test_gives_up_when_it_cannot_reach_the_bar():
    # After one draw, K = 1 and 9 more draws multiply it by at most 1.5^9 ≈ 38 < 1/0.01.
    out = sequential_test([-1.0] * 10, 0.01)
    assert not out.reject and out.n_used == 1
    assert sequential_test([], 0.05).n_used == 0
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        betting_log_wealth([2.0])


def test_e_lond_levels_by_the_formula():
    """Xu & Ramdas 2024: alpha_j = α·γ_j·(promotions before j + 1)."""
    alpha = 0.05
    promoted = [False, True, False, True, False]
    state, levels = run("e-lond", promoted, alpha)
    expected = [alpha * g(1), alpha * g(2), 2 * alpha * g(3), 2 * alpha * g(4), 3 * alpha * g(5)]
    assert levels == pytest.approx(expected, rel=1e-9)
    # nothing promoted: the levels sum to α over an unbounded search, the wealth is what is left
    assert wealth_left(state) == pytest.approx(3 * alpha * (1 - sum(g(j) for j in range(1, 6))))
    fresh = new_online_state("e-lond", alpha)
    assert wealth_left(fresh) == pytest.approx(alpha)


def test_status_says_what_e_lond_guarantees():
    from honesteval.views.status import ON_THESE_TASKS, guarantee_sentence

    state, _ = run("e-lond", [True, False], 0.05)
    wealth = 0.05 * 2 * (1 - g(1) - g(2))  # one promotion: future levels carry (R + 1) = 2
    assert guarantee_sentence(state, 0) == (
        "search guarantee: e-LOND at alpha 0.05 over 2 confirmation(s), 1 promoted: the expected "
        "share of false promotions stays <= 0.05 under any dependence between confirmations, and "
        f"P(any false promotion) <= 0.05 while no candidate is better {ON_THESE_TASKS}; "
        "alpha-wealth left "
        f"{wealth:.4g} (next confirmation at alpha_j = {0.05 * g(3) * 2:.3g})."
    )
