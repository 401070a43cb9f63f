"""What the adapters read of a loaded project, as a protocol: the ``project`` package builds
its schema from the adapters' configs, so the adapters name no type of ``project`` (no import
circle between the two packages). :class:`honesteval.project.loader.Project` is one."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from honesteval.adapters._registry import AdapterConfig
    from honesteval.adapters.eve.config import EvaluationConfig, JudgeConfig
    from honesteval.models import Candidate, Task


class ProjectSettings(Protocol):
    """The settings of ``honesteval.yaml`` the adapters read."""

    @property
    def name(self) -> str: ...
    @property
    def adapter(self) -> AdapterConfig: ...
    @property
    def evaluation(self) -> EvaluationConfig | None: ...
    @property
    def judge(self) -> JudgeConfig | None: ...
    @property
    def timeout_s(self) -> float: ...


class ProjectView(Protocol):
    """A loaded project, as the adapters see it."""

    @property
    def root(self) -> Path: ...
    @property
    def config(self) -> ProjectSettings: ...
    @property
    def state_dir(self) -> Path: ...
    @property
    def all_tasks(self) -> list[Task]: ...
    def tasks(self, split: str) -> list[Task]: ...
    def frozen_split(self) -> dict[str, list[str]]: ...
    def candidate(self, name: str) -> Candidate: ...
