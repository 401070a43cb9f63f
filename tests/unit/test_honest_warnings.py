"""Warnings that are true: pass^k denominators, concentrated missing trials, check's probes,
and an ``init`` template whose tasks do not all draw the same noise."""

from __future__ import annotations

import json

import numpy as np

from honesteval.evaluation.checks import check_project
from honesteval.models import TaskTrials
from honesteval.project.scaffold import scaffold_project
from honesteval.stats import aggregate
from tests.helpers import run_plain


def test_pass_k_over_fewer_tasks_says_so_and_warns_of_bias():
    tasks = [
        TaskTrials(id="a", statuses=["ok", "ok"], rewards=[1.0, 1.0]),
        TaskTrials(id="b", statuses=["ok", "infra_error"], rewards=[0.0, None]),
        TaskTrials(id="c", statuses=["ok", "infra_error"], rewards=[0.0, None]),
    ]
    r = aggregate(tasks)
    # pass^2 over the one task with 2 counted trials is 1.0 > pass^1 = 1/3: flagged
    assert r.tasks_k == {1: 3, 2: 1} and r.pass_hat_k[2] > r.pass_hat_k[1]
    assert any(w.startswith("pass^2 and pass@2 are over 1 of 3 scored tasks") for w in r.warnings)
    assert any("missing trials concentrate on 2 of 3" in w for w in r.warnings)
    even = aggregate([TaskTrials(id="a", statuses=["ok"] * 2, rewards=[1.0, 0.0])])
    assert not any("pass^" in w or "concentrate" in w for w in even.warnings)


SCORER_WITH_CHANGING_FEEDBACK = """
import itertools
_n = itertools.count()


def run(task, candidate_dir, seed):
    return seed


def score(task, output):
    return {"reward": 0.5, "feedback": f"call {next(_n)}"}
"""


def test_check_compares_rewards_and_names_what_it_probed(make_project):
    root = make_project(["pass"], target_code=SCORER_WITH_CHANGING_FEEDBACK)
    results = {c.name: c for c in check_project(root)}
    assert results["scorer deterministic"].level == "ok"  # same reward, other feedback
    assert results["seeds"].level == "ok"
    assert "candidate 'base' on task 't00'" in results["seeds"].detail


def test_check_seed_warning_names_candidate_tasks_and_likelihood(make_project):
    root = make_project(["same", "same", "same", "same"])  # a target that ignores its seed
    seeds = {c.name: c for c in check_project(root)}["seeds"]
    # 8 seeds on the first task, 4 on the next two: 7 + 3 + 3 pairs that could have differed;
    # a target changing one time in three would have shown it with 1 - (2/3)^13 = 99.5 %
    assert seeds.level == "warn" and "candidate 'base'" in seeds.detail
    assert "8 seeds on task 't00', 4 seeds on task 't01', 4 seeds on task 't02'" in seeds.detail
    assert "probability 99.5%" in seeds.detail and "most likely ignores its seed" in seeds.detail


LATE_SEED_TARGET = """
def run(task, candidate_dir, seed):
    return "late" if seed >= 5 else "early"  # agrees with itself for the first five seeds


def score(task, output):
    return 1.0
"""


def test_check_seed_probe_tries_more_seeds_before_warning(make_project):
    root = make_project(["x", "y"], target_code=LATE_SEED_TARGET)
    seeds = {c.name: c for c in check_project(root)}["seeds"]
    assert seeds.level == "ok" and "task 't00': seeds 0 and 5 differ" in seeds.detail


SHARED_DRAW_TARGET = """
import random


def run(task, candidate_dir, seed):
    return random.Random(seed).random() < 0.5  # the task never reaches the draw


def score(task, output):
    return float(output)
"""


def test_check_names_a_target_whose_draws_ignore_the_task(make_project):
    # Both tasks pass at exactly the same seeds (6 of seeds 0..9): Spearman's rho = 1, and of
    # the pairings of the seeds only those that keep passes with passes reach it:
    # p = 1/C(10, 6) = 1/210 ≈ 0.005 ≤ 0.01.
    root = make_project(["x", "y"], target_code=SHARED_DRAW_TARGET)
    draws = {c.name: c for c in check_project(root)}["task draws"]
    assert draws.level == "warn" and "rank correlation of rewards +1.00" in draws.detail
    assert "tasks 't00' and 't01' at seeds 0..9" in draws.detail
    assert "random.Random(seed)" in draws.detail and "its level holds" in draws.detail
    task_seeded = SHARED_DRAW_TARGET.replace("Random(seed)", "Random(f\"{task['id']}|{seed}\")")
    root = make_project(["x", "y"], target_code=task_seeded)
    draws = {c.name: c for c in check_project(root)}["task draws"]
    assert draws.level == "ok" and "no sign of shared draws" in draws.detail


