"""The confirmation's betting e-value: the rule, its exact level, the selective gain, the MDE.

Expected values come from a direct loop over the published formulas (Waudby-Smith & Ramdas
2024, the fixed-n plug-in bet), from exact binomial sums (scipy) and from the normal
distribution, never from the code's own output.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate
from scipy import stats as sps

from honesteval.models import GateConfig
from honesteval.stats import (
    GateDesign,
    between_variance,
    confirm_decide,
    confirmation_log_e,
    promotion_mde,
    promotion_power,
    screen_pass_rate,
    selective_gain,
)
from honesteval.stats._confirmation import PERMUTATIONS, _orderings
from tests.gate_helpers import result


def reference_e_value(deltas, alpha):
    """E by hand: sort, then for each seeded ordering K = Π(1 + λ_t x_t) with
    λ_t = min(1, sqrt(2 log(1/α) / (n σ²_{t−1}))), σ² the running variance with one
    pseudo-observation of 1/4; E = the mean of the K."""
    x = sorted(float(v) for v in deltas)
    n = len(x)
    capitals = []
    for order in _orderings(n, PERMUTATIONS):  # the seeded orderings are the rule's input
        k, seen = 1.0, []
        for i in order:
            if seen:
                centred = sum((v - sum(seen) / len(seen)) ** 2 for v in seen)
                var = (0.25 + centred) / (len(seen) + 1)
            else:
                var = 0.25
            lam = min(1.0, math.sqrt(2 * math.log(1 / alpha) / (n * var)))
            k *= max(0.0, 1 + lam * x[i])
            seen.append(x[i])
        capitals.append(k)
    return sum(capitals) / len(capitals)


def test_the_e_value_is_the_papers_capital_averaged_over_orderings():
    rng = np.random.default_rng(3)
    deltas = np.clip(rng.normal(0.1, 0.3, 30), -1, 1)
    for alpha in (0.01, 1e-4):
        assert math.exp(confirmation_log_e(deltas, alpha)) == pytest.approx(
            reference_e_value(deltas, alpha), rel=1e-9
        )
    # order-free: the task ids' order cannot move it
    assert confirmation_log_e(deltas, 0.01) == confirmation_log_e(deltas[::-1], 0.01)


@pytest.mark.parametrize("alpha", [1e-3, 1e-4, 1e-5])
def test_the_level_holds_exactly_in_the_worst_skewed_null_where_the_t_bar_fails(alpha):
    """Deltas −1 with probability p, else v, mean 0 (a bit better on most tasks, much worse on
    a few): every sample is fixed by the count k of −1s, so P(reject) is an exact binomial sum."""
    n, v = 50, 0.1
    p = v / (1 + v)
    counts = np.arange(n + 1)
    samples = np.array([[-1.0] * k + [v] * (n - k) for k in counts])
    weights = sps.binom.pmf(counts, n, p)
    e_reject = confirmation_log_e(samples, alpha) >= math.log(1 / alpha)
    assert float(np.sum(weights[e_reject])) <= alpha
    # the t bar at the same level (SE 0: its strict fallback) rejects far more often
    mean, sd = samples.mean(axis=1), samples.std(axis=1, ddof=1)
    t_reject = np.where(sd == 0, mean > 0, mean > sps.t.ppf(1 - alpha, n - 1) * sd / math.sqrt(n))
    assert float(np.sum(weights[t_reject])) > 2 * alpha


def test_no_valid_test_can_confirm_beyond_what_n_tasks_allow():
    # n deltas of v: E ≤ (1 + v)^n, so 8 tasks at +0.5 never reach 1/alpha_1 ≈ 91
    assert math.exp(confirmation_log_e([0.5] * 8, 0.0109)) <= 1.5**8 < 1 / 0.0109


def test_confirm_decide_promotes_iff_the_e_value_reaches_one_over_alpha():
    base = result([0.5] * 30, name="base", trials=4)
    cand = result([1.0] * 15 + [0.5] * 15, name="cand", trials=4)
    deltas = [0.5] * 15 + [0.0] * 15
    for level in (0.01, 1e-6):
        d = confirm_decide(base, cand, GateConfig(), level)
        assert d.accept == (reference_e_value(deltas, level) >= 1 / level)
        # the threshold is the e-value's own; the bar (always in Δ) has no value here
        assert d.e_value_bar == pytest.approx(1 / level) and d.bar is None
    assert confirm_decide(base, cand, GateConfig(), 0.01).accept
    assert not confirm_decide(base, cand, GateConfig(), 1e-6).accept


def test_missing_tasks_that_could_flip_the_confirmation_make_it_indecisive():
    base = result([0.5] * 30, name="base", trials=4)
    cand = result([1.0] * 24 + [None] * 6, name="cand", trials=4)
    d = confirm_decide(base, cand, GateConfig(min_coverage=0.5), 1e-3)
    with_worst = [0.5] * 24 + [-0.5] * 6
    flips = (reference_e_value([0.5] * 24, 1e-3) >= 1e3) != (
        reference_e_value(with_worst, 1e-3) >= 1e3
    )
    assert flips and d.indecisive and not d.accept and len(d.rerun) == 6


def test_the_selective_interval_is_the_t_interval_far_above_the_bar():
    x = np.array([0.3, 0.1, 0.2, 0.25] * 25)
    est, (lo, hi) = selective_gain(x, 0.01)
    half = sps.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)
    assert (lo, hi) == pytest.approx((x.mean() - half, x.mean() + half), abs=1e-4)
    assert est == pytest.approx(x.mean(), abs=1e-6)


def test_the_selective_interval_near_the_bar_is_the_truncated_pivot_mixed_over_the_scale():
    rng = np.random.default_rng(7)
    x = np.clip(rng.normal(0.0, 0.3, 40), -1, 1)
    x = x - x.mean()
    level = 0.01
    # the smallest shift promoted, found independently by scanning
    shifts = np.linspace(0.0, 0.5, 5001)
    promoted = [
        confirmation_log_e(np.clip(x + s, -1, 1), level) >= math.log(1 / level) for s in shifts
    ]
    bar = shifts[int(np.argmax(promoted))]
    mean = bar + 0.01  # observed just above the bar
    est, (lo, hi) = selective_gain(x + mean, level)
    n, s = x.size, x.std(ddof=1)

    def pivot(mu):  # E over σ² = s²(n − 1)/χ²_{n−1} of P(X ≥ mean | X ≥ bar), X ~ N(mu, σ²/n)
        def integrand(c):
            se = s * math.sqrt((n - 1) / c / n)
            log_conditional = sps.norm.logsf((mean - mu) / se) - sps.norm.logsf((bar - mu) / se)
            return math.exp(log_conditional) * sps.chi2.pdf(c, n - 1)

        ends = sps.chi2(n - 1).ppf([1e-12, 1 - 1e-12])
        return integrate.quad(integrand, *ends, limit=200)[0]

    assert pivot(lo) == pytest.approx(0.025, abs=2e-3)
    assert pivot(hi) == pytest.approx(0.975, abs=2e-3)
    assert est < mean and lo < mean - 1.96 * s / math.sqrt(n)  # pulled down: the winner's curse


def test_the_mde_is_promoted_with_80_percent_power_and_grows_as_alpha_j_decays():
    def design(level, n=60):
        return GateDesign(
            0.01, 0.4, n, screen_trials=3, confirm_trials=9, screen_bar=1.0, level=level
        )

    early = promotion_mde(design(0.0109))
    late = promotion_mde(design(2.7e-4))
    assert early < late
    assert promotion_power(early, design(0.0109)) >= 0.8
    assert promotion_power(early - 0.01, design(0.0109)) < 0.8
    # too few tasks for the level: even +1 on all 6 tasks reaches 2^6 = 64 < 1e5
    assert promotion_mde(design(1e-5, n=6)) is None


def test_the_screen_pass_rate_is_the_noncentral_t_tail_and_bounds_the_power_at_any_budget():
    # an unstaged paired screen on 12 tasks with no between-task spread: each delta is
    # N(Δ, σ²/K), and it passes iff mean > SE, i.e. the t statistic (noncentral t with n − 1
    # df, noncentrality Δ√n / sqrt(σ²/K)) exceeds 1
    n, sigma2, k, gain = 12, 0.1, 3, 0.1

    def design(budget, rounds=True):
        return GateDesign(
            0.0, sigma2, n, screen_trials=k, confirm_trials=budget, screen_bar=1.0,
            level=0.0109, rounds=rounds,
        )  # fmt: skip

    exact = sps.nct.sf(1.0, n - 1, gain * math.sqrt(n) / math.sqrt(sigma2 / k))
    rate = screen_pass_rate(gain, design(9))
    assert rate == pytest.approx(exact, abs=0.05)  # 800 draws: MC SE ≤ 0.018
    # a promotion needs a pass, whatever the confirmation's budget or test
    for budget in (1, 9, 90):
        assert promotion_power(gain, design(budget)) <= rate
    assert promotion_power(gain, design(9, rounds=False)) <= rate


def test_the_between_task_variance_is_unbiased_and_its_se_is_the_chi_square_one():
    """For normal values Var(s²) = 2σ⁴/(n − 1) (s² ~ σ²·χ²_{n−1}/(n − 1)); the estimate is
    s² − noise, not floored, its spread over samples is that SD, and so is its SE, near."""
    rng = np.random.default_rng(3)
    n, sigma2, noise = 50, 0.04, 0.03
    samples = rng.normal(0.0, math.sqrt(sigma2), (4000, n))
    pairs = np.array([between_variance(x, noise) for x in samples])
    chi2_sd = math.sqrt(sps.chi2(n - 1).var()) * sigma2 / (n - 1)
    assert pairs[:, 0].mean() == pytest.approx(sigma2 - noise, abs=3 * chi2_sd / math.sqrt(4000))
    assert (pairs[:, 0] < 0).any()  # not floored
    assert pairs[:, 0].std() == pytest.approx(chi2_sd, rel=0.05)
    # the fourth-moment plug-in SE is low by O(1/n) (7 % at n = 50), robust to kurtosis
    assert pairs[:, 1].mean() == pytest.approx(chi2_sd, rel=0.1)


def test_a_negative_between_variance_is_less_trial_noise_in_the_confirmation():
    """ω² = −σ²/(2K) leaves the confirmation deltas σ²/(2K) of variance: the same power as
    ω² = 0 with half the trial variance (no screen, so only the confirmation's noise counts)."""

    def design(omega2, sigma2, se=0.0):
        return GateDesign(omega2, sigma2, 40, None, 9, None, 0.01, omega2_se=se)

    for gain in (0.05, 0.1, 0.15):
        assert promotion_power(gain, design(-0.4 / 18, 0.4)) == promotion_power(
            gain, design(0.0, 0.2)
        )


def test_the_mde_averages_the_power_over_the_measured_between_variance():
    """With the between-task variance measured as 0 ± SE, the power at a gain is the mean of
    the powers at the variances it could be: the screen deltas' variance V = ω̂² + σ²/K drawn
    from V·df/χ²_df, df = 2V²/SE² + 1 (checked by a quadrature over scipy's χ² quantiles),
    so the MDE lies above the MDE at exactly 0."""
    se, sigma2, k = 0.01, 0.4, 3

    def design(omega2, s=0.0):
        return GateDesign(omega2, sigma2, 60, k, 9, 1.0, 0.0109, omega2_se=s)

    measured = sigma2 / k
    df = 2 * measured**2 / se**2 + 1
    quantiles = sps.chi2(df).ppf((np.arange(40) + 0.5) / 40)
    for gain in (0.1, 0.14):
        quadrature = np.mean(
            [promotion_power(gain, design(measured * df / q - measured)) for q in quantiles]
        )
        assert promotion_power(gain, design(0.0, se)) == pytest.approx(quadrature, abs=0.03)
    assert promotion_mde(design(0.0, se)) > promotion_mde(design(0.0))
