"""The per-trial evaluation workspace, laid out as Eve's evaluation workspace::

    task.json                 the task (HONESTEVAL_TASK)
    solver/                   a copy of the candidate + output.json; read-only to the steps
    solver_examples/<name>/   with include_solver_examples: the current best, read-only
        solver/  score.yaml
    logs/evaluate/            score.yaml, error.txt, steps/step_NN_<name>/

Permissions protect nothing when the steps run as root, so the candidate copy is also hashed
before and after every step (:func:`solver_hash`).

The candidate's code runs in the workspace (a shell step runs it) and may leave links there.
Every file honesteval reads or writes in it goes through :meth:`Workspace.real`: a path that
is, or lies under, a link leaving the workspace is the candidate breaking a rule
(:class:`RuleBroken`), never followed; a write is a temp file and ``os.replace`` in the real
folder, so a link in the file's own place is replaced, not written through. Every step's
folder is made with the workspace, before any step runs (:func:`build`).
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
from honesteval.redaction import redact
from honesteval.store.fingerprints import fingerprint_path
from honesteval.store.state_dir import atomic_write_bytes

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

    @property
    def set_aside(self) -> Path:
        """Beside the workspace, outside what a step or a judge sees: entries moved out of the
        rubric's way (``<workspace>.set_aside/step_NN_<name>/``)."""
        return self.root.with_name(self.root.name + ".set_aside")

    def step_dir(self, n: int, name: str) -> Path:
        """Step ``n``'s log folder (``name`` already made safe for a file name)."""
        return self.log_root / "steps" / f"step_{n:02d}_{name}"

    def real(self, path: Path) -> Path:
        """``path`` (under :attr:`root`) in its real folder, after checking that neither it
        nor a folder above it is a link leaving the workspace, and that it is no folder."""
        root = self.root.resolve()
        current = self.root
        for part in path.relative_to(self.root).parts:
            current = current / part
            if current.is_symlink() and not current.resolve().is_relative_to(root):
                raise RuleBroken(
                    f"{current.relative_to(self.root)} in the workspace is a link to "
                    f"{current.resolve()}, outside it (the candidate broke a rule: honesteval "
                    "reads and writes only inside the workspace)"
                )
        real = path.parent.resolve() / path.name
        if real.is_dir() and not real.is_symlink():
            raise RuleBroken(
                f"{path.relative_to(self.root)} in the workspace is a folder where honesteval "
                "keeps a file (the candidate broke a rule)"
            )
        return real

    def write(self, path: Path, text: str) -> None:
        """Write a text file honesteval makes in the workspace, redacted (a key a judge
        echoes stays out of it), by a temp file and ``os.replace`` in its real folder."""
        self.write_bytes(path, redact(text).encode("utf-8"))

    def write_bytes(self, path: Path, data: bytes) -> None:
        atomic_write_bytes(self.real(path), data)

    def read(self, path: Path) -> str | None:
        """A text file of the workspace (never through a link leaving it); None if absent."""
        real = self.real(path)
        if not real.is_file():
            return None
        return real.read_text(encoding="utf-8", errors="replace")

    def check_step_dir(self, step_dir: Path) -> None:
        """A step's folder, made with the workspace, must still be an empty real folder when
        its step starts: anything else in its place is the candidate's doing."""
        real = self.real(step_dir / "status.txt").parent
        if step_dir.is_symlink() or not real.is_dir() or any(real.iterdir()):
            raise RuleBroken(
                f"{step_dir.relative_to(self.root)} was changed before its step ran (a link, "
                "a file, or entries honesteval did not write): the candidate broke a rule"
            )


def _copy_candidate(src: Path, dest: Path) -> None:
    if src.is_dir():
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    else:
        dest.mkdir()
        shutil.copy2(src, dest / src.name)


def set_read_only(root: Path, read_only: bool = True) -> None:
    """Clear (or restore) the write bits of a tree, as Eve freezes ``solver/``."""
    if root.is_symlink() or not root.exists():  # a step replaced or deleted it: the hash
        return  # check reports that, and nothing is changed through a link
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
    step_names: list[str],
) -> Workspace:
    """A fresh workspace for one (task, trial), with a log folder for each step (named in
    ``step_names``, in order); a leftover one (an errored run) is replaced."""
    ws = Workspace(root)
    remove(root)
    remove(ws.set_aside)
    for n, name in enumerate(step_names, start=1):
        ws.step_dir(n, name).mkdir(parents=True)
    (ws.log_root / "steps").mkdir(parents=True, exist_ok=True)
    if candidate is None:
        ws.solver.mkdir()
    else:
        _copy_candidate(Path(candidate.path), ws.solver)
    ws.write(ws.task_file, task.model_dump_json(indent=2))
    ws.write(ws.output_file, json.dumps(rollout.output, indent=2, default=str))
    for example in examples:
        folder = root / "solver_examples" / example.name
        _copy_candidate(example.path, folder / "solver")
        ws.write(
            folder / "score.yaml",
            yaml.safe_dump({"example_id": example.name, "score": example.score}, sort_keys=False),
        )
    set_read_only(ws.solver)
    if examples:
        set_read_only(root / "solver_examples")
    return ws


def write_status(ws: Workspace, step_dir: Path, ok: bool, detail: str) -> None:
    """Eve's ``status.txt``: ``ok`` or ``failed`` on the first line; why on the second."""
    ws.write(step_dir / "status.txt", f"{'ok' if ok else 'failed'}\n{detail}\n")


def solver_hash(ws: Workspace) -> str:
    """sha256 of the candidate copy; "missing" when a step deleted it."""
    return fingerprint_path(ws.solver) if ws.solver.is_dir() else "missing"
