"""The clustered mean's CR2 SE and Bell–McCaffrey df against their dense matrix definitions,
the effective number of clusters, Anderson's interval against a loop over its formula, and
the same bits in any order of tasks and trials on every path of ``aggregate`` and the gate.

Expected values come from the definitions (dense hat matrices, ``scipy.linalg.sqrtm``,
``scipy.stats.ksone``), never from the code's output.
"""

from __future__ import annotations

import itertools
import math
import random

import numpy as np
import pytest
from scipy import linalg
from scipy import stats as sps

from honesteval.models import GateConfig, TaskTrials
from honesteval.stats import aggregate, decide
from honesteval.stats._estimators import (
    WORKING_ICC,
    bell_mccaffrey_df,
    clustered_mean,
    effective_clusters,
)
from honesteval.stats._interval import ANDERSON_MAX_N, anderson_ci, reported_ci


def dense_cr2(y: np.ndarray, labels: list[int]) -> tuple[float, np.ndarray]:
    """CR2 of the intercept-only regression from its definition, and the matrix G whose
    columns g_c give V = Σ (g_c'y)² (Bell & McCaffrey 2002; Pustejovsky & Tipton 2018)."""
    n = y.size
    x = np.ones((n, 1))
    bread = np.linalg.inv(x.T @ x)
    hat = x @ bread @ x.T
    resid = (np.eye(n) - hat) @ y
    lab = np.asarray(labels)
    columns, meat = [], 0.0
    for c in sorted(set(labels)):
        idx = np.flatnonzero(lab == c)
        adjust = np.real(linalg.sqrtm(np.linalg.inv(np.eye(idx.size) - hat[np.ix_(idx, idx)])))
        u = (bread @ x[idx].T @ adjust)[0]  # the cluster's weight on its residuals
        meat += float(u @ resid[idx]) ** 2
        columns.append((np.eye(n) - hat)[:, idx] @ u)
    return math.sqrt(meat), np.stack(columns, axis=1)


def dense_bm_df(labels: list[int], rho: float) -> float:
    """(tr M)²/tr(M²), M = G'ΩG, Ω equicorrelated (rho) within a cluster."""
    n = len(labels)
    _, g = dense_cr2(np.zeros(n), labels)
    lab = np.asarray(labels)
    omega = (1 - rho) * np.eye(n) + rho * (lab[:, None] == lab[None, :])
    m = g.T @ omega @ g
    return float(np.trace(m) ** 2 / np.trace(m @ m))


def labels_of(sizes: list[int]) -> list[int]:
    return [c for c, size in enumerate(sizes) for _ in range(size)]


UNEQUAL = [[20] + [1] * 10, [10, 10] + [1] * 10, [8, 4, 2, 1, 1, 1], [3, 2, 2, 1], [5, 1]]


@pytest.mark.parametrize("sizes", [*UNEQUAL, [4, 4, 4], [1] * 7])
def test_cr2_se_is_the_dense_definition(sizes):
    rng = np.random.default_rng(len(sizes))
    labels = labels_of(sizes)
    y = rng.random(len(labels))
    expected, _ = dense_cr2(y, labels)
    assert clustered_mean(y, labels).se == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("sizes", UNEQUAL)
@pytest.mark.parametrize("rho", [0.0, 0.3, 1.0])
def test_bell_mccaffrey_df_is_the_dense_definition(sizes, rho):
    assert bell_mccaffrey_df(sizes, rho) == pytest.approx(dense_bm_df(labels_of(sizes), rho))


def test_bell_mccaffrey_df_is_c_minus_1_with_equal_sizes_and_n_minus_1_with_singletons():
    for rho in (0.0, 0.5, 1.0):
        assert bell_mccaffrey_df([3] * 6, rho) == pytest.approx(5.0)
    assert bell_mccaffrey_df([1] * 12, 0.0) == pytest.approx(11.0)
    assert bell_mccaffrey_df([7], 0.2) == 0.0


