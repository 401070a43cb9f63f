"""The bundled circle-packing example: a scorer that cannot be fooled, stochastic solvers."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import numpy as np
import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "circle_packing"


def load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def scoring():
    return load("cp_scoring", EXAMPLE / "scoring.py")


@pytest.fixture(scope="module")
def solvers():
    sys.path.insert(0, str(EXAMPLE))
    try:
        yield {
            n: load(f"cp_{n}", EXAMPLE / "candidates" / n / "solver.py")
            for n in ("seed", "restarts")
        }
    finally:
        sys.path.remove(str(EXAMPLE))


def grid(k: int) -> list[list[float]]:
    """k×k equal circles on a grid: valid, sum of radii k/2."""
    r = 1 / (2 * k)
    return [[r * (2 * i + 1), r * (2 * j + 1), r] for i in range(k) for j in range(k)]


def test_reference_uses_published_values_and_a_smooth_estimate(scoring):
    assert scoring.reference(26) == 2.635 and scoring.reference(32) == 2.937
    c26, c32 = 2.635 / math.sqrt(26), 2.937 / math.sqrt(32)
    assert scoring.reference(29) == pytest.approx((c26 + c32) / 2 * math.sqrt(29))


def test_valid_grid_is_rewarded_by_its_sum(scoring):
    task = {"input": {"n": 25}}
    out = scoring.score(task, grid(5))
    assert out["reward"] == pytest.approx(2.5 / scoring.reference(25))


@pytest.mark.parametrize(
    "mutate,problem",
    [
        (lambda p: p[:-1], "expected 25 circles"),
        (lambda p: [[0.05, 0.05, 0.1], *p[1:]], "leaves the unit square"),
        (lambda p: [[p[1][0], p[1][1] - 1e-06, p[1][2]], *p[1:]], "overlap"),
        (lambda p: [[0.1, 0.1, -0.01], *p[1:]], "negative"),
        (lambda p: [["a", 0.1, 0.1], *p[1:]], "not [x, y, r]"),
        (lambda p: None, "expected 25 circles"),
    ],
)
def test_invalid_packings_score_zero(scoring, mutate, problem):
    out = scoring.score({"input": {"n": 25}}, mutate(grid(5)))
    assert out["reward"] == 0.0 and problem in out["feedback"]


def test_touching_within_tolerance_is_valid(scoring):
    p = [[0.25, 0.5, 0.25], [0.75, 0.5, 0.25 + 5e-10]]
    assert scoring.validate(2, p) is None


def test_solvers_are_valid_seeded_and_restarts_no_worse(scoring, solvers):
    n = 20
    seed_a = solvers["seed"].solve(n, 0)
    seed_b = solvers["seed"].solve(n, 1)
    assert scoring.validate(n, [list(c) for c in seed_a]) is None
    assert json.dumps(seed_a) != json.dumps(seed_b)  # the seed matters
    assert json.dumps(seed_a) == json.dumps(solvers["seed"].solve(n, 0))  # and reproduces
    best = solvers["restarts"].solve(n, 0)
    assert scoring.validate(n, [list(c) for c in best]) is None
    # restarts' first start is seed's only start (same generator), and it keeps the best.
    assert sum(c[2] for c in best) >= sum(c[2] for c in seed_a) - 1e-12
    assert np.isfinite([c for circle in best for c in circle]).all()


@pytest.mark.slow
def test_demo_runs_both_candidates_end_to_end(tmp_path, cli_env):
    from tests.helpers import run_cli

    proc = run_cli(
        "demo",
        "--dir",
        str(tmp_path),
        "--trials",
        "1",
        "--json",
        env=cli_env,
        cwd=EXAMPLE.parents[1],
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    results, (baseline, decision) = out["results"], out["decisions"]
    assert [r["candidate"] for r in results] == ["seed", "restarts"]
    for r in results:
        assert r["n_tasks"] == 8 and r["coverage"] == 1.0
        assert r["trials_ok"] == 8 * r["n_trials"] and 0.0 <= r["reward"] <= 1.0
    # it ends with the gate's verdict between the two: 'seed' the baseline, 'restarts' judged
    assert baseline["baseline"] and baseline["candidate"] == "seed"
    assert decision["candidate"] == "restarts" and decision["current"] == "seed"
    # it said what it would run before running it
    assert "'seed' is evaluated on val (8 tasks × 1 trials" in proc.stderr
    assert decision["stage"] == "single"  # one stage, said so
