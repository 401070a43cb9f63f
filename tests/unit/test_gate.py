"""`decide` exactly as SPEC §4, against independent computations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from honesteval.errors import GateSplitError, NotGateable
from honesteval.models import GateConfig
from honesteval.stats import decide
from tests.gate_helpers import result

BASE = 0.5


def paired(deltas, cfg=None, base=BASE):
    cur = result([base] * len(deltas), name="cur")
    cand = result([base + d for d in deltas], name="cand")
    return decide(cur, cand, cfg or GateConfig())


def with_gain(cur, pos: int, m: float):
    """``cur`` with task ``pos`` raised by ``m`` (a cheap copy: 20k results are built)."""
    tasks = list(cur.per_task)
    old = tasks[pos]
    rewards = [r + m for r in old.rewards]  # the gate reads trial rewards, not rounded means
    tasks[pos] = old.model_copy(update={"mean": old.mean + m, "rewards": rewards})
    reward = sum(t.mean for t in tasks) / len(tasks)
    return cur.model_copy(update={"per_task": tasks, "reward": reward, "candidate": "cand"})


def test_one_task_gain_is_a_tie_for_every_n_and_position():
    # deltas [m, 0, ..., 0]: mean m/n and sd/sqrt(n) = m/n too, so Δ == SE exactly, and a
    # tie rejects whatever the float rounding and wherever the gain sits.
    sizes = [*range(2, 61), 99, 150, 200]
    covered = 0
    for n in sizes:
        cur = result([0.3] * n, name="cur")
        for pos in range(n):
            d = decide(cur, with_gain(cur, pos, 0.1), GateConfig())
            assert not d.accept and "tie" in d.reason, (n, pos, d.reason)
            assert d.se is not None and d.se > 0  # a real tie, not the SE = 0 fallback
            covered += 1
    assert covered == sum(sizes)


@pytest.mark.parametrize("m", [0.1, 0.3, 1 / 3, 0.7])
def test_tie_holds_for_awkward_floats(m):
    for n in (2, 3, 7, 10, 99):
        for base in (0.0, 0.1, 0.2):
            deltas = [0.0] * n
            deltas[n // 2] = m
            d = paired(deltas, base=base)
            assert not d.accept and "tie" in d.reason


def test_spec_examples():
    assert paired([0.1] * 4).accept  # SE = 0: strict fallback, Δ > 0
    assert "strict fallback" in paired([0.1] * 4).reason
    assert not paired([0.5, -0.5, 0.5, -0.5]).accept
    d = paired([0.2, 0.21, 0.19, 0.2, 0.2], base=0.3)
    assert d.accept and d.n_paired == 5
    expected_se = sps.sem([0.2, 0.21, 0.19, 0.2, 0.2])
    assert d.se == pytest.approx(expected_se, rel=1e-6)
    assert d.delta == pytest.approx(0.2)


def test_paired_against_scipy_ttest_with_alpha():
    rng = np.random.default_rng(1)
    base = rng.uniform(0.2, 0.6, 12)
    gain = rng.normal(0.03, 0.05, 12)
    cur, cand = result(list(base), name="cur"), result(list(base + gain), name="cand")
    for alpha in (0.05, 0.2, 0.4):
        d = decide(cur, cand, GateConfig(alpha=alpha))
        real = np.array([t.mean for t in cand.per_task]) - np.array([t.mean for t in cur.per_task])
        t_stat = real.mean() / sps.sem(real)
        assert d.bar_multiplier == pytest.approx(sps.t.ppf(1 - alpha, 11))
        assert d.accept == (t_stat > sps.t.ppf(1 - alpha, 11))
        # the one-sided p-value says the same
        p = sps.ttest_1samp(real, 0.0, alternative="greater").pvalue
        assert d.accept == (p < alpha)
        # the MDE uses the bar's own quantile: t with n - 1 df for the bar and for power
        q = sps.t.ppf(1 - alpha, 11) + sps.t.ppf(0.8, 11)
        assert d.mde == pytest.approx(q * sps.sem(real))


def test_k_se_bar_and_mde():
    deltas = [0.05, 0.02, 0.08, -0.01, 0.04, 0.03]
    se = sps.sem(deltas)
    mean = float(np.mean(deltas))
    for k in (0.5, 1.0, 2.0, 3.0):
        d = paired(deltas, GateConfig(k_se=k))
        assert d.bar == pytest.approx(k * se, rel=1e-6)
        assert d.accept == (mean > k * se)
        assert d.mde == pytest.approx((k + sps.norm.ppf(0.8)) * se, rel=1e-6)


def test_significant_mode():
    cfg = GateConfig(mode="significant")
    cur = result([0.4, 0.6] * 5, name="cur")  # reward .5
    # se of the first: sd([.4,.6]*5)/sqrt(10)
    cand_small = result([0.42, 0.62] * 5, name="cand")  # +.02
    d = decide(cur, cand_small, cfg)
    se_expected = math.sqrt(cur.stderr**2 + cand_small.stderr**2)
    assert d.se == pytest.approx(se_expected) and not d.accept
    cand_big = result([0.7, 0.9] * 5, name="cand")  # +.30
    assert decide(cur, cand_big, cfg).accept


def test_significant_spec_numbers():
    """.50 -> .52 with se .1/.1 rejects; .50 -> .80 with se .02/.02 accepts (closed form)."""
    cfg = GateConfig(mode="significant")

    def with_se(reward, se, name):
        # two tasks at reward ± se: mean = reward, sd = se·√2, SE = sd/√2 = se
        return result([reward - se, reward + se], name=name)

    d = decide(with_se(0.5, 0.1, "c"), with_se(0.52, 0.1, "d"), cfg)
    assert not d.accept and d.se == pytest.approx(math.sqrt(2) * 0.1)
    d = decide(with_se(0.5, 0.02, "c"), with_se(0.8, 0.02, "d"), cfg)
    assert d.accept and d.se == pytest.approx(math.sqrt(2) * 0.02)


def test_threshold_and_strict_modes():
    cur = result([0.5] * 4, name="cur")
    cand = result([0.52] * 4, name="cand")
    assert decide(cur, cand, GateConfig(mode="threshold", threshold=0.01)).accept
    assert not decide(cur, cand, GateConfig(mode="threshold", threshold=0.05)).accept
    assert decide(cur, cand, GateConfig(mode="strict")).accept
    assert not decide(cur, result([0.5] * 4, name="cand"), GateConfig(mode="strict")).accept


def test_paired_falls_back_to_significant_with_fewer_than_two_pairs():
    cur = result([0.5, None, None], name="cur")
    cand = result([None, 0.9, 0.9], name="cand")
    d = decide(cur, cand, GateConfig(min_coverage=0.0))
    assert "fell back to significant" in d.reason and d.n_paired == 0
    # every task lacks a side: imputed at the worst case the gain vanishes, so it cannot decide
    assert d.indecisive and d.rerun == ["t000", "t001", "t002"]
    one = decide(result([0.5], name="cur"), result([0.9], name="cand"), GateConfig())
    assert one.accept and one.n_paired == 1 and "fell back to significant" in one.reason


def test_low_coverage_is_indecisive_on_either_side():
    good = result([0.5] * 10, name="cur")
    outage = result([0.9] * 5 + [None] * 5, name="cand")
    for cur, cand in ((good, outage), (outage, good)):
        d = decide(cur, cand, GateConfig())
        assert d.indecisive and not d.accept
        assert d.reason.startswith("INDECISIVE:") and "0.50" in d.reason and "1.00" in d.reason


def test_non_val_and_subset_and_empty_raise():
    val = result([0.5] * 3)
    with pytest.raises(GateSplitError):
        decide(result([0.5] * 3, split="train"), val, GateConfig())
    with pytest.raises(GateSplitError):
        decide(val, result([0.5] * 3, split="test"), GateConfig())
    with pytest.raises(NotGateable, match="subset"):
        decide(val, result([0.5] * 3, subset=True), GateConfig())
    with pytest.raises(NotGateable, match="empty"):
        decide(val, result([]), GateConfig())


def test_no_regression_passed_vetoes_only_tasks_the_best_passed():
    cur = result([1.0, 0.3, 0.3, 0.3, 0.3], name="cur")
    cand = result([0.9, 0.6, 0.6, 0.6, 0.6], name="cand")  # t000 was passed, now fails
    vetoing = GateConfig(pass_threshold=1.0, no_regression="passed")
    d = decide(cur, cand, vetoing)
    assert not d.accept and d.regressions == ["t000"] and "t000" in d.reason
    cand2 = result([1.0, 0.25, 0.7, 0.7, 0.7], name="cand")  # t001 drops but was never passed
    d2 = decide(cur, cand2, vetoing)
    assert d2.accept and d2.regressions == []
    d3 = decide(cur, cand2, GateConfig(no_regression="any"))
    assert not d3.accept and d3.regressions == ["t001"]
    off = decide(cur, cand, GateConfig(no_regression="off"))
    assert off.accept and off.regressions == []


def test_no_regression_default_reports_without_vetoing():
    cur = result([1.0, 0.3, 0.3, 0.3, 0.3], name="cur")
    cand = result([0.9, 0.6, 0.6, 0.6, 0.6], name="cand")
    d = decide(cur, cand, GateConfig())
    assert GateConfig().no_regression == "report"
    assert d.accept and d.regressions == ["t000"] and "regressions (not a veto" in d.reason


def test_unverified_lists_tasks_the_best_passed_that_the_candidate_lacks():
    cur = result([1.0, 1.0, 0.2, 0.2, 0.2, 0.2], name="cur")
    cand = result([None, 1.0, 0.9, 0.9, 0.9, 0.9], name="cand")
    d = decide(cur, cand, GateConfig(pass_threshold=1.0))
    assert d.unverified == ["t000"] and "unverified" in d.reason
    # worst case (t000 at 0 vs 1): deltas [-1, 0, .7 x4], mean 0.3 > SE = sqrt(.484/6) ~ .284
    assert d.accept and d.worst_case_delta == pytest.approx(0.3)


def test_yaml_false_means_off():
    import yaml

    assert GateConfig(**yaml.safe_load("no_regression: off")).no_regression == "off"


def test_task_order_does_not_matter():
    rng = np.random.default_rng(7)
    base = list(rng.uniform(0.2, 0.7, 9))
    cand = list(np.array(base) + rng.normal(0.02, 0.03, 9))
    ids = [f"t{i}" for i in range(9)]
    perm = list(rng.permutation(9))
    d1 = decide(result(base, ids=ids), result(cand, ids=ids), GateConfig())
    d2 = decide(
        result([base[i] for i in perm], ids=[ids[i] for i in perm]),
        result([cand[i] for i in perm], ids=[ids[i] for i in perm]),
        GateConfig(),
    )
    assert (d1.accept, d1.delta, d1.se) == (d2.accept, d2.delta, d2.se)


def test_invalid_gate_config_is_rejected():
    from pydantic import ValidationError

    for bad in ({"mode": "lucky"}, {"k_se": 0}, {"k_se": -1}, {"alpha": 0.5}, {"alpha": 0}):
        with pytest.raises(ValidationError):
            GateConfig(**bad)
