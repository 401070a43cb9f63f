"""``kind: custom``: an adapter class of the user's own, named ``target: module:Class``.

The class implements :class:`CustomAdapter` (README, "Your own adapter"). honesteval keeps
the tasks, the frozen split and the sealed test; the class runs trials and may grade them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import Field

from honesteval.errors import ConfigError
from honesteval.models import Candidate, Rollout, Score, Task

from ._base import AdapterParts, ModuleRef, TargetConfig
from ._loading import load_callable

if TYPE_CHECKING:
    from honesteval.adapters.project_view import ProjectView


class CustomAdapter(Protocol):
    """What a ``kind: custom`` class provides.

    * ``__init__(**options)``: called once per process with the adapter's ``options:`` mapping.
    * ``run_target(task, candidate, *, seed) -> Rollout | JSON-able output``: one trial; forward
      ``seed`` to anything stochastic, raise ``honesteval.InfraError`` for an infrastructure
      fault (retried, then missing data); any other exception is the candidate's failure.
    * ``score(task, rollout) -> Score`` (optional): used when the project has neither
      ``scorer:`` nor ``evaluation:``.
    * ``enforces_timeout: bool`` (optional, default False): True when ``run_target`` stops by
      itself at the project's ``timeout_s``; otherwise it runs in a thread that is abandoned
      at ``timeout_s`` (``TargetTimeout``: the candidate's failure unless ``timeout_is:
      missing``). Raise ``honesteval.ServiceTimeout`` for a network timeout of your own.
    """

    def run_target(self, task: Task, candidate: Candidate, *, seed: int) -> Rollout: ...


class CustomTarget:
    """Runs trials through the user's adapter object."""

    def __init__(self, adapter: CustomAdapter):
        self.adapter = adapter
        self.enforces_timeout = bool(getattr(adapter, "enforces_timeout", False))

    def run(self, task: Task, candidate: Candidate, *, seed: int, trial: int) -> Rollout:
        result = self.adapter.run_target(task, candidate, seed=seed)
        return result if isinstance(result, Rollout) else Rollout(output=result)


class CustomScorer:
    """Grades with the user's adapter object's ``score``."""

    def __init__(self, adapter: Any):
        self.adapter = adapter

    def score(self, task: Task, rollout: Rollout) -> Score:
        result: Score = self.adapter.score(task, rollout)
        return result


class CustomAdapterConfig(TargetConfig):
    """``kind: custom``: ``target: module:Class`` and the keyword ``options`` it is built with."""

    kind: Literal["custom"]
    target: ModuleRef
    options: dict[str, Any] = Field(default_factory=dict)
    brings_scorer = True

    def build(self, project: ProjectView) -> AdapterParts:
        cls = load_callable(project.root, self.target)
        if not isinstance(cls, type):
            raise ConfigError(f"adapter target {self.target!r} must be a class, not a function")
        if not callable(getattr(cls, "run_target", None)):
            raise ConfigError(f"adapter class {self.target!r} has no run_target() method")
        try:
            adapter = cls(**self.options)
        except Exception as exc:
            raise ConfigError(
                f"building adapter {self.target!r} raised {type(exc).__name__}: {exc}"
            ) from None
        scorer = CustomScorer(adapter) if callable(getattr(adapter, "score", None)) else None
        return AdapterParts(CustomTarget(adapter), scorer)

    def module_refs(self) -> list[str]:
        return [self.target, *super().module_refs()]