def test_effective_clusters_of_the_issues_world():
    assert effective_clusters([20] + [1] * 10) == pytest.approx(900 / 410)  # 2.2, not 11
    assert effective_clusters([5] * 6) == pytest.approx(6.0)


def test_bell_mccaffrey_df_does_not_rise_with_the_correlation():
    # so the working model's rho = 1 is its smallest df, the one the interval uses
    for sizes in UNEQUAL:
        dfs = [dense_bm_df(labels_of(sizes), rho) for rho in np.linspace(0.0, 1.0, 6)]
        assert all(a >= b - 1e-9 for a, b in itertools.pairwise(dfs)), sizes
        assert bell_mccaffrey_df(sizes, WORKING_ICC) == pytest.approx(dfs[-1])


def issues_world(rng: np.random.Generator) -> list[TaskTrials]:
    """One cluster of 20 tasks beside 10 singletons, 3 binary trials (the issue's §1)."""
    tasks = []
    for i in range(30):
        cluster = "big" if i < 20 else None
        p = 0.3 if i < 20 else 0.6
        tasks.append(
            TaskTrials(
                id=f"t{i:02d}",
                cluster=cluster,
                statuses=["ok"] * 3,
                rewards=[float(v) for v in rng.random(3) < p],
            )
        )
    return tasks


def test_unequal_clusters_get_cr2_bell_mccaffrey_and_a_too_narrow_warning():
    tasks = issues_world(np.random.default_rng(3))
    r = aggregate(tasks)
    means = np.array([sum(t.rewards) / 3 for t in tasks])
    labels = [0] * 20 + list(range(1, 11))
    se, _ = dense_cr2(means, labels)
    assert r.stderr == pytest.approx(se)
    df = dense_bm_df(labels, 1.0)  # the working model's smallest df
    assert r.ci95_t_df == pytest.approx(df)
    half = sps.t.ppf(0.975, df) * se
    assert r.ci95_t == pytest.approx((means.mean() - half, means.mean() + half))
    assert r.ci95 == pytest.approx((max(0, means.mean() - half), min(1, means.mean() + half)))
    assert "Bell-McCaffrey" in r.ci95_method and "CR2" in r.ci95_method
    assert r.effective_clusters == pytest.approx(900 / 410)
    warning = next(w for w in r.warnings if w.startswith("only 2.2 effective clusters (of 11)"))
    assert "too narrow" in warning
    assert not any("wide because of the sample size" in w for w in r.warnings)


def anderson_by_hand(x: list[float], alpha: float = 0.05) -> tuple[float, float]:
    """Anderson (1969): the means of the distribution functions within F_n ± ε, ε the exact
    one-sided Kolmogorov–Smirnov quantile; integrated gap by gap in a plain loop."""
    n = len(x)
    eps = sps.ksone.isf(alpha / 2, n)
    xs = [0.0, *sorted(x), 1.0]
    lower = upper = 0.0
    for i in range(n + 1):
        gap = xs[i + 1] - xs[i]
        lower += gap * max(0.0, 1 - min(i / n + eps, 1.0))  # 1 − F, F at its largest
        upper += gap * (1 - max(i / n - eps, 0.0))  # 1 − F, F at its smallest
    return lower, upper


@pytest.mark.parametrize("x", [[0.3], [0.2, 0.7], [0.3, 0.5, 0.9], [0.1, 0.1, 0.4, 0.95]])
def test_anderson_interval_is_the_formula(x):
    assert anderson_ci(x) == pytest.approx(anderson_by_hand(x), abs=1e-9)


def test_the_reported_interval_is_anderson_up_to_n_4_then_betting():
    assert ANDERSON_MAX_N == 4
    for n in (1, 2, 3, 4):
        x = [0.25 + 0.1 * i for i in range(n)]
        r = reported_ci(x, "tasks")
        assert r.method.startswith("Anderson") and r.bounds == pytest.approx(anderson_by_hand(x))
    assert reported_ci([0.3, 0.4, 0.5, 0.6, 0.7], "tasks").method.startswith("betting")
    assert reported_ci([0.0, 1.0, 1.0], "tasks").method.startswith("Clopper-Pearson")


