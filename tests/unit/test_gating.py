"""Gate bookkeeping without Prefect: compare-and-swap promotion, screened counts, drift, plan."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from honesteval.gating.ledger import (
    Confirmation,
    confirm_seed,
    read_best,
    record_decision,
    reserve_confirmation,
    staged,
)
from honesteval.models import GateConfig, TaskTrials
from honesteval.project.loader import load_project
from honesteval.stats import (
    advance,
    aggregate,
    baseline_decision,
    decide,
    drift_report,
    minimum_detectable_effect,
    new_online_state,
    paired_components,
    required_tasks,
    required_trials,
    variance_components,
)
from tests.gate_helpers import result
from tests.unit.test_confirm import reference_e_value
from tests.unit.test_online import g


def test_a_decision_against_a_stale_best_promotes_nothing(make_project):
    proj = load_project(make_project())
    cfg = GateConfig()
    base = result([0.5] * 6, name="base")
    record_decision(proj, baseline_decision(base, cfg), base, None)
    seen_by_both = read_best(proj)
    a, b = result([0.9] * 6, name="a"), result([0.8] * 6, name="b")
    first = record_decision(proj, decide(base, a, cfg), a, seen_by_both)
    second = record_decision(proj, decide(base, b, cfg), b, seen_by_both)
    assert first.promoted and first.screened == 1
    assert not second.accept and not second.promoted and "stale" in second.reason
    assert second.screened is None or second.screened >= 1
    assert read_best(proj).name == "a"


def test_low_coverage_baseline_is_not_promoted(make_project):
    proj = load_project(make_project())
    r = result([0.5, None, None], name="base")
    d = record_decision(proj, baseline_decision(r, GateConfig()), r, None)
    assert d.indecisive and not d.promoted and read_best(proj) is None


def test_drift_report_two_sided_at_5_percent():
    stored = result([0.5] * 10, name="best")
    rng = np.random.default_rng(0)
    noise = rng.normal(0, 0.05, 10)
    for shift, expected in ((0.0, "stable"), (-0.2, "drifted"), (0.2, "drifted")):
        fresh = result(list(0.5 + noise + shift), name="best")
        report = drift_report(stored, fresh, GateConfig())
        d = noise + shift
        t = abs(d.mean()) / sps.sem(d)
        assert (report.status == "drifted") == (t > sps.t.ppf(0.975, 9)), shift
        assert report.status == expected


def test_power_formulas_match_miller():
    z = 1.0 + sps.norm.ppf(0.8)
    assert minimum_detectable_effect(0.04, 0.09, 50, 3, z_alpha=1.0) == pytest.approx(
        z * math.sqrt((0.04 + 0.09 / 3) / 50)
    )
    n = required_tasks(0.05, 0.04, 0.09, 3, z_alpha=1.0)
    assert n == math.ceil(z**2 * (0.04 + 0.03) / 0.05**2)
    # Eq. 10: with enough tasks, the trials needed; with too few, none suffices.
    k = required_trials(0.05, 0.01, 0.09, 200, z_alpha=1.0)
    assert k == math.ceil(0.09 / (200 * 0.05**2 / z**2 - 0.01))
    assert minimum_detectable_effect(0.01, 0.09, 200, k, z_alpha=1.0) <= 0.05
    assert required_trials(0.05, 0.04, 0.09, 10, z_alpha=1.0) is None


def test_variance_components_by_hand():
    # two tasks, two trials each: task means .5 and 1.0; within variances .5 and 0
    tasks = [
        TaskTrials(id="a", statuses=["ok", "ok"], rewards=[0.0, 1.0]),
        TaskTrials(id="b", statuses=["ok", "ok"], rewards=[1.0, 1.0]),
    ]
    comp = variance_components(aggregate(tasks))
    sigma2 = (0.5 + 0.0) / 2
    var_means = np.var([0.5, 1.0], ddof=1)  # 0.125
    assert comp.sigma2 == pytest.approx(sigma2)
    assert comp.omega2 == pytest.approx(max(0.0, var_means - sigma2 / 2))


def test_paired_components_keep_the_unfloored_between_variance_and_its_se():
    # per-task deltas 0, +.5, −.5 over 2 trials a side: Var(d) = 1/4; each side's within
    # variance averages (1/2 + 1/2 + 0)/3 = 1/3, so σ² = 2/3 and σ²/K = 1/3: ω̂² = 1/4 − 1/3
    a = aggregate(
        [
            TaskTrials(id=i, statuses=["ok"] * 2, rewards=r)
            for i, r in (("x", [0.0, 1.0]), ("y", [0.0, 1.0]), ("z", [1.0, 1.0]))
        ]
    )
    b = aggregate(
        [
            TaskTrials(id=i, statuses=["ok"] * 2, rewards=r)
            for i, r in (("x", [1.0, 0.0]), ("y", [1.0, 1.0]), ("z", [1.0, 0.0]))
        ]
    )
    comp = paired_components(a, b)
    assert comp.sigma2 == pytest.approx(2 / 3)
    assert comp.omega2 == 0.0 and comp.omega2_unfloored == pytest.approx(1 / 4 - 1 / 3)
    # Var(s²) ≈ μ₄/n − s⁴(n − 3)/(n(n − 1)) with μ₄ = (0 + 2 · (1/2)⁴)/3 = 1/24, n = 3
    assert comp.omega2_se == pytest.approx(math.sqrt(1 / 24 / 3))


def _confirmable(make_project):
    """A project with a baseline promoted, and a screen pass of a candidate against it."""
    proj = load_project(make_project())
    cfg = GateConfig()
    base = result([0.5] * 6, name="base")
    record_decision(proj, baseline_decision(base, cfg), base, None)
    cand = result([0.9] * 6, name="cand")
    return proj, cfg, read_best(proj), staged(decide(base, cand, cfg), cfg), cand


def test_a_confirmation_is_decided_at_the_ledger_level_and_becomes_the_reference(make_project):
    proj, cfg, best, screen, cand = _confirmable(make_project)
    base_means = [0.5, 0.4, 0.6, 0.5, 0.5, 0.5] * 4  # 24 tasks: enough to confirm at alpha_1
    cand_means = [0.8, 0.9, 0.7, 0.8, 0.9, 0.8] * 4
    current = result(base_means, name="base", trials=9)
    fresh = result(cand_means, name="cand", trials=9)
    reserved = reserve_confirmation(proj, best, cand, cfg, since=0)
    assert (reserved.record.j, reserved.record.n_trials) == (1, 3 * cand.n_trials)
    d = record_decision(proj, screen, cand, best, Confirmation(current, fresh, cfg), reserved)
    level = 0.025 * g(1)
    deltas = np.array(cand_means) - np.array(base_means)
    assert d.level == pytest.approx(level)
    assert d.e_value == pytest.approx(reference_e_value(deltas, level), rel=1e-9)
    assert d.accept == (reference_e_value(deltas, level) >= 1 / level)
    assert d.accept and d.promoted and d.online.promotions == [1] and d.reservation == 1
    assert d.gain_ci95[0] < deltas.mean() < d.gain_ci95[1]
    assert read_best(proj).result == fresh  # the confirmation run, not the screen


def test_a_reserved_confirmation_is_spent_stale_or_indecisive(make_project):
    proj, cfg, best, screen, cand = _confirmable(make_project)
    reserved = reserve_confirmation(proj, best, cand, cfg, since=0)
    newer = result([0.7] * 6, name="newer")
    record_decision(proj, decide(best.result, newer, cfg), newer, best)  # promoted meanwhile
    current = result([0.5] * 6, name="base", trials=9)
    evidence = Confirmation(current, result([0.9] * 6, trials=9), cfg)
    stale = record_decision(proj, screen, cand, best, evidence, reserved)
    assert not stale.accept and not stale.promoted and "stale" in stale.reason
    assert "the level reserved for confirmation 1 stays spent" in stale.reason
    assert stale.online.tests == 1 and stale.online.spent == pytest.approx(0.025 * g(1))
    # Once the best changed, nothing is reserved any more: a stale screen spends nothing.
    assert reserve_confirmation(proj, best, cand, cfg, since=0) is None
    late = record_decision(proj, screen, cand, best)
    assert "no alpha spent" in late.reason and late.online.tests == 1
    proj2, cfg2, best2, screen2, cand2 = _confirmable(make_project)
    outage = result([0.9, None, None, None, None, 0.9], name="cand", trials=9)
    reserved2 = reserve_confirmation(proj2, best2, cand2, cfg2, since=0)
    d = record_decision(
        proj2, screen2, cand2, best2, Confirmation(current, outage, cfg2), reserved2
    )
    assert d.indecisive and not d.promoted
    assert d.online.tests == 1 and d.online.spent == pytest.approx(0.025 * g(1))


def test_confirmation_seeds_never_overlap_the_screen(make_project):
    _, _, best, _, cand = _confirmable(make_project)
    state = new_online_state()
    seed = confirm_seed(cand, best, state, 9)
    assert seed >= 10**9 and seed != confirm_seed(cand, best, advance(state, 0.01, False), 9)
    inside = cand.model_copy(update={"base_seed": seed - 1, "n_trials": 3})
    moved = confirm_seed(inside, best, state, 9)
    assert set(range(moved, moved + 9)).isdisjoint(range(seed - 1, seed + 2))
