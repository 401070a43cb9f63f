"""Statistics against independent computations: scipy, closed forms, hand-worked cases."""

from __future__ import annotations

import gc
import math
import random

import numpy as np
import pytest
from scipy import stats as sps

from honesteval.models import TaskTrials
from honesteval.stats import (
    aggregate,
    betting_ci,
    bootstrap_ci,
    clustered_stderr,
    combined_stderr,
    pass_at_k,
    pass_hat_k,
    stderr,
)


def tt(tid: str, statuses: list[str], rewards: list[float | None], cluster: str | None = None):
    return TaskTrials(id=tid, statuses=statuses, rewards=rewards, cluster=cluster)


class TestStderr:
    def test_matches_scipy_sem(self):
        xs = [0.1, 0.5, 0.9, 0.3, 0.35]
        assert stderr(xs) == pytest.approx(sps.sem(xs))

    def test_small_n_is_zero(self):
        assert stderr([]) == 0.0
        assert stderr([0.4]) == 0.0

    def test_hand_worked(self):
        # [0, 1]: sd = sqrt(0.5), SE = sqrt(0.5)/sqrt(2) = 0.5
        assert stderr([0.0, 1.0]) == pytest.approx(0.5)


class TestPassK:
    @pytest.mark.parametrize("n,c,k", [(5, 3, 1), (5, 3, 2), (5, 3, 3), (10, 7, 4), (4, 4, 4)])
    def test_pass_hat_k_closed_form(self, n, c, k):
        rewards = [1.0] * c + [0.0] * (n - c)
        assert pass_hat_k(rewards, k) == pytest.approx(math.comb(c, k) / math.comb(n, k))

    @pytest.mark.parametrize("n,c,k", [(5, 3, 1), (5, 1, 2), (10, 2, 4), (6, 0, 3)])
    def test_pass_at_k_closed_form(self, n, c, k):
        rewards = [1.0] * c + [0.0] * (n - c)
        expected = 1 - math.comb(n - c, k) / math.comb(n, k)
        assert pass_at_k(rewards, k) == pytest.approx(expected)

    def test_hand_worked(self):
        # 2 passes of 3: pass^2 = 1 pair of 3 = 1/3; pass@2 = 1 - 0/3 = 1 (n-c = 1 < 2)
        assert pass_hat_k([1, 1, 0], 2) == pytest.approx(1 / 3)
        assert pass_at_k([1, 1, 0], 2) == 1.0
        assert pass_at_k([1, 0, 0], 2) == pytest.approx(2 / 3)

    def test_k_out_of_range_is_none_not_clamped(self):
        assert pass_hat_k([1, 1], 3) is None
        assert pass_at_k([1, 1], 3) is None
        assert pass_hat_k([1, 1], 0) is None
        assert pass_at_k([], 1) is None

    def test_fewer_passes_than_k(self):
        assert pass_hat_k([1, 0, 0], 2) == 0.0

    def test_threshold(self):
        assert pass_hat_k([0.95, 0.91, 0.5], 1, threshold=0.9) == pytest.approx(2 / 3)

    def test_exact_for_large_n(self):
        # 1 − C(200, 100)/C(300, 100) needs exact integers: the float combs overflow.
        rewards = [1.0] * 100 + [0.0] * 200
        expected = 1 - math.comb(200, 100) / math.comb(300, 100)
        assert pass_at_k(rewards, 100) == expected


class TestCombinedAndClustered:
    def test_combined_hand_worked(self):
        means, ses = [0.2, 0.4], [0.1, 0.1]
        between = np.var(means, ddof=1)  # 0.02
        expected = math.sqrt(between / 2 + (0.01 + 0.01) / 4)
        assert combined_stderr(means, ses) == pytest.approx(expected)

    def test_combined_edges(self):
        assert combined_stderr([], []) == 0.0
        assert combined_stderr([0.5], [0.2]) == pytest.approx(0.2)

    def test_clustered_equals_stderr_for_singletons(self):
        rng = np.random.default_rng(3)
        v = rng.random(17)
        assert clustered_stderr(v, list(range(17))) == pytest.approx(stderr(v))

    def test_clustered_hand_worked(self):
        # v = [1, 0, 1, 1], clusters a,a,b,b: mean .75; residual sums a: .25-.75=-.5, b: .5
        # sqrt(2/1 * (0.25 + 0.25)) / 4 = 1/4
        assert clustered_stderr([1, 0, 1, 1], ["a", "a", "b", "b"]) == pytest.approx(0.25)

    def test_clustered_one_cluster_is_zero(self):
        assert clustered_stderr([0.1, 0.9], ["a", "a"]) == 0.0


