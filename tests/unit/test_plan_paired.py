"""``plan`` prices the paired gate that runs (issue 57): before any paired comparison it takes
a pair's variances from the best's result (task difficulty cancels, both sides' trial noise
stays), and its MDE at 12 tasks × 10 continuous trials is within 0.1 of the gain the gate's
own rules promote with 80 % probability (bench/plan_mde.py, a light run)."""

from __future__ import annotations

from types import ModuleType

import numpy as np
import pytest

from honesteval.gating.power import plan_sample_size
from honesteval.project.loader import load_project
from honesteval.store.state_dir import Store
from tests.helpers import load_bench


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_bench("plan_mde")


def test_plan_takes_a_pairs_variances_from_the_best_alone(bench, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    root = bench.make_project(3, "pass", trials=4)
    project = load_project(root)
    project.frozen_split()
    rewards = np.array([[0.0, 1.0, 1.0, 0.0], [0.2, 0.4, 0.6, 0.8], [1.0, 1.0, 1.0, 1.0]])
    Store(project.state_dir).write_result(bench.simulated_result("c", rewards, 0))
    report = plan_sample_size(root, 0.2)
    # within a task: the mean sample variance (1/3, 0.0667, 0) of one side, twice (both sides);
    # between tasks 0: task difficulty (means 0.5, 0.5, 1.0) is on both sides of a pair
    within = np.mean([np.var(row, ddof=1) for row in rewards])
    assert report["sigma2"] == pytest.approx(2 * within)
    assert report["omega2"] == 0.0 and report["omega2_se"] == 0.0


def test_plans_mde_is_within_0_1_of_the_gain_the_gate_promotes_80_percent(
    bench, tmp_path, monkeypatch
) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    mde = bench.plan_mde(12, 10, False, seed=1210)
    assert mde is not None
    calls = 400

    def power(gain: float) -> float:
        return bench.gate_power(12, 10, False, gain, calls, seed=7)

    # the gain promoted 80 % of the time lies in [MDE − 0.1, MDE + 0.1] ...
    assert power(mde + 0.1) >= 0.8
    # ... and the MDE is about the 80 % gain, not a gain the gate always promotes (the doubled
    # unpaired variance gave 0.1626 in the world, where +0.1 was promoted 100 of 100)
    assert 0.65 <= power(mde) <= 0.95
    assert mde - 0.1 <= 0 or power(mde - 0.1) < 0.8
