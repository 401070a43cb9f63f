"""Load a project: its file, its tasks, and the :class:`Project` that answers for its frozen
split and its candidates.

Everything here is plain Python: the flows and the CLI call it, tests call it directly. Each
job has its own module: the schema (:mod:`~honesteval.project.schema`), reading the file
(:mod:`~honesteval.project.config_file`) and the tasks (:mod:`~honesteval.project.tasks_file`),
the scoring fingerprint (:mod:`~honesteval.project.scoring_fingerprint`), the frozen split
(:mod:`~honesteval.project.split`) and the candidates (:mod:`~honesteval.project.candidates`).
"""

from __future__ import annotations

from collections.abc import KeysView
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from honesteval.errors import ConfigError
from honesteval.models import Candidate, GateConfig, Task
from honesteval.project import split as frozen
from honesteval.project.candidates import SNAPSHOTS_DIR, candidate_paths, find_candidate
from honesteval.project.config_file import PROJECT_FILE, parse_project_file
from honesteval.project.schema import ProjectConfig
from honesteval.project.scoring_fingerprint import scoring_fingerprint
from honesteval.project.split import SPLIT_NAMES
from honesteval.project.tasks_file import load_tasks
from honesteval.redaction import register_secret_env
from honesteval.store.state_dir import STATE_DIR


@dataclass
class Project:
    """A loaded project. Construct with :func:`load_project`."""

    root: Path
    config: ProjectConfig
    _tasks: list[Task] = field(repr=False)
    #: ``honesteval.yaml``'s modification time when it was read: what was built from this
    #: project (its adapter) is what the file said then (None: not read from a file)
    file_mtime_ns: int | None = None

    @property
    def file(self) -> Path:
        return self.root / PROJECT_FILE

    @property
    def state_dir(self) -> Path:
        return self.root / STATE_DIR

    @property
    def candidates_dir(self) -> Path:
        return (self.root / self.config.candidates).resolve()

    @cached_property
    def gate_config(self) -> GateConfig:
        values = {"pass_threshold": self.config.pass_threshold, **self.config.gate}
        return GateConfig(**values)

    @cached_property
    def scoring(self) -> str:
        return scoring_fingerprint(self.root, self.config)

    @property
    def all_tasks(self) -> list[Task]:
        return list(self._tasks)

    @cached_property
    def _task_by_id(self) -> dict[str, Task]:
        return {t.id: t for t in self._tasks}

    @property
    def task_ids(self) -> KeysView[str]:
        """The ids of every task of the tasks file (a view: membership is a dict lookup)."""
        return self._task_by_id.keys()

    # -- splits (honesteval.project.split) --------------------------------------------------
    def frozen_split(self) -> dict[str, list[str]]:
        """The split, frozen in ``.honesteval/splits.json`` on first use and read after
        (:func:`honesteval.project.split.frozen_split`)."""
        return frozen.frozen_split(self)

    def refreeze_split(self) -> dict[str, list[str]]:
        """Write a lost ``splits.json`` again, refused when a task with stored trials would
        cross the test boundary (:func:`honesteval.project.split.refreeze_split`)."""
        return frozen.refreeze_split(self)

    def tasks(self, split: str) -> list[Task]:
        """The tasks of one split, in the frozen order."""
        if split not in SPLIT_NAMES:
            raise ConfigError(f"unknown split {split!r}: use one of train, val, test")
        return [self._task_by_id[tid] for tid in self.frozen_split()[split]]

    # -- candidates (honesteval.project.candidates) -----------------------------------------
    @property
    def snapshots_dir(self) -> Path:
        """Candidates the Python API was given in memory or as a path, stored by content."""
        return self.state_dir / SNAPSHOTS_DIR

    def candidate_names(self) -> list[str]:
        return list(candidate_paths(self.candidates_dir))

    def candidate(self, name: str) -> Candidate:
        """A candidate by its name in the candidates folder, or ``@<fingerprint[:16]>``, a
        snapshot under ``.honesteval/candidates/``; never a path
        (:func:`honesteval.project.candidates.find_candidate`)."""
        return find_candidate(name, self.candidates_dir, self.snapshots_dir)


def load_project(path: str | Path) -> Project:
    """Load a project from its folder (or its ``honesteval.yaml``) and validate its tasks."""
    p = Path(path).expanduser()
    file = p if p.is_file() else p / PROJECT_FILE
    if not file.is_file():
        raise ConfigError(f"no {PROJECT_FILE} in {p}: pass --project PATH or run `honesteval init`")
    root = file.parent.resolve()
    mtime_ns = file.stat().st_mtime_ns  # before the read: a later edit is never taken for it
    config = parse_project_file(file)
    register_secret_env(
        *config.adapter.secret_env_names(),
        None if config.judge is None else config.judge.api_key_env,
    )
    tasks = load_tasks(root / config.tasks)
    return Project(root=root, config=config, _tasks=tasks, file_mtime_ns=mtime_ns)