class TestBootstrap:
    def test_deterministic_and_covers_mean(self):
        xs = [0.1, 0.4, 0.5, 0.7, 0.9, 0.2]
        a = bootstrap_ci(xs, seed=7)
        assert a == bootstrap_ci(xs, seed=7)
        assert a[0] < np.mean(xs) < a[1]

    def test_close_to_normal_interval_for_large_n(self):
        rng = np.random.default_rng(0)
        xs = rng.random(400)
        lo, hi = bootstrap_ci(xs, resamples=4000)
        half = 1.96 * sps.sem(xs)
        assert lo == pytest.approx(xs.mean() - half, abs=0.01)
        assert hi == pytest.approx(xs.mean() + half, abs=0.01)

    def test_edges(self):
        assert bootstrap_ci([0.3]) == (0.3, 0.3)
        with pytest.raises(ValueError):
            bootstrap_ci([])


class TestAggregate:
    def test_spec_example_missing_data_is_not_zero(self):
        r = aggregate(
            [
                tt("a", ["ok"], [1.0]),
                tt("b", ["ok"], [0.0]),
                tt("c", ["infra_error"], [None]),
                tt("d", ["scorer_error"], [None]),
            ]
        )
        assert r.reward == 0.5
        assert r.coverage == 0.5
        assert r.n_tasks == 4 and r.n_scored == 2
        assert [t.id for t in r.per_task] == ["a", "b", "c", "d"]
        assert (r.trials_ok, r.trials_infra_error, r.trials_scorer_error) == (2, 1, 1)
        assert r.per_task[2].mean is None

    def test_reward_is_mean_of_task_means(self):
        # a: 3 ok trials (1, 1, 0) -> 2/3; b: 1 ok trial of 3 -> 0; reward = 1/3, not 2/4.
        r = aggregate(
            [
                tt("a", ["ok", "ok", "ok"], [1, 1, 0]),
                tt("b", ["ok", "infra_error", "scorer_error"], [0, None, None]),
            ]
        )
        assert r.reward == pytest.approx(1 / 3)
        assert r.stderr == pytest.approx(sps.sem([2 / 3, 0.0]))
        se_a = sps.sem([1, 1, 0])
        assert r.stderr_trials == pytest.approx(math.sqrt(se_a**2 + 0) / 2)

    def test_ci95_t_is_student_t_and_ci95_is_the_betting_interval(self):
        rng = random.Random(1)
        tasks = [tt(f"t{i}", ["ok"] * 3, [rng.random() for _ in range(3)]) for i in range(8)]
        r = aggregate(tasks)
        means = [np.mean(t.rewards) for t in tasks]
        lo, hi = sps.t.interval(0.95, df=7, loc=np.mean(means), scale=sps.sem(means))
        assert r.ci95_t == pytest.approx((lo, hi))
        assert r.stderr_method == "task"
        assert r.ci95 == pytest.approx(betting_ci(means), abs=1e-5)
        assert r.ci95_method.startswith("betting")
        assert 0.0 <= r.ci95[0] < r.reward < r.ci95[1] <= 1.0

    def test_pass_k_mean_over_tasks_that_reach_k(self):
        # a: 3 ok (2 pass); b: 2 ok (1 pass) + 1 infra; c: unscored.
        r = aggregate(
            [
                tt("a", ["ok", "ok", "ok"], [1, 1, 0]),
                tt("b", ["ok", "ok", "infra_error"], [1, 0, None]),
                tt("c", ["infra_error"] * 3, [None] * 3),
            ]
        )
        assert r.pass_hat_k[1] == pytest.approx((2 / 3 + 1 / 2) / 2)
        assert r.pass_hat_k[2] == pytest.approx((1 / 3 + 0) / 2)
        assert r.pass_hat_k[3] == pytest.approx(0.0)
        assert r.tasks_k == {1: 2, 2: 2, 3: 1}
        assert r.pass_at_k[2] == pytest.approx((1.0 + 1.0) / 2)
        assert r.pass_at_k[3] == 1.0

    def test_k_no_task_reaches_is_absent(self):
        r = aggregate([tt("a", ["ok", "ok"], [1, 1])], ks=[1, 2, 5])
        assert 5 not in r.pass_hat_k and 5 not in r.pass_at_k and 5 not in r.tasks_k
        assert r.pass_hat_k[2] == 1.0

    def test_threshold_for_continuous_rewards(self):
        r = aggregate([tt("a", ["ok", "ok"], [0.95, 0.5])], threshold=0.9)
        assert r.pass_hat_k[1] == 0.5 and r.pass_at_k[2] == 1.0

    def test_empty_split_is_flagged(self):
        r = aggregate([])
        assert r.empty and r.coverage == 1.0 and r.reward is None and r.n_tasks == 0
        assert any("empty split" in w for w in r.warnings)

    def test_one_task(self):
        r = aggregate([tt("a", ["ok", "ok", "ok"], [1, 0, 1])])
        assert r.reward == pytest.approx(2 / 3)
        assert r.stderr == 0.0 and r.ci95_t is None
        # one task is one draw: the betting interval is valid but wide, inside [0, 1]
        assert 0.0 <= r.ci95[0] < 2 / 3 < r.ci95[1] <= 1.0
        assert any("only 1 scored task" in w for w in r.warnings)

    def test_ragged_trials(self):
        r = aggregate([tt("a", ["ok"], [0.2]), tt("b", ["ok"] * 4, [0.1, 0.3, 0.5, 0.7])])
        assert r.reward == pytest.approx((0.2 + 0.4) / 2)
        assert r.trials_planned == 5
        assert r.n_trials == 4

    def test_warnings(self):
        r = aggregate(
            [
                tt("a", ["ok"], [1.0]),
                tt("b", ["infra_error"], [None]),
                tt("c", ["infra_error"], [None]),
            ]
        )
        assert "n_trials=1: within-task variance is unmeasured" in r.warnings
        assert "coverage 0.33 < 0.60" in r.warnings

    def test_clustered_when_tasks_carry_clusters(self):
        tasks = [
            tt("a", ["ok"], [1.0], "x"),
            tt("b", ["ok"], [0.0], "x"),
            tt("c", ["ok"], [1.0], "y"),
            tt("d", ["ok"], [1.0], "y"),
        ]
        r = aggregate(tasks)
        assert r.stderr_method == "clustered"
        assert r.stderr == pytest.approx(0.25)

    def test_combined_on_request(self):
        tasks = [tt("a", ["ok", "ok"], [1.0, 0.0]), tt("b", ["ok", "ok"], [1.0, 1.0])]
        r = aggregate(tasks, stderr_method="combined")
        assert r.stderr == pytest.approx(combined_stderr([0.5, 1.0], [0.5, 0.0]))

    def test_ok_trial_needs_a_finite_reward(self):
        with pytest.raises(ValueError, match="finite"):
            aggregate([tt("a", ["ok"], [None])])

    def test_vectorised_matches_per_task_estimators(self):
        rng = random.Random(5)
        tasks = []
        for i in range(40):
            n = rng.randint(1, 6)
            st = [rng.choice(["ok", "ok", "ok", "infra_error", "scorer_error"]) for _ in range(n)]
            rw = [float(rng.random() < 0.6) if s == "ok" else None for s in st]
            tasks.append(tt(f"t{i}", st, rw))
        r = aggregate(tasks, ks=[1, 2, 3, 4])
        for k in (1, 2, 3, 4):
            per = [
                [x for x, s in zip(t.rewards, t.statuses, strict=True) if s == "ok"] for t in tasks
            ]
            reach = [p for p in per if len(p) >= k]
            if not reach:
                assert k not in r.pass_hat_k
                continue
            assert r.pass_hat_k[k] == pytest.approx(np.mean([pass_hat_k(p, k) for p in reach]))
            assert r.pass_at_k[k] == pytest.approx(np.mean([pass_at_k(p, k) for p in reach]))


