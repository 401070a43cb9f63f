"""Eve's configs load and run unchanged: copied, symlinked or absolute, with Eve's rewards."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
import yaml

from honesteval.adapters.eve.config import EVE_KEYS_NOT_USED
from honesteval.cli import main
from honesteval.evaluation.plan import adapter_for
from tests.eve_tree import (
    EVAL_CONFIG,
    EVAL_SCRIPT,
    EVE_BLOCK,
    EXPECTED,
    eve_reward,
    write_candidates,
    write_eve_tree,
)
from tests.helpers import run_plain


def eve_project(root: Path, evaluation: object) -> Path:
    """A kind-none project whose candidates are Eve solvers (evaluate.py + candidate.py)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "tasks.jsonl").write_text('{"id": "cp26", "input": {"n": 26}}\n')
    write_candidates(root / "candidates")
    config = {
        "name": "eve-cp",
        "splits": {"train": [], "val": ["cp26"], "test": []},
        "adapter": {"kind": "none"},
        "trials": 1,
        "timeout_s": 60,
        "evaluation": evaluation,
    }
    (root / "honesteval.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return root


def layouts(tmp_path: Path) -> dict[str, Path]:
    eve = write_eve_tree(tmp_path / "eve")
    copied = eve_project(tmp_path / "copied", EVE_BLOCK)
    shutil.copytree(eve / "configs", copied / "configs")
    linked = eve_project(tmp_path / "linked", EVE_BLOCK)
    (linked / "configs").symlink_to(eve / "configs", target_is_directory=True)
    absolute = eve_project(tmp_path / "absolute", {**EVE_BLOCK, "steps": [str(eve / EVAL_SCRIPT)]})
    by_file = eve_project(tmp_path / "by_file", EVAL_CONFIG)
    (by_file / "configs").symlink_to(eve / "configs", target_is_directory=True)
    return {"copied": copied, "linked": linked, "absolute": absolute, "by_file": by_file}


@pytest.mark.parametrize("layout", ["copied", "linked", "absolute", "by_file"])
def test_eve_circle_packing_block_runs_unchanged_with_eves_rewards(tmp_path, layout):
    root = layouts(tmp_path)[layout]
    for name, expected in EXPECTED.items():
        records, _ = run_plain(root, name)
        assert [r.status for r in records] == ["ok"], records[0].error
        own = eve_reward(
            tmp_path / "eve" / EVAL_SCRIPT,
            root / "candidates" / name,
            tmp_path / f"eve-ws-{layout}-{name}",
        )
        assert records[0].reward == pytest.approx(own) == pytest.approx(expected)
    ws = Path(records[0].score["details"]["workspace"])
    assert (
        (ws / "logs/evaluate/error.txt")
        .read_text()
        .startswith("Evaluation command failed with exit code 1")
    )  # "broken" ran last: a real failure, scored 0, with Eve's error.txt


def test_every_eve_key_loads_and_the_unused_ones_are_named(tmp_path, caplog):
    # Eve's math_proof block: a judge step, a renderer, examples, an expression, seed keys.
    (tmp_path / "p" / "configs/eve/evaluation/math_proof/prompt").mkdir(parents=True)
    (tmp_path / "p" / "configs/eve/evaluation/math_proof/prompt/ENTRYPOINT.md").write_text("x")
    (tmp_path / "p" / "configs/eve/evaluation/math_proof/immutable").mkdir()
    dims = {"coverage": 0.0, "correctness": 0.0, "dependency": 0.0, "clarity": 0.0, "strategy": 0.0}
    block = {
        "steps": [
            {
                "immutable": "configs/eve/evaluation/math_proof/immutable",
                "prompt": "configs/eve/evaluation/math_proof/prompt",
            }
        ],
        "immutable_renderer": {
            "_target_": "scaling_evolve.algorithms.eve.workspace."
            "immutable_renderers.default.DefaultRenderer"
        },
        "include_solver_examples": True,
        "scalar_score_expression": 'min(score["dimensions"]["coverage"], 1.0)',
        "failure_score": {"dimensions": dims},
        "seed_solver_score": {"dimensions": dims},
        "seed_solver_skip_evaluation": True,
    }
    root = eve_project(tmp_path / "p", block)
    cfg = yaml.safe_load((root / "honesteval.yaml").read_text())
    cfg["judge"] = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}
    (root / "honesteval.yaml").write_text(yaml.safe_dump(cfg))
    with caplog.at_level(logging.INFO, logger="honesteval"):
        adapter = adapter_for(str(root))
    steps = adapter.scorer.steps
    assert [s.name for s in steps] == [
        "prompt"
    ]  # Eve's rule: a folder without prompt_ keeps its name
    for key in EVE_KEYS_NOT_USED:
        assert any(f"evaluation.{key}: " in m for m in caplog.messages), key


