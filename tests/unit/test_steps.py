"""Eve-compatible evaluation steps (SPEC §5.1): shell steps, accumulation, failures."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest
import yaml

from honesteval.cli import main
from tests.helpers import run_plain

NONE_TARGET = "def run(task, candidate_dir, seed):\n    return None\n"


def steps_project(
    make_project,
    steps: dict[str, str],
    evaluation: dict,
    *,
    kind="none",
    tasks=None,
    target_code=NONE_TARGET,
    extra=None,
):
    """A project scored by `evaluation`, with the given shell scripts under evaluation/."""
    config = {"adapter": {"kind": kind}, "evaluation": evaluation, "trials": 2}
    if kind == "python":
        config["adapter"] = {"kind": "python", "target": "target:run"}
    config.update(extra or {})
    root = make_project(
        tasks=tasks or [{"id": "a", "input": 1}, {"id": "b", "input": 2}],
        config=config,
        target_code=target_code,
    )
    (root / "evaluation").mkdir()
    for name, body in steps.items():
        (root / "evaluation" / name).write_text("set -eu\n" + body)
    return root


def run_all(root):
    return run_plain(root)


SCORE_07 = 'echo "score: 0.7" > "$EVE_EVAL_LOG_ROOT/score.yaml"\n'


def test_a_step_that_writes_a_score_is_an_ok_trial(make_project):
    env_dump = (
        'env | grep -E "^(EVE_|HONESTEVAL_)" | sort > "$EVE_EVAL_LOG_ROOT/env.txt"\n'
        "echo hello from the step\n" + SCORE_07
    )
    root = steps_project(
        make_project,
        {"check.sh": env_dump},
        {"steps": ["evaluation/check.sh"], "failure_score": {"score": 0.0}},
    )
    records, result = run_all(root)
    assert [r.status for r in records] == ["ok"] * 4 and result.reward == pytest.approx(0.7)
    ws = Path(records[1].score["details"]["workspace"])
    trial = records[1]  # its workspace is kept where the state layout says, for inspection
    folder = root / ".honesteval" / "workspaces" / "val" / "base" / trial.fingerprint[:12]
    assert ws == folder / f"{trial.task_id}__s{trial.seed}"
    env = dict(
        line.split("=", 1) for line in (ws / "logs/evaluate/env.txt").read_text().splitlines()
    )
    assert env["EVE_WORKSPACE_ROOT"] == str(ws)
    assert env["EVE_SOLVER_ROOT"] == str(ws / "solver")
    assert env["EVE_EVAL_LOG_ROOT"] == str(ws / "logs" / "evaluate")
    assert env["HONESTEVAL_SEED"] == str(records[1].seed)
    assert env["HONESTEVAL_TRIAL"] == str(records[1].trial)
    assert env["HONESTEVAL_TASK_ID"] == records[1].task_id
    assert json.loads(Path(env["HONESTEVAL_TASK"]).read_text())["id"] == records[1].task_id
    assert Path(env["HONESTEVAL_OUTPUT"]).exists() and env["HONESTEVAL_CANDIDATE"] == "base"
    assert (ws / "solver" / "quality.txt").exists()  # a copy of the candidate
    step_dir = ws / "logs/evaluate/steps/step_01_check"
    assert (step_dir / "stdout.txt").read_text() == "hello from the step\n"
    assert (step_dir / "status.txt").read_text() == "ok\nexit 0\n"
    assert records[1].score["details"]["steps"][0]["logs"] == str(step_dir)
    assert set(result.step_seconds) == {"check"} and result.step_seconds["check"] > 0


def test_eve_style_step_runs_the_candidate_with_the_seed(make_project):
    # kind: none -- the step is the whole evaluation; it uses HONESTEVAL_SEED itself.
    body = (
        "python3 -c \"import os; s=int(os.environ['HONESTEVAL_SEED']); "
        "print('score: ' + ('1.0' if s % 2 == 0 else '0.0'))\" "
        '> "$EVE_EVAL_LOG_ROOT/score.yaml"\n'
    )
    root = steps_project(make_project, {"run.sh": body}, {"steps": ["evaluation/run.sh"]})
    records, result = run_all(root)
    assert {(r.seed, r.reward) for r in records} == {(0, 1.0), (1, 0.0)}
    assert result.reward == 0.5  # a failed candidate is a real 0, not missing data


@pytest.mark.parametrize(
    "body,reason",
    [
        ('echo "nope" >&2; exit 3\n', r"step 'check' exited 3: nope"),
        ("true\n", r"score.yaml missing"),
        ('printf -- "- 1\\n- 2\\n" > "$EVE_EVAL_LOG_ROOT/score.yaml"\n', r"must be a mapping"),
        ('echo "score: high" > "$EVE_EVAL_LOG_ROOT/score.yaml"\n', r"lacks the numeric leaf"),
        ('echo "score: .nan" > "$EVE_EVAL_LOG_ROOT/score.yaml"\n', r"not finite"),
        ('echo "score: 1.5" > "$EVE_EVAL_LOG_ROOT/score.yaml"\n', r"outside \[0, 1\]"),
        ('echo "score: [" > "$EVE_EVAL_LOG_ROOT/score.yaml"\n', r"not valid YAML"),
    ],
)
def test_failures_are_scorer_errors_with_failure_score_recorded(make_project, body, reason):
    root = steps_project(
        make_project,
        {"check.sh": body},
        {
            "steps": ["evaluation/check.sh"],
            "failure_score": {"score": 0.0, "summary": "evaluation failed"},
        },
    )
    records, result = run_all(root)
    assert {r.status for r in records} == {"scorer_error"}
    assert re.search(reason, records[0].error), records[0].error
    if "outside" not in reason:  # range is checked after the step scorer returns
        assert records[0].score["details"]["failure_score"] == {
            "score": 0.0,
            "summary": "evaluation failed",
        }
    assert result.reward is None and result.coverage == 0.0


def test_missing_leaf_of_a_nested_failure_score(make_project):
    root = steps_project(
        make_project,
        {"check.sh": SCORE_07},
        {
            "steps": ["evaluation/check.sh"],
            "failure_score": {"score": 0.0, "parts": {"style": 0.0}},
        },
    )
    records, _ = run_all(root)
    assert records[0].status == "scorer_error" and "parts.style" in records[0].error


def test_count_failure_score_restores_eve_averaging_with_a_warning(make_project):
    body = 'if [ "$HONESTEVAL_TASK_ID" = a ]; then exit 1; fi\n' + SCORE_07
    root = steps_project(
        make_project,
        {"check.sh": body},
        {
            "steps": ["evaluation/check.sh"],
            "failure_score": {"score": 0.0},
            "count_failure_score": True,
        },
    )
    records, result = run_all(root)
    assert {r.status for r in records} == {"ok"}
    assert result.reward == pytest.approx((0.0 + 0.7) / 2)
    assert any(w.startswith("count_failure_score: true") for w in result.warnings)


def test_steps_accumulate_in_order(make_project):
    first = 'echo "partial: 0.8" > "$EVE_EVAL_LOG_ROOT/score.yaml"\n'
    second = (
        '"$HONESTEVAL_PYTHON" - <<"PY"\n'
        "import os, yaml\n"
        "p = os.path.join(os.environ['EVE_EVAL_LOG_ROOT'], 'score.yaml')\n"
        "d = yaml.safe_load(open(p))\n"
        "d['score'] = d['partial'] / 2\n"
        "yaml.safe_dump(d, open(p, 'w'))\n"
        "PY\n"
    )
    root = steps_project(
        make_project,
        {"a.sh": first, "b.sh": second},
        {"steps": ["evaluation/a.sh", "evaluation/b.sh"]},
    )
    records, _ = run_all(root)
    assert records[0].status == "ok" and records[0].reward == pytest.approx(0.4)
    assert records[0].score["details"]["score_yaml"] == {"partial": 0.8, "score": 0.4}


def _bad(evaluation_patch, files=None):
    def mutate(root):
        cfg = yaml.safe_load((root / "honesteval.yaml").read_text())
        cfg["evaluation"].update(evaluation_patch)
        (root / "honesteval.yaml").write_text(yaml.safe_dump(cfg))
        for rel, text in (files or {}).items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)

    return mutate


@pytest.mark.parametrize(
    "mutate,message",
    [
        (_bad({"steps": ["evaluation/check.py"]}), r"evaluation.steps\[1\]: .*must be a .sh"),
        (_bad({"steps": [{"foo": 1}]}), r"evaluation.steps\[1\]: .*neither a shell"),
        (
            _bad({"steps": [{"path": "evaluation/check.sh", "immutable": "x"}]}),
            r"evaluation.steps\[1\]: .*neither a shell",
        ),
        (
            _bad(
                {
                    "steps": [
                        {"prompt": "evaluation/prompt_assess"},
                        {"prompt": "evaluation/assess"},
                    ]
                },
                {
                    "evaluation/prompt_assess/ENTRYPOINT.md": "x",
                    "evaluation/assess/ENTRYPOINT.md": "x",
                },
            ),
            r"duplicate judge name\(s\) \['assess'\]",
        ),
        (
            _bad({"reward_key": "score", "scalar_score_expression": "score * 2"}),
            r"reward_key or scalar_score_expression, not both",
        ),
        (
            _bad({"scalar_score_expression": "__import__('os').system('x')"}),
            r"scalar_score_expression: only min, max, abs, round may be called",
        ),
        (
            _bad({"steps": [{"prompt": "evaluation/judge"}]}, {"evaluation/judge/README": "x"}),
            r"evaluation.steps\[1\]: judge prompt 'evaluation/judge' has no ENTRYPOINT.md",
        ),
        (_bad({"reward_key": "quality"}), r"reward_key 'quality' is not a numeric leaf"),
        (_bad({"steps": ["evaluation/missing.sh"]}), r"evaluation.steps\[1\]: shell step"),
    ],
)
def test_bad_steps_fail_before_any_trial(make_project, capsys, mutate, message):
    root = steps_project(make_project, {"check.sh": SCORE_07}, {"steps": ["evaluation/check.sh"]})
    (root.parent / "outside.sh").write_text("exit 0\n")
    mutate(root)
    with pytest.raises(SystemExit) as exc:
        main(["evaluate", "--project", str(root), "--candidate", "base"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and re.search(message, err), err
    assert len(err.strip().splitlines()) == 1
    assert not (root / ".honesteval" / "trials").exists()


@pytest.mark.parametrize(
    "body",
    [
        'rm -rf "$EVE_SOLVER_ROOT"/* 2>/dev/null || true\n' + SCORE_07,
        'echo 1.0 > "$EVE_SOLVER_ROOT/quality.txt" 2>/dev/null || true\n' + SCORE_07,
        'touch "$EVE_SOLVER_ROOT/new.txt" 2>/dev/null || true\n' + SCORE_07,
        'chmod -R u+w "$EVE_SOLVER_ROOT" "$EVE_WORKSPACE_ROOT"; rm -rf "$EVE_SOLVER_ROOT"\n'
        + SCORE_07,
    ],
    ids=["delete", "change", "add", "remove-folder"],
)
def test_a_step_that_tampers_with_the_candidate_is_a_failed_trial(make_project, body):
    # As root the chmod protects nothing; the hash before and after catches it either way. A
    # shell step runs the candidate's code: a rule the candidate could break and did is its
    # failure (counted at failure_reward), not missing data.
    root = steps_project(
        make_project,
        {"grade.sh": SCORE_07, "tamper.sh": body},
        {"steps": ["evaluation/grade.sh", "evaluation/tamper.sh"]},
        tasks=[{"id": "a", "input": 1}],
        extra={"failure_reward": 0.1},
    )
    records, result = run_all(root)
    assert {r.status for r in records} == {"failed"}
    assert [r.reward for r in records] == [0.1, 0.1]  # failure_reward, not the step's 0.7
    assert "a step modified the candidate (step 'tamper')" in records[0].error
    assert result.reward == pytest.approx(0.1)
    assert (root / "candidates/base/quality.txt").read_text() == "0.5"  # the original is safe


def test_the_candidate_is_read_only_and_no_byte_code_is_written(make_project):
    body = (
        'stat -c %A "$EVE_SOLVER_ROOT" "$EVE_SOLVER_ROOT/quality.txt" > "$EVE_EVAL_LOG_ROOT/m"\n'
        'echo "$PYTHONDONTWRITEBYTECODE" >> "$EVE_EVAL_LOG_ROOT/m"\n' + SCORE_07
    )
    root = steps_project(
        make_project,
        {"look.sh": body},
        {"steps": ["evaluation/look.sh"]},
        tasks=[{"id": "a", "input": 1}],
    )
    records, _ = run_all(root)
    assert records[0].status == "ok"
    ws = Path(records[0].score["details"]["workspace"])
    solver_mode, file_mode, no_bytecode = (ws / "logs/evaluate/m").read_text().split()
    assert "w" not in solver_mode and "w" not in file_mode and no_bytecode == "1"
    assert os.access(ws / "solver", os.W_OK) or os.geteuid() == 0  # writable again afterwards


def test_include_solver_examples_shows_the_current_best(make_project):
    from honesteval.store.state_dir import Store

    body = (
        'cp "$EVE_WORKSPACE_ROOT/solver_examples/champ/score.yaml" "$EVE_EVAL_LOG_ROOT/ex.yaml"\n'
        'cat "$EVE_WORKSPACE_ROOT/solver_examples/champ/solver/quality.txt" '
        '> "$EVE_EVAL_LOG_ROOT/ex.txt"\n' + SCORE_07
    )
    root = steps_project(
        make_project,
        {"look.sh": body},
        {"steps": ["evaluation/look.sh"], "include_solver_examples": True},
        tasks=[{"id": "a", "input": 1}],
    )
    (root / "candidates/champ").mkdir()
    (root / "candidates/champ/quality.txt").write_text("0.9")
    from honesteval.models import BestRecord, TaskTrials
    from honesteval.stats import aggregate

    result = aggregate([TaskTrials(id="a", statuses=["ok"], rewards=[0.9])], [1], 1.0)
    best = BestRecord(
        name="champ",
        fingerprint="f" * 64,
        promoted_at="2026-01-01T00:00:00.000000Z",
        reason="baseline",
        result=result.model_copy(update={"candidate": "champ"}),
    )
    from honesteval.project.loader import load_project

    load_project(root).frozen_split()  # a project with a best has its split frozen
    Store(root / ".honesteval").write_best(best)
    records, _ = run_all(root)
    ws = Path(records[0].score["details"]["workspace"])
    example = yaml.safe_load((ws / "logs/evaluate/ex.yaml").read_text())
    assert example["example_id"] == "champ" and example["score"]["reward"] == 0.9
    assert (ws / "logs/evaluate/ex.txt").read_text() == "0.9"
    # a new current best changes what the judge sees: stored trials are not reused
    Store(root / ".honesteval").write_best(best.model_copy(update={"fingerprint": "e" * 64}))
    rerun, _ = run_all(root)
    assert len(rerun) == len(records)


def test_check_probes_the_steps_with_the_candidate_and_cleans_up(
    make_project, capsys, monkeypatch, tmp_path
):
    import tempfile

    # The step grades the candidate itself: on an empty solver/ it would exit 1.
    body = (
        'q=$(cat "$EVE_SOLVER_ROOT/quality.txt")\n'
        'echo "score: $q" > "$EVE_EVAL_LOG_ROOT/score.yaml"\n'
    )
    root = steps_project(
        make_project,
        {"grade.sh": body},
        {
            "steps": ["evaluation/grade.sh"],
            "seed_solver_score": None,
            "seed_solver_skip_evaluation": False,
        },
        extra={"splits": {"train": ["a"], "val": ["b"], "test": []}},
    )
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    with pytest.raises(SystemExit) as exc:
        main(["check", "--project", str(root)])
    out = capsys.readouterr().out
    assert exc.value.code == 0, out
    assert "OK   scorer deterministic: reward 0.5 twice" in out
    assert "evaluation.seed_solver_score: ignored" in out
    assert list(scratch.iterdir()) == []  # the probe's workspaces are gone
    assert not (root / ".honesteval" / "workspaces").exists()