# --- the same bits in any order --------------------------------------------------------


def world(kind: str, rng: random.Random) -> list[TaskTrials]:
    """A split with ragged trials, failed and infra_error trials, tasks missing whole, and
    (by ``kind``) no clusters, equal clusters or unequal ones."""
    tasks = []
    for i in range(14):
        k = rng.choice([2, 3, 5])  # ragged
        statuses = [rng.choice(["ok", "ok", "ok", "failed", "infra_error"]) for _ in range(k)]
        if i in (3, 9):
            statuses = ["infra_error"] * k  # missing whole
        rewards = [
            None if s == "infra_error" else round(rng.random(), rng.choice([1, 3, 17]))
            for s in statuses
        ]
        cluster = {
            "tasks": None,
            "equal": f"c{i % 7}",
            "unequal": "big" if i < 8 else (None if i % 2 else f"c{i}"),
        }[kind]
        tasks.append(
            TaskTrials(id=f"t{i:02d}", cluster=cluster, statuses=statuses, rewards=rewards)
        )
    return tasks


def shuffled(tasks: list[TaskTrials], rng: random.Random) -> list[TaskTrials]:
    """The same tasks in another order, each task's trials in another order."""
    out = []
    for t in rng.sample(tasks, len(tasks)):
        order = rng.sample(range(len(t.statuses)), len(t.statuses))
        out.append(
            TaskTrials(
                id=t.id,
                cluster=t.cluster,
                statuses=[t.statuses[j] for j in order],
                rewards=[t.rewards[j] for j in order],
            )
        )
    return out


def printed_bits(r) -> str:
    """Every figure ``--json`` prints, floats as their exact hex."""

    def bits(v):
        if isinstance(v, float):
            return v.hex()
        if isinstance(v, tuple | list):
            return [bits(e) for e in v]
        if isinstance(v, dict):
            return {k: bits(e) for k, e in sorted(v.items())}
        return v

    fields = [
        "reward",
        "stderr",
        "stderr_trials",
        "ci95",
        "ci95_t",
        "ci95_t_df",
        "ci95_method",
        "effective_clusters",
        "pass_hat_k",
        "pass_at_k",
        "reward_bounds",
        "pass_hat_k_bounds",
        "warnings",
    ]
    return repr({f: bits(getattr(r, f)) for f in fields})


@pytest.mark.parametrize("kind", ["tasks", "equal", "unequal"])
@pytest.mark.parametrize("method", ["auto", "combined"])
def test_any_order_of_tasks_and_trials_gives_the_same_bits(kind, method):
    rng = random.Random(f"{kind}-{method}")
    tasks = world(kind, rng)
    first = aggregate(tasks, stderr_method=method)
    assert first.reward_bounds is not None  # tasks missing whole: the bounds path runs too
    for _ in range(20):
        again = aggregate(shuffled(tasks, rng), stderr_method=method)
        assert printed_bits(again) == printed_bits(first)


@pytest.mark.parametrize("kind", ["tasks", "unequal"])
def test_the_gate_gives_the_same_bits_in_any_order(kind):
    rng = random.Random(kind)
    cur_tasks, cand_tasks = world(kind, rng), world(kind, rng)
    cfg = GateConfig(alpha=0.05)
    first = decide(aggregate(cur_tasks), aggregate(cand_tasks), cfg)
    for _ in range(10):
        d = decide(aggregate(shuffled(cur_tasks, rng)), aggregate(shuffled(cand_tasks, rng)), cfg)
        assert (d.delta, d.se, d.bar, d.mde, d.reason) == (
            first.delta,
            first.se,
            first.bar,
            first.mde,
            first.reason,
        )
