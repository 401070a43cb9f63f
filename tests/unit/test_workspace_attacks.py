"""A candidate's code, run in its evaluation workspace, cannot make honesteval write outside the
workspace or make itself ungradeable: a link or a planted entry where honesteval keeps its
files is the candidate's broken rule (``failed``), never missing data. Real files, real links,
the candidate's own Python run by a shell step as Eve's performance.sh runs it."""

from __future__ import annotations

import errno
import sys
from pathlib import Path

import pytest

from honesteval.adapters.eve._steps import _in_workspace
from honesteval.adapters.eve._workspace import Workspace
from tests.helpers import run_plain

# The user's steps: run the candidate (performance.sh), then grade what it left.
PERFORMANCE = 'python3 "$EVE_SOLVER_ROOT/attack.py"\n'
GRADE = (
    'score=$(cat "$EVE_SOLVER_ROOT/quality.txt")\n'
    'printf "score: %s\\n" "$score" > "$EVE_EVAL_LOG_ROOT/score.yaml"\n'
)
AGENT = "print('```yaml\\nscore: 0.5\\nsummary: judged\\n```')\n"


def attacked_project(make_project, attack: str, *, judge: bool = False) -> Path:
    """One task, two trials of candidate `base` (quality 0.25), whose attack.py is ``attack``
    (Python; ``ws`` is the workspace root, ``outside`` a file the user owns outside it).
    ``judge``: a command judge gives the score (0.5) instead of grade.sh."""
    steps: list[object] = ["evaluation/performance.sh", "evaluation/grade.sh"]
    config: dict[str, object] = {"adapter": {"kind": "none"}, "trials": 2}
    if judge:
        steps.append({"prompt": "evaluation/prompt_assess"})
        config["judge"] = {"command": [sys.executable, "AGENT"]}
    config["evaluation"] = {"steps": steps, "failure_score": {"score": 0.0}}
    root = make_project(
        tasks=[{"id": "a", "input": "x"}],
        candidates={"base": 0.25},
        config=config,
        target_code="def run(task, candidate_dir, seed):\n    return None\n",
    )
    (root / "evaluation/prompt_assess").mkdir(parents=True)
    (root / "evaluation/prompt_assess/ENTRYPOINT.md").write_text("Grade it.")
    (root / "evaluation/performance.sh").write_text(PERFORMANCE)
    (root / "evaluation/grade.sh").write_text("true\n" if judge else GRADE)
    (root / "agent.py").write_text(AGENT)
    text = (root / "honesteval.yaml").read_text()
    (root / "honesteval.yaml").write_text(text.replace("AGENT", str(root / "agent.py")))
    (root.parent / "outside.txt").write_text("the user's own file\n")
    prelude = (
        "import os\nfrom pathlib import Path\n"
        "ws = Path(os.environ['EVE_WORKSPACE_ROOT'])\n"
        f"outside = Path({str(root.parent / 'outside.txt')!r})\n"
    )
    (root / "candidates/base/attack.py").write_text(prelude + attack)
    return root


def outcomes(records) -> list[tuple[str, float | None]]:
    return [(r.status, r.reward) for r in records]


def test_score_yaml_linked_out_of_the_workspace_is_a_failed_trial(make_project):
    # Issue 40, hole 3: the verdict used to be merged into the linked file, and the trial ok.
    attack = "(ws / 'logs/evaluate/score.yaml').symlink_to(outside)\n"
    root = attacked_project(make_project, attack, judge=True)
    records, result = run_plain(root)
    assert outcomes(records) == [("failed", 0.0), ("failed", 0.0)]
    assert "logs/evaluate/score.yaml in the workspace is a link to" in records[0].error
    assert "the candidate broke a rule" in records[0].error
    assert (root.parent / "outside.txt").read_text() == "the user's own file\n"
    assert result.trials_failed == 2 and result.coverage == 1.0  # counted, not missing


