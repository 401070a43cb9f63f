"""Missing data bounded everywhere (issue 23 §4): whenever coverage < 1, reward and pass^k are
printed with their [missing at 0, missing at 1] bounds, and a warning names the tasks missing
whole: in ``aggregate``, ``evaluate`` (text and --json), the summary artifact and ``status``."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from pathlib import Path

import pytest

from honesteval.models import TaskTrials
from honesteval.stats import aggregate
from honesteval.views.text import summary_markdown
from tests.helpers import run_cli, stored_trials

N_EASY, N_HARD, N_LOST = 20, 10, 5


def test_half_of_the_hard_tasks_lost_whole_is_bounded_and_warned():
    # 20 easy tasks solved every time; 10 hard ones at 1 pass in 5; half of them lost whole to
    # infra errors: coverage 25/30 = 0.83, above min_coverage.
    tasks = [TaskTrials(id=f"easy-{i}", statuses=["ok"] * 5, rewards=[1.0] * 5) for i in range(20)]
    tasks += [
        TaskTrials(id=f"hard-{i}", statuses=["ok"] * 5, rewards=[0.0, 0.0, 1.0, 0.0, 0.0])
        for i in range(5)
    ]
    tasks += [
        TaskTrials(id=f"hard-{i}", statuses=["infra_error"] * 5, rewards=[None] * 5)
        for i in range(5, 10)
    ]
    r = aggregate(tasks)
    assert r.coverage == pytest.approx(25 / 30)
    # By hand: scored task means sum to 20 + 5 × 0.2 = 21.
    assert r.reward == pytest.approx(21 / 25)
    assert r.reward_bounds == pytest.approx((21 / 30, 26 / 30))
    # pass^1 is the reward here (rewards are 0/1); pass^2..5 of a hard task are 0.
    assert r.pass_hat_k_bounds[1] == pytest.approx((21 / 30, 26 / 30))
    for k in (2, 3, 4, 5):
        assert r.pass_hat_k_bounds[k] == pytest.approx((20 / 30, 25 / 30))
    warning = next(w for w in r.warnings if "missing whole" in w)
    assert warning.startswith("5 of 30 tasks missing whole")
    assert "[0.7000, 0.8667]" in warning
    md = summary_markdown(r)
    assert "**missing:** 5 of 30 tasks missing whole: reward [0.7000, 0.8667]" in md
    assert "| 5 | 0.8 | " in md and "[0.6667, 0.8333] |" in md


def test_full_coverage_prints_no_bounds():
    r = aggregate([TaskTrials(id=f"t{i}", statuses=["ok"], rewards=[i % 2]) for i in range(6)])
    assert r.reward_bounds is None and r.pass_hat_k_bounds == {}
    assert not any("missing whole" in w for w in r.warnings)
    assert "**missing:**" not in summary_markdown(r)


def lost_project(make_project) -> Path:
    tasks = [
        {"id": f"easy-{i:02d}", "input": {"behaviour": "pass"}, "target": "yes"}
        for i in range(N_EASY)
    ]
    tasks += [
        {
            "id": f"hard-{i:02d}",
            "input": {"behaviour": "infra" if i < N_LOST else "seeded"},
            "target": "yes",
        }
        for i in range(N_HARD)
    ]
    return make_project(tasks=tasks, candidates={"base": 0.4}, config={"trials": 5})


def expected_from_trial_files(root: Path) -> dict[str, object]:
    """Reward, pass^k and their bounds computed from the trial logs on disk, by hand."""
    counted: dict[str, list[float]] = defaultdict(list)
    ids = set()
    for rec in stored_trials(root, "val", "base"):
        ids.add(rec["task_id"])
        if rec["status"] in ("ok", "failed"):
            counted[rec["task_id"]].append(rec["reward"])
    n = len(ids)
    means = {t: sum(v) / len(v) for t, v in counted.items() if v}
    missing = n - len(means)
    out: dict[str, object] = {
        "n": n,
        "missing": missing,
        "reward": sum(means.values()) / len(means),
        "bounds": (sum(means.values()) / n, (sum(means.values()) + missing) / n),
    }
    for k in (1, 5):
        hats = [
            math.comb(sum(r >= 1.0 for r in v), k) / math.comb(len(v), k)
            for v in counted.values()
            if len(v) >= k
        ]
        lacking = n - len(hats)
        out[f"pass^{k}"] = (sum(hats) / n, (sum(hats) + lacking) / n)
    return out


def test_the_summary_artifact_prints_the_bounds(make_project, prefect_backend):
    from honesteval.flows import evaluate
    from tests.prefect_reads import artifacts

    root = lost_project(make_project)
    state = evaluate(str(root), "base", "val", return_state=True)
    want = expected_from_trial_files(root)
    md = artifacts(state.state_details.flow_run_id)[f"summary-{root.name}-val-base"]["data"]
    lo, hi = want["bounds"]
    assert f"**missing:** 5 of 30 tasks missing whole: reward [{lo:.4f}, {hi:.4f}]" in md
    assert "- 5 of 30 tasks missing whole" in md  # the warning
    lo5, hi5 = want["pass^5"]
    assert f"[{lo5:.4f}, {hi5:.4f}] |" in md


@pytest.mark.quick
@pytest.mark.slow
def test_evaluate_and_status_print_the_bounds(make_project, cli_env):
    root = lost_project(make_project)
    proc = run_cli("evaluate", "--project", str(root), "--candidate", "base", "--json", env=cli_env)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    want = expected_from_trial_files(root)
    assert want["n"] == 30 and want["missing"] == N_LOST
    assert got["coverage"] == pytest.approx(25 / 30)
    assert got["reward"] == pytest.approx(want["reward"])
    assert got["reward_bounds"] == pytest.approx(list(want["bounds"]))
    assert got["pass_hat_k_bounds"]["1"] == pytest.approx(list(want["pass^1"]))
    assert got["pass_hat_k_bounds"]["5"] == pytest.approx(list(want["pass^5"]))
    assert any(w.startswith("5 of 30 tasks missing whole") for w in got["warnings"])

    text = run_cli("evaluate", "--project", str(root), "--candidate", "base", "-v", env=cli_env)
    assert text.returncode == 0, text.stderr
    lo, hi = want["bounds"]
    assert f"missing   5 of 30 tasks missing whole: reward [{lo:.4f}, {hi:.4f}]" in text.stdout
    assert "warning: 5 of 30 tasks missing whole" in text.stdout
    # every interval says what it is about (issue 23 §3)
    assert "95% CI    [" in text.stdout and "over new tasks like these; distribution-free" in (
        text.stdout
    )
    assert "trials CI [" in text.stdout and "these 25 tasks rerun with new trials" in text.stdout
    lo5, hi5 = want["pass^5"]
    assert f"[{lo5:.4f}, {hi5:.4f}]" in text.stdout  # the pass^k table's bounds column

    gate = run_cli("gate", "--project", str(root), "--candidate", "base", env=cli_env)
    assert gate.returncode == 0, gate.stdout + gate.stderr  # the baseline
    status = run_cli("status", "--project", str(root), env=cli_env)
    assert status.returncode == 0, status.stderr
    assert f"5 of 30 tasks missing whole: reward [{lo:.4f}, {hi:.4f}]" in status.stdout
    assert f"pass^5 {got['pass_hat_k']['5']:.4f} (missing at 0 / 1: [{lo5:.4f}, {hi5:.4f}])" in (
        status.stdout
    )
    report = (root / ".honesteval" / "report.html").read_text()  # written by the gate
    assert f"reward [{lo:.4f}, {hi:.4f}]; pass^5 " in report
    as_json = json.loads(run_cli("status", "--project", str(root), "--json", env=cli_env).stdout)
    assert as_json["best"]["reward_bounds"] == pytest.approx(list(want["bounds"]))
    assert as_json["candidates"][0]["reward_bounds"] == pytest.approx(list(want["bounds"]))