def test_check_does_not_cry_wolf_on_the_init_template(tmp_path):
    """The template's target uses its seed: check finds so and warns of nothing (a stochastic
    target that agrees with itself on the first pair is the late-seed test above)."""
    scaffold_project(tmp_path / "p")
    results = {c.name: c for c in check_project(tmp_path / "p")}
    assert [c.level for c in results.values()] == ["ok"] * len(results)
    assert "the seed changes the rollout" in results["seeds"].detail


def test_init_template_draws_task_specific_noise(tmp_path):
    scaffold_project(tmp_path / "p")
    _, result = run_plain(tmp_path / "p", "baseline", "train")
    means = np.array([t.mean for t in result.per_task])
    # with random.Random(seed) every task drew the same three outcomes: one mean, SE 0
    assert len(set(means.tolist())) > 1 and result.stderr > 0


def test_init_template_has_room_for_a_better_candidate(tmp_path):
    """The README's second candidate (a prompt asking the toy model to check its work) is
    right on every trial the baseline is right on (same seeds), and on more."""
    scaffold_project(tmp_path / "p")
    careful = tmp_path / "p" / "candidates" / "careful"
    careful.mkdir()
    (careful / "prompt.txt").write_text("Work it out, check your work, then answer.\n")
    _, base = run_plain(tmp_path / "p", "baseline", "val")
    _, better = run_plain(tmp_path / "p", "careful", "val")
    base_means = {t.id: t.mean for t in base.per_task}
    deltas = [t.mean - base_means[t.id] for t in better.per_task]
    assert len(deltas) == 20 and min(deltas) >= 0 and sum(deltas) > 0


def test_check_result_lists_its_checks_in_order_and_passes_on_the_template(tmp_path):
    """check_project returns a ProjectCheck: the checks in the documented order, not failed."""
    scaffold_project(tmp_path / "p")
    check = check_project(tmp_path / "p")
    assert [c.name for c in check] == [
        "project",
        "candidates",
        "tasks stable",
        "target",
        "scorer deterministic",
        "seeds",
        "task draws",
    ]
    assert len(check) == 7 and not check.failed


def test_check_stops_at_a_target_that_cannot_run_and_fails(make_project):
    """A target whose backend is down: the target check fails, so scorer and seeds (which
    need a rollout) are not run, and the result says failed (the CLI's exit code 1)."""
    root = make_project(["infra"], config={"retries": 0})
    check = check_project(root)
    assert [c.name for c in check][-1] == "target"
    assert check.checks[-1].level == "fail" and "backend down" in check.checks[-1].detail
    assert check.failed


def test_check_names_tasks_added_after_the_split_was_frozen_and_how_to_add_them(tmp_path):
    """Tasks appended to tasks.jsonl after the first run are in no split: nothing evaluates
    them, and check says which and what to do (a warning: the project still works)."""
    root = tmp_path / "p"
    scaffold_project(root)
    assert [c.name for c in check_project(root)][:2] == ["project", "candidates"]  # frozen now
    with (root / "tasks.jsonl").open("a") as tasks:
        for i in range(7):
            tasks.write(json.dumps({"id": f"new{i}", "input": "1 + 2", "target": "3"}))
            tasks.write("\n")
    check = check_project(root)
    unsplit = next(c for c in check if c.name == "unsplit tasks")
    assert unsplit.level == "warn" and not check.failed
    assert unsplit.detail.startswith(
        "7 task(s) of tasks.jsonl are in no split, so nothing evaluates them: "
        "new0, new1, new2, new3, new4 … (added after the split was frozen in "
    )
    assert "honesteval refreeze-splits" in unsplit.detail


def test_the_task_draws_probe_computes_spearmans_rank_correlation_for_every_resample_at_once():
    """Its vectorized statistic is scipy's ``spearmanr`` (ties included), row by row."""
    from scipy.stats import spearmanr

    from honesteval.evaluation.checks import _rank_correlation

    rng = np.random.default_rng(7)
    x = rng.integers(0, 3, size=(50, 10)).astype(float)  # rewards of a few levels: many ties
    y = rng.integers(0, 4, size=(50, 10)).astype(float)
    expected = [spearmanr(a, b).statistic for a, b in zip(x, y, strict=True)]
    np.testing.assert_allclose(_rank_correlation(x, y), expected, rtol=1e-12)
