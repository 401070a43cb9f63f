"""The missing-data issue's examples, each through the real CLI entry point (``main``).

Each candidate folder holds ``rewards.json``: task id -> the reward of trial k (seed k), or
``"crash"`` (the candidate raises RuntimeError) or ``"infra"`` (InfraError: missing data).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from honesteval.cli import main
from honesteval.stats import reason_details
from tests.helpers import stored_trials

pytestmark = pytest.mark.usefixtures("prefect_backend")

TABLE_TARGET = """
import json
from pathlib import Path

from honesteval import InfraError


def run(task, candidate_dir, seed):
    value = json.loads((Path(candidate_dir) / "rewards.json").read_text())[task["id"]][seed]
    if value == "crash":
        raise RuntimeError("cannot handle this task")
    if value == "infra":
        raise InfraError("backend down")
    return value


def score(task, output):
    return float(output)
"""


def table_project(make_project, candidates: dict[str, dict[str, list]], gate=None) -> Path:
    ids = sorted(next(iter(candidates.values())))
    trials = len(next(iter(candidates.values()))[ids[0]])
    root = make_project(
        tasks=[{"id": i, "input": None} for i in ids],
        candidates={name: 0.0 for name in candidates},
        config={"trials": trials, "retries": 0, "gate": gate or {}},
        target_code=TABLE_TARGET,
    )
    for name, table in candidates.items():
        (root / "candidates" / name / "rewards.json").write_text(json.dumps(table))
    return root


def cli(capsys, *args: str) -> tuple[int, dict]:
    """``honesteval ARGS --json``: (exit code, parsed output)."""
    with pytest.raises(SystemExit) as exc:
        main([*args, "--json"])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return int(exc.value.code), json.loads(out)


def gate_cli(root: Path, candidate: str, capsys) -> tuple[int, dict]:
    code, decision = cli(capsys, "gate", "--project", str(root), "--candidate", candidate)
    assert code in (0, 1, 3)
    return code, decision


def best_name(root: Path) -> str:
    return json.loads((root / ".honesteval" / "best.json").read_text())["name"]


def test_a_candidate_that_crashes_scores_its_crashes_and_is_not_promoted(make_project, capsys):
    ids = [f"v{i}" for i in range(10)]
    best = {i: [0.5] * 3 for i in ids}
    crashy = {i: ["crash"] * 3 if n >= 7 else [0.6] * 3 for n, i in enumerate(ids)}
    root = table_project(make_project, {"best": best, "crashy": crashy})
    assert gate_cli(root, "best", capsys)[0] == 0
    code, decision = gate_cli(root, "crashy", capsys)
    # 7 tasks at 0.6 and 3 failed at failure_reward 0.0: (7 * 0.6 + 3 * 0) / 10 = 0.42
    assert code == 1 and not decision["accept"] and not decision["indecisive"]
    assert decision["candidate_reward"] == pytest.approx(0.42)
    assert decision["candidate_coverage"] == 1.0 and best_name(root) == "best"
    code, result = cli(capsys, "evaluate", "--project", str(root), "--candidate", "crashy")
    assert code == 0
    assert result["reward"] == pytest.approx(0.42) and result["n_scored"] == 10
    assert (result["trials_failed"], result["trials_ok"]) == (9, 21)
    failed = [t for t in result["per_task"] if "failed" in t["statuses"]]
    assert [t["id"] for t in failed] == ["v7", "v8", "v9"]
    stored = next(
        r for r in stored_trials(root, "val", "crashy") if (r["task_id"], r["seed"]) == ("v7", 0)
    )
    assert stored["status"] == "failed" and stored["attempts"] == 1
    assert stored["error"] == "RuntimeError: cannot handle this task"


def test_missing_data_that_could_flip_the_decision_is_indecisive(make_project, capsys):
    ids = [f"v{i}" for i in range(10)]
    best = {i: [0.5] for i in ids}
    # +0.2 on the 7 tasks it ran; the other 3 hit an outage. Worst case (0 vs 0.5) loses.
    outage = {i: ["infra"] if n >= 7 else [0.7] for n, i in enumerate(ids)}
    root = table_project(make_project, {"best": best, "outage": outage})
    assert gate_cli(root, "best", capsys)[0] == 0
    code, decision = gate_cli(root, "outage", capsys)
    assert code == 3 and decision["indecisive"] and decision["rerun"] == ["v7", "v8", "v9"]
    assert reason_details(decision["reason"]).startswith("INDECISIVE")
    assert best_name(root) == "best"


def test_trial_reward_tie_rejects(make_project, capsys):
    current = {"a": [0, 0, 0], "b": [1, 0, 0], "c": [1, 0, 0]}
    candidate = {"a": [1, 1, 0], "b": [0, 0, 0], "c": [1, 1, 1]}
    # the tie rule of the full screen: the staged screen's rounds switched off (its round 1,
    # deltas 1, -1, 0, would stop for futility before the tie)
    unstaged = {"screen_futility": None, "screen_efficacy": None}
    root = table_project(make_project, {"cur": current, "cand": candidate}, gate=unstaged)
    assert gate_cli(root, "cur", capsys)[0] == 0
    code, decision = gate_cli(root, "cand", capsys)
    # deltas 2/3, -1/3, 2/3: mean 1/3 and SE sqrt((1/9+4/9+1/9)/2/3) = 1/3, a tie
    assert code == 1 and reason_details(decision["reason"]).startswith("REJECT (tie)")


def test_strict_zero_gain_rejects(make_project, capsys):
    current = {"a": [0.1], "b": [0.2], "c": [0.3]}
    candidate = {"a": [0.3], "b": [0.2], "c": [0.1]}
    root = table_project(make_project, {"cur": current, "cand": candidate}, {"mode": "strict"})
    assert gate_cli(root, "cur", capsys)[0] == 0
    code, decision = gate_cli(root, "cand", capsys)
    assert code == 1 and not decision["accept"] and decision["delta"] == 0.0


def test_nothing_scored_is_indecisive_at_min_coverage_zero(make_project, capsys):
    full = {"a": [0.5], "b": [0.4]}
    down = {"a": ["infra"], "b": ["infra"]}
    root = table_project(make_project, {"full": full, "down": down}, {"min_coverage": 0})
    code, decision = gate_cli(root, "down", capsys)  # as the baseline: nothing to promote
    assert code == 3 and decision["indecisive"]
    assert not (root / ".honesteval" / "best.json").exists()
    assert gate_cli(root, "full", capsys)[0] == 0
    code, decision = gate_cli(root, "down", capsys)
    assert code == 3 and "nothing scored on the candidate side" in decision["reason"]
    assert best_name(root) == "full"


def test_evaluate_names_its_failed_trials_in_a_line_per_status_and_json_carries_each(
    make_project, capsys
):
    ids = [f"v{i}" for i in range(10)]
    table = {i: ["crash"] * 3 if n >= 7 else [0.6] * 3 for n, i in enumerate(ids)}
    table["v6"] = [0.6, "infra", 0.6]
    root = table_project(make_project, {"crashy": table})
    with pytest.raises(SystemExit) as exc:
        main(["evaluate", "--project", str(root), "--candidate", "crashy"])
    out, err = capsys.readouterr()
    assert exc.value.code == 0, err
    lines = [line.strip() for line in out.splitlines()]
    # 3 crashing tasks × 3 trials, the first by task then seed; one infra trial on v6
    failed = "failed: 9 trials on 3 tasks, e.g. v7 (seed 0): RuntimeError: cannot handle this task"
    infra = "infra_error: 1 trial on 1 task, e.g. v6 (seed 1): InfraError: backend down"
    assert failed in lines and infra in lines
    assert lines.index(failed) < lines.index(infra)

    code, result = cli(capsys, "evaluate", "--project", str(root), "--candidate", "crashy")
    assert code == 0
    not_ok = result["trials_not_ok"]
    assert [(t["task_id"], t["seed"], t["status"]) for t in not_ok] == [
        ("v6", 1, "infra_error"),
        *[(f"v{n}", s, "failed") for n in (7, 8, 9) for s in range(3)],
    ]
    assert {t["error"] for t in not_ok if t["status"] == "failed"} == {
        "RuntimeError: cannot handle this task"
    }


def test_evaluate_without_a_candidate_names_the_current_best_it_evaluates(make_project, capsys):
    root = table_project(make_project, {"best": {f"v{i}": [0.5] * 3 for i in range(7)}})
    assert gate_cli(root, "best", capsys)[0] == 0
    code, result = cli(capsys, "evaluate", "--project", str(root))
    assert code == 0 and result["candidate"] == "best"
    with pytest.raises(SystemExit):
        main(["evaluate", "--project", str(root)])
    assert "no --candidate: evaluating the current best, 'best'" in capsys.readouterr().err
