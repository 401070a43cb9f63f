"""The per-trial evaluation workspace, laid out as Eve's evaluation workspace::

    task.json                 the task (HONESTEVAL_TASK)
    solver/                   a copy of the candidate + output.json; read-only to the steps
    solver_examples/<name>/   with include_solver_examples: the current best, read-only
        solver/  score.yaml
    logs/evaluate/            score.yaml, error.txt, steps/step_NN_<name>/

Permissions protect nothing when the steps run as root, so the candidate copy is also hashed
before and after every step (:func:`solver_hash`).
"""

from __future__ import annotations

import json
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from honesteval.models import Candidate, Rollout, Task
from honesteval.redaction import write_redacted
from honesteval.store.fingerprints import fingerprint_path

_WRITE = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH


class StepFailed(Exception):
    """A step could not produce a score: the trial becomes a scorer_error."""


class RuleBroken(Exception):
    """The candidate broke a rule of its evaluation that it was able to break (it edited its
    read-only copy, or the judge's prompt or rubric): the trial is ``failed``, not an outage."""


@dataclass(frozen=True)
class Example:
    """A solver example for the judge (Eve's ``solver_examples/``): files and a score."""

    name: str
    path: Path
    score: dict[str, Any]


@dataclass(frozen=True)
class Workspace:
    root: Path

    @property
    def solver(self) -> Path:
        return self.root / "solver"

    @property
    def log_root(self) -> Path:
        return self.root / "logs" / "evaluate"

    @property
    def score_path(self) -> Path:
        return self.log_root / "score.yaml"

    @property
    def task_file(self) -> Path:
        return self.root / "task.json"

    @property
    def output_file(self) -> Path:
        return self.solver / "output.json"


def _copy_candidate(src: Path, dest: Path) -> None:
    if src.is_dir():
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    else:
        dest.mkdir()
        shutil.copy2(src, dest / src.name)


def set_read_only(root: Path, read_only: bool = True) -> None:
    """Clear (or restore) the write bits of a tree, as Eve freezes ``solver/``."""
    if not root.exists():  # a step deleted it: the hash check reports that
        return
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        path.chmod(mode & ~_WRITE if read_only else mode | stat.S_IWUSR)


def remove(root: Path) -> None:
    """Delete a workspace, read-only parts included."""
    if root.exists():
        set_read_only(root, read_only=False)
        shutil.rmtree(root)


def build(
    root: Path,
    task: Task,
    rollout: Rollout,
    candidate: Candidate | None,
    examples: list[Example],
) -> Workspace:
    """A fresh workspace for one (task, trial); a leftover one (an errored run) is replaced."""
    remove(root)
    ws = Workspace(root)
    (ws.log_root / "steps").mkdir(parents=True)
    if candidate is None:
        ws.solver.mkdir()
    else:
        _copy_candidate(Path(candidate.path), ws.solver)
    write_redacted(ws.task_file, task.model_dump_json(indent=2))
    write_redacted(ws.output_file, json.dumps(rollout.output, indent=2, default=str))
    for example in examples:
        folder = root / "solver_examples" / example.name
        _copy_candidate(example.path, folder / "solver")
        write_redacted(
            folder / "score.yaml",
            yaml.safe_dump({"example_id": example.name, "score": example.score}, sort_keys=False),
        )
    set_read_only(ws.solver)
    if examples:
        set_read_only(root / "solver_examples")
    return ws


def write_status(step_dir: Path, ok: bool, detail: str) -> None:
    """Eve's ``status.txt``: ``ok`` or ``failed`` on the first line; why on the second."""
    write_redacted(step_dir / "status.txt", f"{'ok' if ok else 'failed'}\n{detail}\n")


def solver_hash(ws: Workspace) -> str:
    """sha256 of the candidate copy; "missing" when a step deleted it."""
    return fingerprint_path(ws.solver) if ws.solver.is_dir() else "missing"
