"""The promoted gain's interval at the confirmation's stop (stats._gain_sequence).

Expected bounds come from a direct loop over the published bet and a grid scan of the capital,
coverage from seeded Monte Carlo through the real stopping rule with its binomial standard
error; never from the code's own output.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from honesteval.models import GateConfig, GateDecision
from honesteval.stats import promoted_paths, rounds_decide
from honesteval.stats._gain_sequence import gain_bounds, gain_interval
from honesteval.views.text import decision_lines
from tests.gate_helpers import rounds_result


def reference_lower(d: np.ndarray, alpha: float = 0.05) -> float:
    """The lower bound by hand: y = (d + 1)/2; λ_r = min(0.75, sqrt(2 log(2/α) / (σ² n
    log(1 + n)))), n the trials through round r, σ² = (1/4 + Σ (y − ȳ)² over the earlier
    trials) / (earlier + 1); the smallest m on a fine grid with Σ log(1 + λ_r (y − m)) below
    log(2/α), back on the Δ scale."""
    y = (d + 1) / 2
    rounds, tasks = y.shape
    bets = []
    for r in range(rounds):
        earlier = y[:r].ravel()
        centred = float(((earlier - earlier.mean()) ** 2).sum()) if earlier.size else 0.0
        var = (0.25 + centred) / (earlier.size + 1)
        n = tasks * (r + 1)
        bets.append(min(0.75, math.sqrt(2 * math.log(2 / alpha) / (var * n * math.log1p(n)))))
    grid = np.linspace(0.0, 1.0, 200_001)
    log_k = sum(np.log1p(bets[r] * (y[r][:, None] - grid)).sum(axis=0) for r in range(rounds))
    kept = grid[log_k < math.log(2 / alpha)]
    return 2 * float(kept[0]) - 1


_split = rounds_result


def test_the_bounds_are_the_published_bets_capital_crossing():
    rng = np.random.default_rng(3)
    d = np.clip(rng.normal(0.15, 0.4, (4, 12)), -1, 1)
    low, high = gain_bounds(d[None], d[None], [4])
    assert low[0] == pytest.approx(reference_lower(d), abs=2e-5)
    assert high[0] == pytest.approx(-reference_lower(-d), abs=2e-5)  # the mirror image
    assert low[0] < d.mean() < high[0]


def test_rounds_past_the_stop_do_not_count():
    rng = np.random.default_rng(4)
    d = rng.uniform(-1, 1, (1, 6, 7))
    cut = gain_bounds(d[:, :2], d[:, :2], [2])
    stopped = gain_bounds(d, d, [2])
    np.testing.assert_allclose(stopped, cut)


def test_a_missing_trial_widens_both_sides():
    cand = np.full((3, 10), 0.8)
    cur = np.full((3, 10), 0.3)
    full = gain_interval(cand, cur, 3)
    cand[1, 4] = np.nan
    lacking = gain_interval(cand, cur, 3)
    assert lacking.low < full.low and lacking.high > full.high
    assert full.raw == pytest.approx(0.5) and lacking.raw == pytest.approx(0.5)


def test_it_covers_the_mean_gain_at_the_confirmations_stop():
    """Binary rewards, 12 tasks, gain 0.16 (near the MDE at alpha_1): among promotions the
    interval holds ≥ 95 % − 3 MC SE at the data-chosen stop."""
    rng = np.random.default_rng(35)
    p = rng.uniform(0.2, 0.7, (4_000, 1, 12))
    shape = (4_000, 30, 12)
    d = (rng.random(shape) < p + 0.16).astype(float) - (rng.random(shape) < p)
    promoted, used = promoted_paths(d, 0.0109)
    low, high = gain_bounds(d[promoted], d[promoted], used[promoted])
    n = int(promoted.sum())
    coverage = float(((low <= 0.16) & (high >= 0.16)).mean())
    assert n > 2_000
    assert coverage >= 0.95 - 3 * math.sqrt(0.95 * 0.05 / n)


def test_a_promotion_reports_the_interval_and_says_what_it_is():
    cand, cur = np.ones((5, 7)), np.zeros((5, 7))
    d = rounds_decide(_split(cur, "best"), _split(cand, "new"), GateConfig(), 0.0109, budget=30)
    assert d.confirm_stop == "promote" and d.confirm_rounds == 2
    assert d.gain_cs95 is not None
    expected_low = reference_lower(np.ones((2, 7)))
    assert d.gain_cs95[0] == pytest.approx(expected_low, abs=2e-5)
    assert d.gain_cs95[1] == pytest.approx(1.0, abs=1e-6)
    shown = GateDecision.model_validate(
        d.model_dump() | {"stage": "confirm", "online": {"tests": 1}, "level": 0.0109}
    )
    gain = next(line for line in decision_lines(shown) if line.lstrip().startswith("gain"))
    assert "Δ +1.0000 a trial on these val tasks (biased upwards by the stop)" in gain
    assert round(expected_low, 3) == 0.196  # printed to 4 decimals: [+0.19xx
    assert "95% interval [+0.19" in gain
    assert ", +1.0000], valid at the confirmation's data-chosen stop" in gain


def test_a_running_confirmation_has_no_interval_yet():
    rng = np.random.default_rng(6)
    cur = (rng.random((1, 12)) < 0.5).astype(float)
    d = rounds_decide(_split(cur, "best"), _split(cur.copy(), "new"), GateConfig(), 0.0109, 30)
    assert d.confirm_stop is None and d.gain_cs95 is None
