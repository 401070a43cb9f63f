"""Every printed interval says what it is about and what it assumes (issue 23 §3); the t
interval is clipped to the reward range and says so. Expected numbers from scipy, by hand."""

from __future__ import annotations

import math
import statistics

import scipy.stats

from honesteval.models import TaskTrials
from honesteval.stats import aggregate
from honesteval.views.text import decision_lines, interval_lines


def lines_of(result) -> dict[str, str]:
    return dict(interval_lines(result))


def test_the_t_interval_is_clipped_to_the_reward_range_and_says_so():
    means = [1.0] * 7 + [0.9]
    r = aggregate(
        [TaskTrials(id=f"t{i}", statuses=["ok"], rewards=[m]) for i, m in enumerate(means)]
    )
    text = lines_of(r)
    mean, sd = statistics.fmean(means), statistics.stdev(means)
    half = scipy.stats.t.ppf(0.975, 7) * sd / math.sqrt(8)
    assert mean + half > 1.0  # the raw t interval leaves the range
    assert text["t CI"].startswith(f"[{mean - half:.4f}, 1.0000] the same, a Student t interval")
    assert "(7 df) assuming roughly normal task means, clipped to the range [0, 1]" in text["t CI"]
    assert "the mean reward over new tasks like these; distribution-free" in text["95% CI"]
    assert "trials CI" not in text  # one trial per task: no within-task spread to show


def test_the_trials_interval_is_about_these_tasks_with_new_trials():
    rows = [[1.0, 0.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 1.0], [0.0, 1.0, 0.0]]
    r = aggregate(
        [TaskTrials(id=f"t{i}", statuses=["ok"] * 3, rewards=v) for i, v in enumerate(rows)]
    )
    # SE over trials: sqrt(Σ_i s_i² / n_i) / n_tasks, each s_i the sd of task i's trials.
    se = math.sqrt(sum(statistics.variance(v) / 3 for v in rows)) / 4
    reward = statistics.fmean(statistics.fmean(v) for v in rows)
    half = scipy.stats.norm.ppf(0.975) * se
    text = lines_of(r)["trials CI"]
    assert text.startswith(f"[{reward - half:.4f}, {reward + half:.4f}] these 4 tasks rerun")
    assert f"within-task SE {se:.4f}" in text and "says nothing about new tasks" in text


def test_a_t_interval_as_the_reported_one_says_its_assumption():
    # Clusters of unequal sizes: the reported interval is the clipped Student t over clusters.
    sizes = {"a": 1, "b": 2, "c": 3}
    tasks = [
        TaskTrials(id=f"{c}{j}", cluster=c, statuses=["ok"], rewards=[float(j % 2)])
        for c, n in sizes.items()
        for j in range(n)
    ]
    r = aggregate(tasks)
    text = lines_of(r)
    assert (r.ci95_method or "").startswith("Student t")
    assert "assumes roughly normal cluster means" in text["95% CI"]
    assert "t CI" not in text  # it is the reported one: not printed twice


def test_a_confirmations_gain_interval_says_what_it_is_about():
    from honesteval.models import GateDecision

    d = GateDecision(
        accept=True,
        reason="ACCEPT",
        mode="paired",
        candidate="b",
        candidate_fingerprint="x",
        current="a",
        delta=0.9,
        se=0.1,
        stage="confirm",
        gain_ci95=(0.7, 1.1),
        gain_estimate=0.85,
        online={"tests": 1},
        level=0.025,
    )
    gain = next(line for line in decision_lines(d) if line.lstrip().startswith("gain"))
    assert gain.startswith("  gain      +0.8500, nominal 95% CI [+0.7000, +1.0000] the paired Δ")
    assert "new tasks like these, conditional on the promotion (selection-adjusted)" in gain
    assert "roughly normal mean Δ (SE estimated, t-like), clipped to the range [-1, 1]" in gain


def test_the_cli_names_one_interval_for_the_reward_and_folds_the_others_under_details(capsys):
    from honesteval.cli.output import print_result

    rows = [[1.0, 0.0, 1.0], [0.0, 0.0, 1.0], [1.0, 1.0, 1.0], [0.0, 1.0, 0.0], [1.0] * 3]
    r = aggregate(
        [TaskTrials(id=f"t{i}", statuses=["ok"] * 3, rewards=v) for i, v in enumerate(rows)]
    )
    print_result(r)
    lines = capsys.readouterr().out.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("  95% CI"))
    assert "the interval for the reward: the mean reward over new tasks" in lines[at]
    assert lines[at + 1].startswith("  details   t CI [")  # the same, a t interval
    assert lines[at + 2].startswith(" " * 12 + "trials CI [")  # these tasks, new trials
    assert lines[at + 3].startswith("  coverage")
    assert sum("the interval for the reward" in line for line in lines) == 1
