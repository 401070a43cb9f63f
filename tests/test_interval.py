"""The betting interval (Waudby-Smith & Ramdas 2024) against a direct loop over the paper's
formulas, and the clustered interval's degrees of freedom."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from honesteval.models import TaskTrials
from honesteval.stats import aggregate, betting_ci


def rejected_by_the_paper(x: list[float], m: float, alpha: float = 0.05) -> bool:
    """Hedged capital with predictable plug-in bets (fixed n), c = 1/2, any time t: plain loops."""
    n = len(x)
    mu_sum, var_sum, kp, kn = 0.0, 0.0, 1.0, 1.0
    sigma2_prev = 0.25
    for t, xi in enumerate(x, start=1):
        lam = math.sqrt(2 * math.log(2 / alpha) / (n * sigma2_prev))
        lam_p = min(lam, 0.5 / m) if m > 0 else lam
        lam_n = min(lam, 0.5 / (1 - m)) if m < 1 else lam
        kp *= 1 + lam_p * (xi - m)
        kn *= 1 - lam_n * (xi - m)
        if max(0.5 * kp, 0.5 * kn) >= 1 / alpha:
            return True
        mu_sum += xi
        mu = (0.5 + mu_sum) / (t + 1)
        var_sum += (xi - mu) ** 2
        sigma2_prev = (0.25 + var_sum) / (t + 1)
    return False


@pytest.mark.parametrize(
    "x",
    [
        [0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0],
        [0.31, 0.42, 0.38, 0.5, 0.27, 0.45, 0.33, 0.4, 0.36, 0.41],
        list(np.random.default_rng(5).beta(0.5, 3.0, 30)),
    ],
)
def test_betting_ci_matches_the_formulas(x):
    lo, hi = betting_ci(x)
    for m in np.linspace(0, 1, 401):
        if lo + 1e-5 < m < hi - 1e-5:
            assert not rejected_by_the_paper(x, m), m
        elif m < lo - 1e-5 or m > hi + 1e-5:
            assert rejected_by_the_paper(x, m), m
    assert 0.0 <= lo <= np.mean(x) <= hi <= 1.0


def test_betting_ci_respects_another_range():
    lo, hi = betting_ci([2.0, 3.0, 4.0, 3.5], low=2.0, high=4.0)
    assert 2.0 <= lo < 3.125 < hi <= 4.0


def test_clustered_interval_uses_c_minus_1_df_and_warns_below_10_clusters():
    rewards = [0.2, 0.4, 0.9, 0.7, 0.1, 0.3, 0.8, 1.0]
    clusters = ["a", "a", "b", "b", "c", "c", "d", "d"]
    tasks = [
        TaskTrials(id=f"t{i}", cluster=c, statuses=["ok"], rewards=[r])
        for i, (r, c) in enumerate(zip(rewards, clusters, strict=True))
    ]
    r = aggregate(tasks)
    assert r.stderr_method == "clustered" and r.n_clusters == 4
    half = sps.t.ppf(0.975, 3) * r.stderr  # C − 1 = 3 df, not n − 1 = 7
    assert r.ci95_t == pytest.approx((r.reward - half, r.reward + half))
    assert any(w.startswith("only 4 clusters") for w in r.warnings)
    # equal cluster sizes: the betting interval over the 4 cluster means
    assert r.ci95 == pytest.approx(betting_ci([0.3, 0.8, 0.2, 0.9]), abs=1e-5)
    assert "over clusters" in r.ci95_method
