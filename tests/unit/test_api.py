"""The Python API (issue 27 §1): evaluate and gate in this process, no Prefect, candidates
given by name, by any path, or in memory. Expected values are counted by hand from the tasks."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

import honesteval
from honesteval import ConfigError

TARGET = """\
from pathlib import Path


def run(task, candidate_dir, seed):
    return (Path(candidate_dir) / "answer.txt").read_text().strip()


def score(task, output):
    return {"reward": 1.0 if output == task["target"] else 0.0}
"""

# 12 val tasks: 8 want "yes", 4 want "no".
TARGETS = ["yes", "yes", "no", "yes", "no", "yes"] * 2


def _project(base: Path, trials: int = 2) -> Path:
    root = base / "proj"
    (root / "candidates" / "base").mkdir(parents=True)
    tasks = [{"id": f"t{i}", "input": i, "target": t} for i, t in enumerate(TARGETS)]
    (root / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    ids = [t["id"] for t in tasks]
    (root / "honesteval.yaml").write_text(
        "name: api\ntasks: tasks.jsonl\n"
        f"splits: {{train: [], val: {json.dumps(ids)}, test: []}}\n"
        'adapter: {kind: python, target: "target:run", scorer: "target:score"}\n'
        f"trials: {trials}\nretries: 0\n"
    )
    (root / "target.py").write_text(TARGET)
    (root / "candidates" / "base" / "answer.txt").write_text("no\n")
    (root / "candidates" / "zero").mkdir()
    (root / "candidates" / "zero" / "answer.txt").write_text("maybe\n")  # never right
    return root


def test_evaluate_a_candidate_in_memory_locally(tmp_path: Path) -> None:
    root = _project(tmp_path)
    result = honesteval.evaluate(root, {"answer.txt": "yes\n"}, orchestration="local")
    assert result.reward == pytest.approx(8 / 12)  # right on the 8 "yes" tasks, every trial
    assert (result.n_tasks, result.n_trials, result.coverage) == (12, 2, 1.0)
    # written once, content-addressed: the folder's fingerprint as SPEC §1 defines it
    data = b"yes\n"
    fp = hashlib.sha256(b"answer.txt\0" + str(len(data)).encode() + b"\0" + data).hexdigest()
    folder = root / ".honesteval" / "candidates" / fp[:16]
    assert result.fingerprint == fp
    assert result.candidate == f"@{fp[:16]}"
    assert (folder / "answer.txt").read_bytes() == data
    again = honesteval.evaluate(root, {"answer.txt": b"yes\n"}, orchestration="local")
    assert again.trials_reused == 24  # the same files are the same candidate


def test_evaluate_a_candidate_anywhere_on_disk_and_by_name(tmp_path: Path) -> None:
    root = _project(tmp_path)
    elsewhere = tmp_path / "proposals" / "p1"
    (elsewhere / "__pycache__").mkdir(parents=True)
    (elsewhere / "answer.txt").write_text("yes\n")
    (elsewhere / "__pycache__" / "x.pyc").write_bytes(b"\0")  # not the candidate
    by_path = honesteval.evaluate(root, elsewhere, orchestration="local")
    data = b"yes\n"
    fp = hashlib.sha256(b"answer.txt\0" + str(len(data)).encode() + b"\0" + data).hexdigest()
    assert (by_path.candidate, by_path.fingerprint) == (f"@{fp[:16]}", fp)
    assert by_path.reward == pytest.approx(8 / 12)
    # a snapshot: editing or deleting the original leaves the stored candidate as evaluated
    (elsewhere / "answer.txt").write_text("no\n")
    again = honesteval.evaluate(root, by_path.candidate, orchestration="local")
    assert again.trials_reused == 24 and again.fingerprint == fp
    one_file = tmp_path / "answer.txt"
    one_file.write_bytes(data)  # a file candidate: its fingerprint is the sha256 of its bytes
    assert honesteval.evaluate(root, one_file, orchestration="local").candidate == (
        "@" + hashlib.sha256(data).hexdigest()[:16]
    )
    by_name = honesteval.evaluate(root, "base", orchestration="local")
    assert by_name.candidate == "base" and by_name.reward == pytest.approx(4 / 12)
    # a str is a name, never a path: nothing outside the project is a candidate by accident
    with pytest.raises(ConfigError, match="unknown candidate"):
        honesteval.evaluate(root, str(elsewhere), orchestration="local")


def test_gate_promotes_a_real_gain_and_rejects_a_loss(tmp_path: Path) -> None:
    root = _project(tmp_path)
    first = honesteval.gate(root, "zero", orchestration="local")
    assert first.accept  # the first gate promotes the baseline
    better = honesteval.gate(root, {"answer.txt": "yes\n"}, orchestration="local")
    # right on 8 more tasks and wrong on none, no noise: passes the screen and its
    # confirmation
    assert better.accept and better.stage == "confirm"
    best = json.loads((root / ".honesteval" / "best.json").read_text())
    assert best["fingerprint"] == better.candidate_fingerprint
    # the current best is what `candidate=None` evaluates, wherever it lives
    assert honesteval.evaluate(root, orchestration="local").reward == pytest.approx(8 / 12)
    worse = honesteval.gate(root, "base", orchestration="local")  # 4 right instead of 8
    assert not worse.accept and not worse.indecisive


def test_bad_requests_fail_before_anything_runs(tmp_path: Path) -> None:
    root = _project(tmp_path)
    with pytest.raises(ConfigError, match="orchestration"):
        honesteval.evaluate(root, "base", orchestration="dask")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="relative file path"):
        honesteval.evaluate(root, {"../escape.txt": "x"}, orchestration="local")
    with pytest.raises(ConfigError, match="no such file"):
        honesteval.evaluate(root, tmp_path / "missing", orchestration="local")
    with pytest.raises(ConfigError, match="unknown candidate"):
        honesteval.evaluate(root, "@0123456789abcdef", orchestration="local")
    assert not (root / ".honesteval" / "trials").exists()


def test_a_rerun_that_runs_no_target_grades_what_awaits_its_score_without_prefect(
    tmp_path: Path,
) -> None:
    """Issue 28 §2 and issue 25 §1: every target run stored, some rollouts never graded
    (a run that stopped between target and scorer): ``evaluate`` grades them in this process
    and imports neither Prefect nor scipy.stats nor matplotlib."""
    root = _project(tmp_path)
    code = f"""
