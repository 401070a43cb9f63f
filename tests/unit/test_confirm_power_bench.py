"""bench/confirm_power.py's bet table: its fixed-n reference and its "before" bet are what they
say they are.

The bench itself (thousands of simulated confirmations a world) never runs in the suite; here
the fixed-n z test's trials are recomputed from the closed-form moments of the issue's worlds
(scipy's quadrature over the best side's rate), and the "aGRAPA (before)" baseline from the
rule the confirmation used before issue 55, written as a loop.
"""

from __future__ import annotations

import math
from types import ModuleType

import numpy as np
import pytest
from scipy import integrate
from scipy.stats import norm

from tests.helpers import load_bench


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_bench("confirm_power")


def _z_trials(gain: float) -> int:
    """Binary rewards, best side p ~ U(0.2, 0.8), candidate min(p + gain, 1): the one-sided z
    test at alpha 0.010937 and 80 % power needs ((z_α + z_β)·σ / μ)² paired trials."""

    def q(p: float) -> float:
        return min(p + gain, 1.0)

    def mean(f: object) -> float:
        return integrate.quad(f, 0.2, 0.8, points=[1 - gain])[0] / 0.6  # type: ignore[arg-type]

    mu = mean(lambda p: q(p) - p)
    var = mean(lambda p: p * (1 - p) + q(p) * (1 - q(p)))
    return math.ceil((norm.isf(0.010937) + norm.isf(0.2)) ** 2 * var / mu**2)


@pytest.mark.parametrize(("tasks", "gain", "issue"), [(12, 0.2, 99), (7, 0.5, 16), (20, 0.1, 423)])
def test_the_fixed_n_reference_is_the_z_tests(bench, tasks, gain, issue):
    expected = _z_trials(gain)
    assert expected == issue  # the issue's table
    assert bench.fixed_n(bench.LAWS["binary"], tasks, gain)[0] == expected


def test_the_before_bet_is_the_former_rule(bench):
    """λ_1 = 0.2, then clip(m/(v + m²), 0, 0.8) from every earlier trial's mean m and variance v,
    one bet a round."""
    rng = np.random.default_rng(4)
    d = rng.choice([-1.0, 0.0, 1.0], p=[0.2, 0.4, 0.4], size=(3, 6, 5))
    for path, got in zip(d, bench.agrapa_log_e(d, d[:, :0]), strict=True):
        log_e, seen, expected = 0.0, [], []
        for round_deltas in path:
            if seen:
                m = sum(seen) / len(seen)
                v = sum((x - m) ** 2 for x in seen) / len(seen)
                bet = min(max(m / (v + m * m), 0.0), 0.8) if v + m * m > 0 else 0.0
            else:
                bet = 0.2
            log_e += sum(math.log1p(bet * x) for x in round_deltas)
            expected.append(log_e)
            seen += list(round_deltas)
        assert got == pytest.approx(expected, rel=1e-12)