def test_a_step_file_outside_the_project_is_part_of_the_fingerprint(tmp_path):
    root = layouts(tmp_path)["absolute"]
    first, _ = run_plain(root, "grid")
    again, _ = run_plain(root, "grid")
    assert again == []  # reused: same candidate, same evaluator
    script = tmp_path / "eve" / EVAL_SCRIPT
    script.write_text(script.read_text() + "\n# edited\n")
    rerun, _ = run_plain(root, "grid")
    assert len(rerun) == 1 and rerun[0].status == "ok"
    assert rerun[0].score["details"]["evaluator"] != first[0].score["details"]["evaluator"]


def test_path_mapping_form_of_a_shell_step(tmp_path):
    eve = write_eve_tree(tmp_path / "eve")
    root = eve_project(tmp_path / "p", {**EVE_BLOCK, "steps": [{"path": EVAL_SCRIPT}]})
    (root / "configs").symlink_to(eve / "configs", target_is_directory=True)
    records, _ = run_plain(root, "grid")
    assert records[0].status == "ok" and records[0].reward == pytest.approx(EXPECTED["grid"])


def test_scalar_score_expression_is_the_reward(tmp_path):
    root = eve_project(
        tmp_path / "p",
        {
            "steps": ["evaluation/dims.sh"],
            "scalar_score_expression": "min(dims.a, dims.b, 0.5 * dims.a + 0.5 * dims.b)",
            "failure_score": {"dims": {"a": 0.0, "b": 0.0}},
        },
    )
    (root / "evaluation").mkdir()
    (root / "evaluation/dims.sh").write_text(
        'printf "dims:\\n  a: 0.9\\n  b: 0.5\\n" > "$EVE_EVAL_LOG_ROOT/score.yaml"\n'
    )
    records, _ = run_plain(root, "grid")
    assert records[0].status == "ok" and records[0].reward == pytest.approx(0.5)


def test_a_candidate_that_makes_a_later_steps_folder_is_scored_as_eve_scores_it(tmp_path):
    # Issue 40, hole 4: the "grid" solver's evaluate.py also makes the log folder of the step
    # after Eve's evaluation.sh. That step used to crash (FileExistsError: a scorer_error on
    # every trial, nothing scored); Eve scores the candidate, and so does honesteval now.
    eve = write_eve_tree(tmp_path / "eve")
    report = eve / "configs/eve/evaluation/circle_packing/report.sh"
    report.write_text('echo "reported" >&2\n')
    block = {**EVE_BLOCK, "steps": [EVAL_SCRIPT, str(report.relative_to(eve))]}
    root = eve_project(tmp_path / "p", block)
    shutil.copytree(eve / "configs", root / "configs")
    solver = root / "candidates/grid"
    pre_create = (
        "import os, pathlib\n"
        "pathlib.Path(os.environ['EVE_EVAL_LOG_ROOT'], 'steps', 'step_02_report')"
        ".mkdir(parents=True, exist_ok=True)\n"
    )
    (solver / "evaluate.py").write_text(pre_create + (solver / "evaluate.py").read_text())
    records, result = run_plain(root, "grid")
    own = eve_reward(eve / EVAL_SCRIPT, solver, tmp_path / "eve-ws")
    assert [(r.status, r.reward) for r in records] == [("ok", pytest.approx(own))]
    assert own == pytest.approx(EXPECTED["grid"]) and result.coverage == 1.0
    ws = Path(records[0].score["details"]["workspace"])
    assert (ws / "logs/evaluate/steps/step_02_report/stderr.txt").read_text() == "reported\n"


def test_eves_evaluation_sh_edited_by_a_candidate_stops_the_next_run(tmp_path, capsys):
    # Issue 40, hole 1, with Eve's tree behind a symlinked configs/: the "grid" solver's own
    # evaluate.py appends to Eve's evaluation.sh (outside the project) while it is scored.
    # That trial fails; the next run refuses, naming the script, until it is restored.
    root = layouts(tmp_path)["linked"]
    with (root / "honesteval.yaml").open("a") as fh:  # unconfined: Eve's tree is writable
        fh.write("sandbox: off\n")
    script = tmp_path / "eve" / EVAL_SCRIPT
    clean = script.read_bytes()
    solver = root / "candidates/grid"
    attack = f"open({str(script)!r}, 'a').write('echo score: 1.0\\n')\n"
    (solver / "evaluate.py").write_text(attack + (solver / "evaluate.py").read_text())
    records, _ = run_plain(root, "grid")
    assert records[0].status == "failed" and str(script) in records[0].error
    with pytest.raises(SystemExit) as exc:
        main(["evaluate", "--project", str(root), "--candidate", "loose"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and f"error: {script} differs from the evaluator's" in err, err
    script.write_bytes(clean)  # restored: the next run scores, with Eve's reward
    records, _ = run_plain(root, "loose")
    assert [(r.status, r.reward) for r in records] == [("ok", pytest.approx(EXPECTED["loose"]))]
