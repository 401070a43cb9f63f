"""Warnings that are true: pass^k denominators, concentrated missing trials, check's probes,
and an ``init`` template whose tasks do not all draw the same noise."""

from __future__ import annotations

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


def test_check_seed_warning_names_candidate_and_task(make_project):
    root = make_project(["same"])
    seeds = {c.name: c for c in check_project(root)}["seeds"]
    assert seeds.level == "warn" and "candidate 'base' on task 't00'" in seeds.detail


def test_init_template_draws_task_specific_noise(tmp_path):
    scaffold_project(tmp_path / "p")
    _, result = run_plain(tmp_path / "p", "baseline", "train")
    means = np.array([t.mean for t in result.per_task])
    # with random.Random(seed) every task drew the same three outcomes: one mean, SE 0
    assert len(set(means.tolist())) > 1 and result.stderr > 0