@pytest.mark.parametrize("bad", [1.5, -0.25])
def test_aggregate_refuses_rewards_outside_the_reward_range(bad):
    tasks = [
        TaskTrials(id="a", statuses=["ok"], rewards=[0.5]),
        TaskTrials(id="b", statuses=["ok", "ok"], rewards=[1.0, bad]),
    ]
    with pytest.raises(
        ValueError, match=rf"task 'b': reward {bad} is outside the reward range \[0, 1\]"
    ):
        aggregate(tasks)


def test_aggregate_matches_a_recomputation_on_skewed_data_with_missing_and_failed_trials():
    """Every figure of a 300-task result recomputed by hand (numpy, scipy's comb): skewed
    rewards, uneven trial counts, missing trials, unscored tasks, failed trials that carry a
    reward of their own or none (they count at failure_reward either way)."""
    from scipy.special import comb

    from honesteval.models import TaskResult

    rng = np.random.default_rng(11)
    failure_reward, n_tasks, threshold = 0.25, 300, 0.2
    tasks, counted = [], []
    for i in range(n_tasks):
        width = int(rng.integers(1, 9))
        statuses = rng.choice(
            ["ok", "failed", "infra_error", "scorer_error"], p=[0.7, 0.1, 0.1, 0.1], size=width
        ).tolist()
        if i % 50 == 0:
            statuses = ["infra_error"] * width  # unscored
        skewed = rng.beta(0.3, 2.0, size=width).round(3).tolist()
        carried = {"ok": skewed, "failed": [x if j % 2 else None for j, x in enumerate(skewed)]}
        rewards = [carried[s][j] if s in carried else None for j, s in enumerate(statuses)]
        tasks.append(tt(f"t{i}", statuses, rewards))
        by_status = {"ok": rewards, "failed": [failure_reward] * width}
        counted.append([by_status[s][j] for j, s in enumerate(statuses) if s in by_status])
    r = aggregate(tasks, ks=[1, 2, 4], threshold=threshold, failure_reward=failure_reward)

    scored = [np.array(c) for c in counted if c]
    means = np.array([c.mean() for c in scored])
    assert (r.n_tasks, r.n_scored) == (n_tasks, len(scored))
    assert r.reward == pytest.approx(means.mean(), rel=1e-12)
    assert r.stderr == pytest.approx(means.std(ddof=1) / math.sqrt(means.size), rel=1e-12)
    unscored = n_tasks - len(scored)
    assert r.reward_bounds == pytest.approx(
        (means.sum() / n_tasks, (means.sum() + unscored) / n_tasks), rel=1e-12
    )
    for k in (1, 2, 4):
        reach = [c for c in scored if c.size >= k]
        hats = [comb(int((c >= threshold).sum()), k) / comb(c.size, k) for c in reach]
        ats = [1 - comb(int((c < threshold).sum()), k) / comb(c.size, k) for c in reach]
        assert r.tasks_k[k] == len(reach)
        assert r.pass_hat_k[k] == pytest.approx(np.mean(hats), rel=1e-12)
        assert r.pass_at_k[k] == pytest.approx(np.mean(ats), rel=1e-12)
        assert r.pass_hat_k_bounds[k] == pytest.approx(
            (sum(hats) / n_tasks, (sum(hats) + n_tasks - len(reach)) / n_tasks), rel=1e-12
        )
    for task, c, got in zip(tasks, counted, r.per_task, strict=True):
        contributed = [
            failure_reward if s == "failed" else x
            for s, x in zip(task.statuses, task.rewards, strict=True)
        ]
        expected = TaskResult(
            id=task.id,
            cluster=None,
            mean=None,
            se=None,
            n_ok=len(c),
            statuses=task.statuses,
            rewards=contributed,
            feedback=None,
        )
        assert got.model_dump(exclude={"mean", "se"}) == expected.model_dump(exclude={"mean", "se"})
        assert got.model_fields_set == expected.model_fields_set
        if not c:
            assert (got.mean, got.se) == (None, None)
            continue
        se = np.std(c, ddof=1) / math.sqrt(len(c)) if len(c) >= 2 else 0.0
        assert got.mean == pytest.approx(np.mean(c), rel=1e-12)
        assert got.se == pytest.approx(se, rel=1e-12, abs=1e-15)


def test_task_results_of_aggregate_behave_like_validated_ones():
    """``aggregate``'s per-task results (built without validation) dump, compare and copy
    like ones built through validation; a copy with a change leaves the others alone."""
    from honesteval.models import SplitResult, TaskResult

    r = aggregate([tt("a", ["ok", "failed"], [1.0, None]), tt("b", ["infra_error"], [None])])
    a, b = r.per_task
    assert a == TaskResult(
        id="a", mean=0.5, se=0.5, n_ok=2, statuses=["ok", "failed"], rewards=[1.0, 0.0]
    )
    changed = a.model_copy(update={"feedback": "x"})
    assert changed.feedback == "x" and a.feedback is None
    assert a.model_fields_set == b.model_fields_set == set(TaskResult.model_fields)
    assert SplitResult.model_validate_json(r.model_dump_json()) == r
    # Building them pauses the cycle collector and leaves it as it found it.
    assert gc.isenabled()
    gc.disable()
    try:
        aggregate([tt("a", ["ok"], [1.0])])
        assert not gc.isenabled()
    finally:
        gc.enable()