def test_a_log_folder_linked_out_of_the_workspace_is_a_failed_trial(make_project, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    attack = (
        f"elsewhere = Path({str(elsewhere)!r})\nelsewhere.mkdir(exist_ok=True)\n"
        "import shutil\nshutil.rmtree(ws / 'logs/evaluate/steps')\n"
        "(ws / 'logs/evaluate/steps').symlink_to(elsewhere)\n"
    )
    root = attacked_project(make_project, attack)
    with (root / "honesteval.yaml").open("a") as fh:  # unconfined: `elsewhere` is writable
        fh.write("sandbox: off\n")
    records, _ = run_plain(root)
    assert outcomes(records) == [("failed", 0.0), ("failed", 0.0)]
    assert "logs/evaluate/steps in the workspace is a link to" in records[0].error
    assert list(elsewhere.iterdir()) == []  # no stdout.txt, status.txt written through it


def test_a_precreated_step_folder_is_graded_as_eve_grades_it(make_project):
    # Issue 40, hole 4: `mkdir` of the next step's folder crashed that step (FileExistsError),
    # a scorer_error on every trial. The folders exist before any step runs now: the
    # candidate's mkdir -p changes nothing and it is scored, 0.25, as Eve scores it.
    attack = "(ws / 'logs/evaluate/steps/step_02_grade').mkdir(parents=True, exist_ok=True)\n"
    records, result = run_plain(attacked_project(make_project, attack))
    assert outcomes(records) == [("ok", 0.25), ("ok", 0.25)]
    assert result.reward == pytest.approx(0.25) and result.coverage == 1.0


@pytest.mark.parametrize(
    "planted",
    [
        "(ws / 'logs/evaluate/steps/step_02_grade/status.txt').write_text('ok')\n",
        "(ws / 'logs/evaluate/steps/step_02_grade/stdout.txt').symlink_to(outside)\n",
    ],
    ids=["a file", "a link to the user's file"],
)
def test_an_entry_planted_in_a_later_steps_folder_is_a_failed_trial(make_project, planted):
    root = attacked_project(make_project, planted)
    records, _ = run_plain(root)
    assert outcomes(records) == [("failed", 0.0), ("failed", 0.0)]
    assert "logs/evaluate/steps/step_02_grade was changed before its step ran" in records[0].error
    assert (root.parent / "outside.txt").read_text() == "the user's own file\n"


def test_a_folder_where_score_yaml_goes_is_a_failed_trial(make_project):
    attack = "(ws / 'logs/evaluate/score.yaml').mkdir()\n"
    records, _ = run_plain(attacked_project(make_project, attack, judge=True))
    assert outcomes(records) == [("failed", 0.0), ("failed", 0.0)]
    assert "logs/evaluate/score.yaml in the workspace is a folder" in records[0].error


def test_a_link_inside_the_workspace_is_replaced_not_written_through(make_project):
    # score.yaml made a link to the candidate's own solver/quality.txt (inside the workspace):
    # honesteval's write replaces the link and never changes the file it pointed to.
    attack = "(ws / 'logs/evaluate/score.yaml').symlink_to(ws / 'task.json')\n"
    records, _ = run_plain(attacked_project(make_project, attack, judge=True))
    assert outcomes(records) == [("ok", 0.5), ("ok", 0.5)]
    ws = Path(records[0].score["details"]["workspace"])
    assert not (ws / "logs/evaluate/score.yaml").is_symlink()
    assert '"id": "a"' in (ws / "task.json").read_text()  # the link's target is intact


def test_only_file_faults_inside_the_workspace_are_the_candidates(tmp_path):
    ws = Workspace(tmp_path / "ws")
    inside = str(ws.root / "logs/evaluate/score.yaml")
    assert _in_workspace(FileExistsError(errno.EEXIST, "File exists", inside), ws)
    assert _in_workspace(IsADirectoryError(errno.EISDIR, "Is a directory", inside), ws)
    assert not _in_workspace(OSError(errno.ENOSPC, "No space left on device", inside), ws)
    assert not _in_workspace(OSError(errno.EIO, "Input/output error", inside), ws)
    assert not _in_workspace(PermissionError(errno.EACCES, "denied", str(tmp_path / "x")), ws)
    assert not _in_workspace(OSError(errno.EEXIST, "File exists"), ws)  # no file named
