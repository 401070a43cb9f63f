"""``plan`` accounts for a vetoing no_regression rule."""

from __future__ import annotations

import pytest

from honesteval.gating.power import veto_survival
from honesteval.models import GateConfig
from tests.gate_helpers import result


def test_veto_survival_by_hand():
    best = result([1.0, 1.0, 0.5], name="best", trials=3)  # two tasks passed, 3 of 3 trials
    # Laplace per-trial pass rate (3 + 1) / (3 + 2) = 0.8; all 3 trials on both tasks: 0.8^6
    assert veto_survival(best, GateConfig(no_regression="passed"), 3) == pytest.approx(0.8**6)
    assert veto_survival(best, GateConfig(no_regression="any"), 3) == pytest.approx(0.8**6)
    assert veto_survival(best, GateConfig(), 3) is None  # report: no veto, no cost
    assert veto_survival(best, GateConfig(no_regression="off"), 3) is None


def test_plan_search_finds_the_smallest_size_and_never_evaluates_far_beyond_it():
    from honesteval.gating.power import _smallest

    asked: list[int] = []

    def works(n: int) -> bool:
        asked.append(n)
        return n >= 357

    assert _smallest(works, 2, 20_000) == 357
    assert max(asked) < 2 * 357  # doubling, not a first look at 20,000
    assert _smallest(lambda n: n >= 30_000, 2, 20_000) is None
    assert _smallest(lambda n: True, 5, 9) == 5
