"""bench/small_val_gate.py's level estimator: the importance-sampling weights it averages have
exactly the promotion probability as their mean under the tilted law.

The bench itself (a million simulated confirmations) never runs in the suite; here every path
of a small confirmation (2 tasks, 3 rounds: 3⁶ = 729 paths) is enumerated, so the identity
E_Q[1{promote}·LR_τ] = P(promote) is checked without Monte Carlo error, P computed directly
from the product of the trials' probabilities.
"""

from __future__ import annotations

import itertools
from types import ModuleType

import numpy as np
import pytest

from honesteval.stats import promoted_paths
from tests.helpers import load_bench


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_bench("small_val_gate")


TASKS, ROUNDS = 2, 3
BEST = np.array([0.5, 0.6])
CAND = np.array([0.8, 0.3])  # +0.3 and −0.3: mean gain 0 over the two tasks


def _all_paths() -> np.ndarray:
    cells = itertools.product((-1.0, 0.0, 1.0), repeat=TASKS * ROUNDS)
    return np.array(list(cells)).reshape(-1, ROUNDS, TASKS)


def _law(d: np.ndarray, up: np.ndarray, down: np.ndarray) -> np.ndarray:
    """The probability of each whole path when each trial is +1/−1/0 with up/down/rest."""
    p = np.where(d > 0, up, np.where(d < 0, down, 1.0 - up - down))
    out: np.ndarray = p.reshape(len(d), -1).prod(axis=-1)
    return out


@pytest.mark.parametrize("theta", [0.0, 0.5, 1.2])
@pytest.mark.parametrize("alpha", [0.25, 0.1])
def test_the_weights_average_to_the_promotion_probability(
    bench: ModuleType, theta: float, alpha: float
) -> None:
    d = _all_paths()
    up = CAND * (1 - BEST)  # the candidate passes, the best fails
    down = BEST * (1 - CAND)
    promoted, _ = promoted_paths(d, alpha)
    exact = float((_law(d, up, down) * promoted).sum())
    assert 0 < exact <= alpha  # the level holds, and the case is not vacuous

    q_up, q_down, log_m = bench.tilt(BEST[None], CAND[None], theta)
    weights = bench.promotion_weights(d, np.repeat(log_m, len(d), axis=0), theta, alpha)
    assert float((_law(d, q_up[0], q_down[0]) * weights).sum()) == pytest.approx(exact, rel=1e-12)


def test_a_tilt_moves_the_trials_towards_the_candidate(bench: ModuleType) -> None:
    q_up, q_down, log_m = bench.tilt(BEST, CAND, 0.7)
    up, down = CAND * (1 - BEST), BEST * (1 - CAND)
    m = up * np.exp(0.7) + down * np.exp(-0.7) + (1 - up - down)
    assert np.allclose(q_up, up * np.exp(0.7) / m)
    assert np.allclose(q_down, down * np.exp(-0.7) / m)
    assert np.allclose(log_m, np.log(m))
    assert np.all(q_up - q_down > up - down)  # the tilted mean is larger on every task
