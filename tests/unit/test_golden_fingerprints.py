"""Golden bytes: fingerprints and the ``.honesteval/`` files of a small project never change.

Pinned before the redesign moved modules (issue 27): a stored trial is reused only when its
fingerprints match, so a changed byte would silently rerun (and re-bill) every stored trial of
every user. Expected values are computed here by hand (hashlib, json, random) as SPEC §1 and
§6.2 define them; the one value that depends on pydantic's dump of the whole configuration
(the scoring fingerprint) is a pinned hex string recorded once.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from pathlib import Path

import pytest

from honesteval.project.loader import load_project
from honesteval.store.fingerprints import fingerprint_path, trial_context
from tests.helpers import run_plain

TARGET = """\
from pathlib import Path


def run(task, candidate_dir, seed):
    return {"answer": (Path(candidate_dir) / "answer.txt").read_text().strip()}


def score(task, rollout):
    return {"reward": 1.0 if rollout["answer"] == task["target"] else 0.0, "feedback": "graded"}
"""

PROJECT_YAML = """\
name: golden
tasks: tasks.jsonl
splits: {seed: 7, train: 0.25, val: 0.5, test: 0.25}
adapter: {kind: python, target: "target:run", scorer: "target:score"}
trials: 2
retries: 0
timeout_s: 5.0
"""

TASKS = [{"id": f"q{i}", "input": {"n": i}, "target": "yes" if i % 2 else "no"} for i in range(8)]

# Recorded from the code before the redesign (its definition: sha256 over a JSON dump of the
# adapter, evaluation and judge settings and pass_threshold, then the target module's path and
# content fingerprint).
SCORING = "2a25e90c119153bdf015a5fb92d533d230c29b611ffff55407292534d33eb524"
# What ``splits:`` said when the split was frozen: sha256 of its sorted-key JSON, 16 hex digits.
SPLITS_DIGEST = hashlib.sha256(
    json.dumps({"seed": 7, "test": 0.25, "train": 0.25, "val": 0.5}).encode()
).hexdigest()[:16]


def _untimed(line: str) -> str:
    return re.sub(r'"(target_s|score_s)":[^,]*,', "", line)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def golden(tmp_path: Path) -> Path:
    root = tmp_path / "golden"
    (root / "candidates" / "base" / "__pycache__").mkdir(parents=True)
    (root / "honesteval.yaml").write_text(PROJECT_YAML)
    (root / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in TASKS))
    (root / "target.py").write_text(TARGET)
    (root / "candidates" / "base" / "answer.txt").write_text("yes\n")
    (root / "candidates" / "base" / "notes.md").write_text("# base\n")
    # byte-code caches are not the candidate (running it writes them)
    (root / "candidates" / "base" / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0\1")
    (root / "candidates" / "solo.txt").write_text("no\n")
    return root


def _folder_fingerprint(files: list[tuple[str, bytes]]) -> str:
    """SPEC §1: sha256 of every file's relative path, NUL, its length, NUL, its bytes, in
    path order."""
    h = hashlib.sha256()
    for rel, data in sorted(files):
        h.update(rel.encode() + b"\0" + str(len(data)).encode() + b"\0" + data)
    return h.hexdigest()


def test_candidate_fingerprints_are_sha256_of_their_content(golden: Path) -> None:
    folder = _folder_fingerprint([("answer.txt", b"yes\n"), ("notes.md", b"# base\n")])
    assert fingerprint_path(golden / "candidates" / "base") == folder
    assert fingerprint_path(golden / "candidates" / "solo.txt") == _sha(b"no\n")
    project = load_project(golden)
    assert project.candidate("base").fingerprint == folder
    assert project.candidate("solo").fingerprint == _sha(b"no\n")


def test_scoring_fingerprint_and_trial_context_are_unchanged(golden: Path) -> None:
    project = load_project(golden)
    assert project.scoring == SCORING
    task = project.all_tasks[3]
    task_json = '{"id":"q3","input":{"n":3},"target":"yes","cluster":null,"metadata":{}}'
    assert trial_context(project.scoring, task) == _sha(f"{SCORING}\0{task_json}".encode())[:16]


@pytest.mark.parametrize("rate_limit", ["{per_s: 5, burst: 5}", "{per_s: 0.5}"])
def test_a_rate_limit_is_not_part_of_the_scoring_fingerprint(golden: Path, rate_limit: str):
    """How fast the target is called is not what it returns: adding or changing the limit
    keeps the pinned value, so no stored trial runs again (another model would not)."""
    limited = PROJECT_YAML.replace(
        'scorer: "target:score"}', f'scorer: "target:score", rate_limit: {rate_limit}}}'
    )
    assert limited != PROJECT_YAML
    (golden / "honesteval.yaml").write_text(limited)
    project = load_project(golden)
    assert project.config.adapter.rate_limit is not None
    assert project.scoring == SCORING


def test_state_files_keep_their_layout_and_bytes(golden: Path) -> None:
    _, result = run_plain(golden, "base", "val")
    state = golden / ".honesteval"

    # splits.json: sorted ids shuffled by random.Random(seed), cut at round(fraction * n)
    ids = sorted(t["id"] for t in TASKS)
    random.Random(7).shuffle(ids)
    splits = json.loads((state / "splits.json").read_text())
    expected_splits = {
        "seed": 7,
        "created_at": splits["created_at"],
        "splits_config": SPLITS_DIGEST,
        "train": ids[:2],
        "val": ids[2:6],
        "test": ids[6:],
    }
    assert (state / "splits.json").read_text() == json.dumps(expected_splits, indent=2) + "\n"

    # the trial log: one compact JSON line per record, the last line per (task, seed) wins
    fp = _folder_fingerprint([("answer.txt", b"yes\n"), ("notes.md", b"# base\n")])
    log = state / "trials" / "val" / "base" / fp[:12] / "trials.jsonl"
    # each record is written as "\n<compact JSON>\n" (a torn line stays its own line)
    text = log.read_text()
    lines = text.split("\n")[1::2]
    assert text == "".join(f"\n{line}\n" for line in lines)
    latest = {}
    for line in lines:
        rec = json.loads(line)
        # compact JSON in field order (timings aside: their float spelling is the serialiser's)
        assert _untimed(line) == _untimed(json.dumps(rec, separators=(",", ":")))
        latest[(rec["task_id"], rec["seed"])] = rec
    tasks = {t["id"]: t for t in TASKS}
    assert sorted(latest) == sorted((tid, s) for tid in ids[2:6] for s in (0, 1))
    for (tid, seed), rec in latest.items():
        task_json = (
            json.dumps(tasks[tid], separators=(",", ":"))[:-1] + ',"cluster":null,"metadata":{}}'
        )
        reward = 1.0 if tasks[tid]["target"] == "yes" else 0.0
        expected = {
            "task_id": tid,
            "candidate": "base",
            "fingerprint": fp,
            "split": "val",
            "trial": seed,
            "seed": seed,
            "status": "ok",
            "reward": reward,
            "feedback": "graded",
            "error": None,
            "errors": [],
            "attempts": 1,
            "started_at": rec["started_at"],
            "target_s": rec["target_s"],
            "score_s": rec["score_s"],
            "rollout": {"answer": "yes"},
            "score": {"reward": reward, "feedback": "graded", "errored": False, "details": {}},
            "tokens": None,
            "cost": None,
            "notes": [],
            "context": _sha(f"{SCORING}\0{task_json}".encode())[:16],
            "scorer": SCORING,
        }
        assert list(rec) == list(expected)
        assert rec == expected

    # the stored result and its index line
    (result_file,) = (state / "results").glob("val__base__*.json")
    stored = json.loads(result_file.read_text())
    assert result_file.read_text() == json.dumps(stored, indent=2) + "\n"
    assert (stored["candidate"], stored["fingerprint"], stored["split"]) == ("base", fp, "val")
    assert (stored["n_tasks"], stored["trials_planned"], stored["trials_ok"]) == (4, 8, 8)
    assert stored == json.loads(result.model_dump_json())
    (index_line,) = (state / "results" / "index.jsonl").read_text().splitlines()
    index = json.loads(index_line)
    assert index_line == json.dumps(index)
    # the pinned columns, in order; a later version may only append new ones
    assert list(index)[:10] == [
        "file", "finished_at", "split", "candidate", "reward", "stderr", "coverage",
        "n_scored", "n_tasks", "subset",
    ]  # fmt: skip
    assert index["file"] == result_file.name
    n_yes = sum(tasks[t]["target"] == "yes" for t in ids[2:6])
    assert index["reward"] == n_yes / 4


#: The models as Prefect's JSON result serializer names them in a persisted flow result
#: (``{"__class__": "<module>.<qualname>", ...}``): the names results were stored under before
#: ``models`` became a package, so stored results and deployments read back unchanged.
PERSISTED_CLASS_NAMES = [
    "honesteval.models.GateDecision",
    "honesteval.models.OnlineState",
    "honesteval.models.SplitResult",
    "honesteval.models.TaskResult",
    "honesteval.models.TrialRecord",
    "honesteval.models.DriftReport",
    "honesteval.models.BestRecord",
    "honesteval.models.Seal",
]


@pytest.mark.parametrize("qualified", PERSISTED_CLASS_NAMES)
def test_models_keep_the_qualified_names_persisted_results_carry(qualified: str) -> None:
    import honesteval.models

    cls = getattr(honesteval.models, qualified.rsplit(".", 1)[1])
    assert f"{cls.__module__}.{cls.__qualname__}" == qualified
