"""The gate's exact arithmetic from trial rewards, and worst-case gating on missing data.

Expected values are computed by hand in Fractions (or by scipy), never read off the code.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats as sps

from honesteval.models import GateConfig, TaskTrials
from honesteval.stats import aggregate, decide, paired_deltas
from honesteval.stats._exact import common_grid, task_sums
from tests.gate_helpers import result


def trials_result(rows, name, *, clusters=None, statuses=None):
    """One task per row of trial rewards (None: an infra_error trial)."""
    tasks = []
    for i, row in enumerate(rows):
        st = statuses[i] if statuses else ["infra_error" if r is None else "ok" for r in row]
        tasks.append(
            TaskTrials(
                id=f"t{i}",
                cluster=None if clusters is None else clusters[i],
                statuses=st,
                rewards=list(row),
            )
        )
    return aggregate(tasks, candidate=name, fingerprint=f"fp-{name}", split="val")


def test_issue_example_trial_rewards_tie_rejects():
    cur = trials_result([[0, 0, 0], [1, 0, 0], [1, 0, 0]], "cur")
    cand = trials_result([[1, 1, 0], [0, 0, 0], [1, 1, 1]], "cand")
    pairs = paired_deltas(cur, cand)
    deltas = [Fraction(2, 3), Fraction(-1, 3), Fraction(2, 3)]
    assert [Fraction(v, pairs.unit) for v in pairs.values] == deltas
    mean = sum(deltas) / 3
    var_of_mean = sum((d - mean) ** 2 for d in deltas) / 2 / 3
    assert (pairs.mean, pairs.variance_of_mean) == (Fraction(1, 3), Fraction(1, 9))
    assert pairs.mean**2 == var_of_mean  # Δ̄ == SE exactly
    d = decide(cur, cand, GateConfig())
    assert not d.accept and d.reason.startswith("REJECT (tie)")


def test_task_sums_and_grid_by_hand():
    r = trials_result([[0.1, 0.2, None], [0.3, 0.7, 0.9], [None, None, None]], "x")
    sums = task_sums(r)
    assert set(sums) == {"t0", "t1"}
    # the decimals written, not the doubles nearest to them: 0.1 + 0.2 is 3/10
    assert sums["t0"].total == Fraction(3, 10)
    assert sums["t0"].squares == Fraction(1, 100) + Fraction(4, 100)
    assert sums["t0"].count == 2 and sums["t1"].count == 3
    unit, (grid,) = common_grid(sums)
    assert Fraction(grid["t0"], unit) == Fraction(3, 20)
    assert Fraction(grid["t1"], unit) == Fraction(19, 30)  # (3 + 7 + 9) / 10 / 3


def test_failed_trials_count_at_failure_reward_in_the_exact_means():
    r = trials_result([[0.6, None], [0.6, 0.6]], "x", statuses=[["ok", "failed"], ["ok", "ok"]])
    unit, (grid,) = common_grid(task_sums(r))
    assert Fraction(grid["t0"], unit) == Fraction(3, 10)  # 0.6 and failure_reward 0.0
    assert r.trials_failed == 1 and r.per_task[0].n_ok == 2


def test_strict_zero_gain_in_another_order_rejects():
    cur = result([0.1, 0.2, 0.3], name="cur")
    cand = result([0.3, 0.2, 0.1], name="cand")
    # naive left-to-right sums differ in the last bit; the reported rewards are correctly
    # rounded sums, the same bits in any order, and the gate's gain is exactly zero
    assert (0.1 + 0.2) + 0.3 != (0.3 + 0.2) + 0.1
    assert cand.reward == cur.reward == 0.6 / 3
    d = decide(cur, cand, GateConfig(mode="strict"))
    assert not d.accept and d.delta == 0.0
    assert not decide(cur, cand, GateConfig(mode="threshold", threshold=0.0)).accept


@pytest.mark.parametrize("n", [2, 3, 5, 10, 37])
def test_significant_one_task_gain_is_a_tie_wherever_it_sits(n):
    # current all 0.3 (SE 0); candidate +m on one task: Δ = m/n and SE = m/n exactly
    cur = result([0.3] * n, name="cur")
    for pos in range(n):
        means = [0.3] * n
        means[pos] = 0.3 + 0.1
        d = decide(cur, result(means, name="cand"), GateConfig(mode="significant"))
        assert not d.accept and "tie" in d.reason, (n, pos)
        cand_float = result(means, name="cand")
        assert d.se == pytest.approx(cand_float.stderr)


def test_paired_matches_scipy_on_unequal_trial_counts():
    rng = np.random.default_rng(3)
    rows_c = [list(rng.uniform(0, 1, k)) for k in (1, 2, 3, 2, 3, 1, 3, 2)]
    rows_d = [list(np.clip(np.array(r) + 0.1, 0, 1)) for r in rows_c]
    cur, cand = trials_result(rows_c, "cur"), trials_result(rows_d, "cand")
    real = np.array([np.mean(b) - np.mean(a) for a, b in zip(rows_c, rows_d, strict=True)])
    d = decide(cur, cand, GateConfig(alpha=0.1))
    assert d.delta == pytest.approx(real.mean()) and d.se == pytest.approx(sps.sem(real))
    p = sps.ttest_1samp(real, 0.0, alternative="greater").pvalue
    assert d.accept == (p < 0.1)


def test_clustered_paired_se_by_hand():
    # 6 tasks in 3 clusters; deltas d; cluster-robust SE = sqrt(C/(C-1) Σ_c (Σ_i∈c (d_i-d̄))²)/n
    cur_rows = [[0.0], [0.0], [0.0], [0.0], [0.0], [0.0]]
    deltas = [0.5, 0.25, 0.0, 0.75, 0.5, 1.0]
    clusters = ["a", "a", "b", "b", "c", "c"]
    cur = trials_result(cur_rows, "cur", clusters=clusters)
    cand = trials_result([[x] for x in deltas], "cand", clusters=clusters)
    mean = sum(deltas) / 6
    groups = {}
    for x, c in zip(deltas, clusters, strict=True):
        groups[c] = groups.get(c, 0.0) + (x - mean)
    se = math.sqrt(3 / 2 * sum(v * v for v in groups.values())) / 6
    d = decide(cur, cand, GateConfig(alpha=0.05))
    assert d.se == pytest.approx(se)
    assert d.bar_multiplier == pytest.approx(sps.t.ppf(0.95, 2))  # C − 1 = 2 df
    assert "3 clusters" in d.reason


def test_worst_case_flip_is_indecisive_and_names_the_tasks():
    # 10 tasks; the candidate lacks 3 of them. On the 7 both scored it gains +0.2 each with
    # spread; imputed at the worst case (0 vs the current's 0.5) the mean gain turns negative.
    cur = result([0.5] * 10, name="cur")
    cand = result([0.7, 0.72, 0.68, 0.7, 0.71, 0.69, 0.7, None, None, None], name="cand")
    d = decide(cur, cand, GateConfig(min_coverage=0.6))
    assert d.indecisive and not d.accept and d.reason.startswith("INDECISIVE")
    assert d.rerun == ["t007", "t008", "t009"] and "t007" in d.reason
    worst = (7 * 0.2 + 3 * (0.0 - 0.5)) / 10
    assert d.worst_case_delta == pytest.approx(worst)


def test_worst_case_agreeing_accepts():
    cur = result([0.2] * 10, name="cur")
    cand = result([0.9] * 9 + [None], name="cand")
    d = decide(cur, cand, GateConfig())
    assert d.accept and d.rerun == ["t009"] and "also holds" in d.reason


def test_nothing_scored_is_indecisive_even_at_min_coverage_zero():
    full = result([0.5] * 4, name="cur")
    none = result([None] * 4, name="cand")
    for cur, cand in ((full, none), (none, full)):
        d = decide(cur, cand, GateConfig(min_coverage=0.0))
        assert d.indecisive and not d.accept and "nothing scored" in d.reason


def test_min_coverage_on_the_overlap():
    # both sides 6/10, only 2 tasks in common: 0.2 < 0.6 on the overlap
    cur = result([0.5] * 6 + [None] * 4, name="cur")
    cand = result([None] * 4 + [0.9] * 6, name="cand")
    d = decide(cur, cand, GateConfig(min_coverage=0.6))
    assert d.indecisive and "both 0.20" in d.reason


# Issue 23 §6: exact in every mode, on the values the user wrote.


def one_trial(means, name, *, ids=None, stderr_method="auto"):
    ids = ids or [f"t{i}" for i in range(len(means))]
    tasks = [
        TaskTrials(id=i, statuses=["infra_error"], rewards=[None])
        if m is None
        else TaskTrials(id=i, statuses=["ok"], rewards=[m])
        for i, m in zip(ids, means, strict=True)
    ]
    return aggregate(
        tasks, candidate=name, fingerprint=f"fp-{name}", split="val", stderr_method=stderr_method
    )


def test_significant_combined_rejects_the_exact_tie():
    # 9 tasks, 1 trial: current all 0, candidate 1 on one task. By hand: Δ = 1/9; combined
    # SE² = var(ddof=1)/n + Σse²/n² = (1/9)/9 + 0 = 1/81, so Δ = 1 × SE exactly: a tie.
    cur = one_trial([0.0] * 9, "cur", stderr_method="combined")
    cand = one_trial([1.0] + [0.0] * 8, "cand", stderr_method="combined")
    d = decide(cur, cand, GateConfig(mode="significant", k_se=1.0))
    assert not d.accept and d.reason.startswith("REJECT (tie)")
    assert d.delta == pytest.approx(1 / 9) and d.se == pytest.approx(1 / 9)


def test_worst_case_imputation_decides_again_with_the_imputed_samples_own_se():
    # 12 tasks, 1 trial, combined SE; the candidate lacks t11. Observed: Δ = 0.6 − 0.2 = 0.4
    # against a tiny SE: accept. Imputed (t11 at 0 for the candidate): its SE is the spread
    # of [0.58, 0.62, …, 0]; 10 × that SE exceeds the imputed Δ, so the verdict flips.
    cand_means = [0.58, 0.62] * 5 + [0.6, None]
    cur = one_trial([0.2] * 12, "cur", stderr_method="combined")
    cand = one_trial(cand_means, "cand", stderr_method="combined")
    imputed = np.array([m if m is not None else 0.0 for m in cand_means])
    delta_imputed = imputed.mean() - 0.2
    se_imputed = imputed.std(ddof=1) / math.sqrt(12)  # current side has no spread
    assert delta_imputed < 10 * se_imputed  # by hand: the imputed sample rejects
    observed = np.array(cand_means[:11], dtype=float)
    assert observed.mean() - 0.2 > 10 * observed.std(ddof=1) / math.sqrt(11)  # observed accepts
    d = decide(cur, cand, GateConfig(mode="significant", k_se=10.0, min_coverage=0.5))
    assert d.indecisive and not d.accept and d.rerun == ["t11"]
    assert f"bar 10×SE = {10 * se_imputed:.4f}" in d.reason


def test_strict_decides_on_the_decimals_written():
    # 0.1 + 0.2 > 0.3 in doubles; in decimals the two sums are equal: no gain, REJECT.
    cur = one_trial([0.3, 0.0], "cur")
    cand = one_trial([0.1, 0.2], "cand")
    d = decide(cur, cand, GateConfig(mode="strict"))
    assert not d.accept and d.delta == 0.0


@pytest.mark.parametrize(("before", "after"), [(0.7, 0.8), (0.2, 0.3)])
def test_threshold_gain_of_exactly_the_threshold_rejects_wherever_it_sits(before, after):
    # 0.8 − 0.7 and 0.3 − 0.2 are both exactly 0.1 in decimals: a tie with the threshold.
    d = decide(
        one_trial([before] * 3, "cur"),
        one_trial([after] * 3, "cand"),
        GateConfig(mode="threshold", threshold=0.1),
    )
    assert not d.accept and d.reason.startswith("REJECT")


def test_equal_decimal_means_are_not_a_regression():
    # [0.2, 0, 0, 0.1] and [0.3, 0, 0, 0] both have mean 0.3 / 4 = 0.075 exactly
    cur = aggregate(
        [
            TaskTrials(id="a", statuses=["ok"] * 4, rewards=[0.2, 0.0, 0.0, 0.1]),
            TaskTrials(id="b", statuses=["ok"] * 4, rewards=[0.5] * 4),
        ],
        split="val",
    )
    cand = aggregate(
        [
            TaskTrials(id="a", statuses=["ok"] * 4, rewards=[0.3, 0.0, 0.0, 0.0]),
            TaskTrials(id="b", statuses=["ok"] * 4, rewards=[0.5] * 4),
        ],
        split="val",
    )
    d = decide(cur, cand, GateConfig(no_regression="any"))
    assert d.regressions == []


def test_an_empty_cluster_name_is_refused():
    with pytest.raises(ValueError, match="an empty cluster name is not a cluster"):
        TaskTrials(id="a", cluster="", statuses=["ok"], rewards=[1.0])


def test_a_task_without_a_cluster_is_its_own_unit_in_aggregate_and_in_the_gate():
    # clusters: a, a, b, b and two tasks without one: 4 independent units in both places
    clusters = ["a", "a", "b", "b", None, None]
    cur = trials_result([[0.0]] * 6, "cur", clusters=clusters)
    cand = trials_result([[0.5], [0.25], [0.0], [0.75], [0.5], [1.0]], "cand", clusters=clusters)
    assert cand.n_clusters == 4
    d = decide(cur, cand, GateConfig(alpha=0.05))
    assert "4 clusters" in d.reason
    # by hand: CR2 over units {a}, {b}, {t4}, {t5}: each unit's residual sum scaled by
    # 1/sqrt(1 − n_c/N) (Bell & McCaffrey 2002 for a mean)
    deltas = [0.5, 0.25, 0.0, 0.75, 0.5, 1.0]
    mean = sum(deltas) / 6
    units = [deltas[0] + deltas[1], deltas[2] + deltas[3], deltas[4], deltas[5]]
    sizes = [2, 2, 1, 1]
    spread = sum((u - s * mean) ** 2 / (1 - s / 6) for u, s in zip(units, sizes, strict=True))
    assert d.se == pytest.approx(math.sqrt(spread) / 6)
    assert cand.stderr == pytest.approx(math.sqrt(spread) / 6)  # the same rule in aggregate


def test_exact_combined_se_equals_the_reported_combined_se():
    # cap-evolve's formula by hand: SE² = var(means, ddof=1)/n + Σ se_i²/n², per side
    rows_cur = [[0.1, 0.3, 0.2], [0.5, 0.5, 0.9], [0.0, 0.4, 0.2], [0.7, 0.6, 0.8]]
    rows_cand = [[0.3, 0.3, 0.6], [0.9, 0.5, 0.9], [0.2, 0.4, 0.1], [0.7, 1.0, 0.8]]

    def combined_var(rows):
        means = np.array([np.mean(r) for r in rows])
        se2 = np.array([np.var(r, ddof=1) / len(r) for r in rows])
        return means.var(ddof=1) / len(rows) + se2.sum() / len(rows) ** 2

    tasks = [
        [TaskTrials(id=f"t{i}", statuses=["ok"] * 3, rewards=r) for i, r in enumerate(rows)]
        for rows in (rows_cur, rows_cand)
    ]
    cur, cand = (
        aggregate(t, candidate=n, split="val", stderr_method="combined")
        for t, n in zip(tasks, ("cur", "cand"), strict=True)
    )
    d = decide(cur, cand, GateConfig(mode="significant"))
    assert d.se == pytest.approx(math.sqrt(combined_var(rows_cur) + combined_var(rows_cand)))
    assert d.se == pytest.approx(math.hypot(cur.stderr, cand.stderr))