import sys
from honesteval.evaluation.plan import adapter_for, plan_evaluation
from honesteval.evaluation.trial import run_target_with_retries
import honesteval

root = {str(root)!r}
plan = plan_evaluation(root, "base", "val")
adapter = adapter_for(root)
for spec in plan.todo[:5]:
    run_target_with_retries(adapter, spec, plan.settings)   # rollout stored, never scored
for spec in plan.todo[5:]:
    honesteval.evaluation.trial.run_trial_with_retries(adapter, spec, plan.settings)
said = []
result = honesteval.evaluate(root, "base", echo=said.append)   # orchestration="auto"
heavy = [m for m in sys.modules if m.split(".")[0] in ("prefect", "matplotlib")]
heavy += [m for m in sys.modules if m.startswith("scipy.stats")]
print(result.trials_reused, result.trials_ok, result.reward, heavy, said)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    reused, ok, reward, heavy, said = proc.stdout.strip().split(" ", 4)
    assert (reused, ok, heavy) == ("19", "24", "[]")  # 24 trials: 5 graded now, 19 stored
    assert float(reward) == pytest.approx(4 / 12)
    assert "19 trials reused from disk, 5 graded from stored rollouts: no Prefect flow run" in said


def test_a_fresh_evaluation_keeps_only_the_trials_it_stored(tmp_path: Path) -> None:
    """What a stopped run says it kept (``Interrupted``: kept of planned) counts, for a
    ``fresh`` evaluation, only trials stored since it started: the ones stored before are
    not reused by it, so they are not its work kept (the plan's old key read the holdout
    flag for it, and counted all 20 x 2)."""
    from honesteval.evaluation.plan import kept_trials, plan_evaluation
    from honesteval.project.scaffold import scaffold_project

    root = tmp_path / "proj"
    scaffold_project(root)
    honesteval.evaluate(root, "baseline", trials=2, orchestration="local")
    assert kept_trials(plan_evaluation(root, "baseline", n_trials=2)) == 20 * 2
    assert kept_trials(plan_evaluation(root, "baseline", n_trials=2, fresh=True)) == 0
