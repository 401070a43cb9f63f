"""The reported 95 % interval: the order-free betting interval against a direct loop over the
paper's formulas, Clopper-Pearson for 0/1 values, the issue's examples (§1 order, §2 width)
through the real ``aggregate``, and the clustered interval's degrees of freedom.

Expected values come from the formulas (scipy's beta quantiles, Hoeffding's bound, a loop over
Waudby-Smith & Ramdas's Eq. 26-27), never from the code's output.
"""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from scipy import stats as sps

from honesteval.models import TaskTrials
from honesteval.stats import aggregate, betting_ci
from honesteval.stats._interval import (
    MAX_PERMUTATIONS,
    MIN_PERMUTATIONS,
    PERMUTATION_BUDGET,
    PERMUTATION_SEED,
    TRUNCATION,
)

ALPHA = 0.05


def the_papers_permutations(n: int) -> np.ndarray:
    """The B seeded permutations, re-derived from the documented recipe."""
    b = min(MAX_PERMUTATIONS, max(MIN_PERMUTATIONS, PERMUTATION_BUDGET // n))
    rng = np.random.default_rng(PERMUTATION_SEED)
    return rng.permuted(np.tile(np.arange(n), (b, 1)), axis=1)


def final_capital(x: list[float], m: float, side: int) -> float:
    """K_n(m) of one order: plug-in bets (Eq. 26), truncated at c/m or c/(1 − m) (Eq. 27)."""
    n = len(x)
    capital, mu_sum, var_sum, sigma2_prev = 1.0, 0.0, 0.0, 0.25
    for t, xi in enumerate(x, start=1):
        lam = math.sqrt(2 * math.log(2 / ALPHA) / (n * sigma2_prev))
        room = m if side > 0 else 1 - m
        if room > 0:
            lam = min(lam, TRUNCATION / room)
        capital *= 1 + side * lam * (xi - m)
        mu_sum += xi
        mu = (0.5 + mu_sum) / (t + 1)
        var_sum += (xi - mu) ** 2
        sigma2_prev = (0.25 + var_sum) / (t + 1)
    return capital


def rejected_by_the_paper(x: list[float], m: float) -> bool:
    """½·mean K⁺ ≥ 1/α or ½·mean K⁻ ≥ 1/α over the permutations of the sorted values."""
    ordered = sorted(x)
    perms = the_papers_permutations(len(x))
    for side in (+1, -1):
        mean_k = np.mean([final_capital([ordered[i] for i in p], m, side) for p in perms])
        if 0.5 * mean_k >= 1 / ALPHA:
            return True
    return False


@pytest.mark.parametrize(
    "x",
    [
        [0.0, 1.0, 0.0, 0.5, 0.0, 1.0, 0.0, 0.0],
        [0.31, 0.42, 0.38, 0.5, 0.27, 0.45, 0.33, 0.4, 0.36, 0.41],
    ],
)
def test_betting_ci_matches_the_formulas(x):
    lo, hi = betting_ci(x)
    for m in np.linspace(0, 1, 41):
        if lo + 1e-4 < m < hi - 1e-4:
            assert not rejected_by_the_paper(x, m), m
        elif m < lo - 1e-4 or m > hi + 1e-4:
            assert rejected_by_the_paper(x, m), m
    assert 0.0 <= lo <= np.mean(x) <= hi <= 1.0


def test_betting_ci_respects_another_range():
    lo, hi = betting_ci([2.0, 3.0, 4.0, 3.5], low=2.0, high=4.0)
    assert 2.0 <= lo < 3.125 < hi <= 4.0


def tasks_from_means(ids, means, trials=1, clusters=None):
    return [
        TaskTrials(
            id=i,
            cluster=None if clusters is None else clusters[k],
            statuses=["ok"] * trials,
            rewards=[m] * trials,
        )
        for k, (i, m) in enumerate(zip(ids, means, strict=True))
    ]


def test_issue_1_sorted_easy_hard_ids_give_the_interleaved_interval():
    # §1: easy-00..09 at 1.0 and hard-00..09 at 0.0 printed (0.49999, 0.838) in id order.
    ids = [f"easy-{i:02d}" for i in range(10)] + [f"hard-{i:02d}" for i in range(10)]
    sorted_r = aggregate(tasks_from_means(ids, [1.0] * 10 + [0.0] * 10))
    inter_ids = [f"t{i:02d}" for i in range(20)]
    inter_r = aggregate(tasks_from_means(inter_ids, [1.0, 0.0] * 10))
    assert sorted_r.ci95 == inter_r.ci95
    # 0/1 task means: Clopper-Pearson for 10 of 20, from scipy's beta quantiles
    lo, hi = sps.beta.ppf(0.025, 10, 11), sps.beta.ppf(0.975, 11, 10)
    assert sorted_r.ci95 == pytest.approx((lo, hi), abs=1e-12)
    assert sorted_r.ci95[0] < 0.5 - 0.2 and sorted_r.ci95[1] > 0.5 + 0.2  # mean well inside
    assert sorted_r.ci95_method.startswith("Clopper-Pearson")


def test_order_invariance_to_the_last_bit():
    rng = np.random.default_rng(11)
    means = list(rng.beta(0.7, 0.7, 40))
    ids = [f"{'algebra' if m > 0.5 else 'geometry'}-{i:03d}" for i, m in enumerate(means)]
    first = aggregate(tasks_from_means(ids, means, trials=2))
    order = list(range(40))
    for seed in range(3):
        random.Random(seed).shuffle(order)
        shuffled_ids = [f"x{k:03d}" for k in range(40)]  # new ids, new order, same values
        again = aggregate(tasks_from_means(shuffled_ids, [means[k] for k in order], trials=2))
        assert again.ci95 == first.ci95  # bit for bit
    assert first.ci95_method.startswith("betting, order-free")


def test_order_invariance_of_equal_size_cluster_means():
    rewards = [0.2, 0.4, 0.9, 0.7, 0.1, 0.3, 0.8, 1.0, 0.5, 0.6]
    clusters = ["a", "a", "b", "b", "c", "c", "d", "d", "e", "e"]
    r1 = aggregate(tasks_from_means([f"t{i}" for i in range(10)], rewards, clusters=clusters))
    rev = list(reversed(range(10)))
    r2 = aggregate(
        tasks_from_means(
            [f"u{i}" for i in range(10)],
            [rewards[i] for i in rev],
            clusters=[clusters[i] for i in rev],
        )
    )
    assert r1.ci95 == r2.ci95  # bit for bit
    # the cluster means (5 of them: above Anderson's n ≤ 4, the betting interval)
    assert r1.ci95 == pytest.approx(betting_ci([0.3, 0.8, 0.2, 0.9, 0.55]), abs=1e-9)


def demo_restarts():
    """The demo's restarts: 8 task means near 0.988, from 3 trials each."""
    trials = [[0.99, 0.985, 0.989], [0.988, 0.99, 0.986], [0.987, 0.989, 0.99]] * 3
    return [
        TaskTrials(id=f"t{i}", statuses=["ok"] * 3, rewards=row) for i, row in enumerate(trials[:8])
    ]


def test_issue_2_demo_lower_bound_is_close_to_what_8_tasks_allow():
    r = aggregate(demo_restarts())
    mean = r.reward
    ceiling = mean * 0.025 ** (1 / 8)  # no valid distribution-free lower bound exceeds this
    assert 0.55 <= r.ci95[0] <= ceiling  # was 0.4547
    assert r.ci95[1] == 1.0


def test_issue_2_sample_size_sentence_from_the_formula():
    r = aggregate(demo_restarts())
    hidden = 1 - 0.025 ** (1 / 8)  # 0.369: what 8 tasks all near 1 cannot rule out
    n_for_10 = math.ceil(math.log(0.025) / math.log(0.9))  # 36 tasks bring it to 10 %
    expected = (
        f"the interval is wide because of the sample size: 8 tasks cannot rule out a hidden "
        f"{round(hidden * 100)}% of tasks at reward 0 (~{n_for_10} would bring that below 10%)"
    )
    assert expected in r.warnings


def test_no_sample_size_sentence_when_the_spread_sets_the_width():
    rng = np.random.default_rng(2)
    means = list(rng.uniform(0, 1, 60))
    r = aggregate(tasks_from_means([f"t{i}" for i in range(60)], means))
    assert not any("because of the sample size" in w for w in r.warnings)


@pytest.mark.parametrize("n", range(1, 9))
def test_issue_2_binary_one_trial_is_clopper_pearson_and_never_wider_than_hoeffding(n):
    half = math.sqrt(math.log(2 / ALPHA) / (2 * n))  # Hoeffding, clipped to [0, 1]
    for ones in range(n + 1):
        r = aggregate(
            tasks_from_means([f"t{i}" for i in range(n)], [1.0] * ones + [0.0] * (n - ones))
        )
        lo = 0.0 if ones == 0 else sps.beta.ppf(0.025, ones, n - ones + 1)
        hi = 1.0 if ones == n else sps.beta.ppf(0.975, ones + 1, n - ones)
        assert r.ci95 == pytest.approx((lo, hi), abs=1e-12)
        p = ones / n
        assert r.ci95[1] - r.ci95[0] <= min(1, p + half) - max(0, p - half) + 1e-12


def test_equal_clusters_interval_uses_c_minus_1_df_and_warns_below_10_clusters():
    rewards = [0.2, 0.4, 0.9, 0.7, 0.1, 0.3, 0.8, 1.0, 0.5, 0.6]
    clusters = ["a", "a", "b", "b", "c", "c", "d", "d", "e", "e"]
    tasks = [
        TaskTrials(id=f"t{i}", cluster=c, statuses=["ok"], rewards=[r])
        for i, (r, c) in enumerate(zip(rewards, clusters, strict=True))
    ]
    r = aggregate(tasks)
    assert r.stderr_method == "clustered" and r.n_clusters == 5
    half = sps.t.ppf(0.975, 4) * r.stderr  # C − 1 = 4 df, not n − 1 = 9
    assert r.ci95_t == pytest.approx((r.reward - half, r.reward + half))
    assert r.ci95_t_df == pytest.approx(4.0) and r.effective_clusters == pytest.approx(5.0)
    assert any(w.startswith("only 5 clusters") for w in r.warnings)
    # equal cluster sizes: the betting interval over the 5 cluster means
    assert r.ci95 == pytest.approx(betting_ci([0.3, 0.8, 0.2, 0.9, 0.55]), abs=1e-9)
    assert "over clusters" in r.ci95_method


def test_the_summary_artifact_shows_the_sample_size_sentence():
    from honesteval.views.text import summary_markdown

    text = summary_markdown(aggregate(demo_restarts(), candidate="restarts"))
    assert "- the interval is wide because of the sample size: 8 tasks cannot rule out" in text
