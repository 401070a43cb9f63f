"""``gate --format markdown``: the PR comment shows both sides' trials by status (failed ones
included), read back from the results the decision was made on."""

from __future__ import annotations

from pathlib import Path

import honesteval
from honesteval.project.loader import load_project
from honesteval.project.scaffold import scaffold_project
from honesteval.store.reading import decided_on
from honesteval.store.state_dir import Store
from honesteval.views.text import decision_markdown

CRASHES_AT_SEED_1 = """
import random
from pathlib import Path


def run(task, candidate_dir, seed):
    prompt = (Path(candidate_dir) / "prompt.txt").read_text()
    if "crash" in prompt and seed == 1:
        raise ValueError("the candidate crashed")
    return task["target"] if random.Random(f"{task['id']}:{seed}").random() < 0.5 else "no"


def score(task, output):
    return {"reward": 1.0 if output == task["target"] else 0.0}
"""


def test_the_markdown_shows_both_sides_trials_failed_ones_included(tmp_path: Path) -> None:
    scaffold_project(tmp_path)
    (tmp_path / "target.py").write_text(CRASHES_AT_SEED_1)
    honesteval.gate(tmp_path, "baseline", orchestration="local")
    crashy = tmp_path / "candidates" / "crashy"
    crashy.mkdir()
    (crashy / "prompt.txt").write_text("crash now and then\n")
    decision = honesteval.gate(tmp_path, "crashy", orchestration="local", confirm=False)
    n_val = len(load_project(tmp_path).frozen_split()["val"])
    results = decided_on(Store(tmp_path / ".honesteval"), decision)
    assert [r.candidate for r in results] == ["baseline", "crashy"]
    text = decision_markdown(decision, results)
    # 3 trials a task (the scaffold's), seeds 0..2: the candidate raises at seed 1 only
    planned = 3 * n_val
    assert (
        f"| trials | {planned} ok, 0 failed, 0 missing (0 infra_error, 0 scorer_error) of "
        f"{planned} | {2 * n_val} ok, {n_val} failed, 0 missing (0 infra_error, 0 scorer_error) "
        f"of {planned} |"
    ) in text


def test_a_side_edited_since_the_decision_is_left_out(tmp_path: Path) -> None:
    scaffold_project(tmp_path)
    decision = honesteval.gate(tmp_path, "baseline", orchestration="local")
    (tmp_path / "candidates" / "baseline" / "prompt.txt").write_text("Check it twice.\n")
    honesteval.evaluate(tmp_path, "baseline", split="val", orchestration="local")
    assert decided_on(Store(tmp_path / ".honesteval"), decision) == []
