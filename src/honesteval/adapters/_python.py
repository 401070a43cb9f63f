"""The ``python`` target and scorer: ``module:function`` names resolved in the project folder."""

from __future__ import annotations

import numbers
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from honesteval.models import Candidate, Rollout, Score, Task

from ._base import AdapterParts, ModuleRef, TargetConfig, checked_score
from ._loading import load_callable

if TYPE_CHECKING:
    from honesteval.adapters.project_view import ProjectView


class PythonTarget:
    """``run(task: dict, candidate_dir: str, seed: int) -> output`` (JSON-able)."""

    enforces_timeout = False  # a Python call cannot be stopped: the runner waits in a thread

    def __init__(self, root: Path, ref: str):
        self.ref = ref
        self.fn = load_callable(root, ref)

    def run(self, task: Task, candidate: Candidate, *, seed: int, trial: int) -> Rollout:
        return Rollout(output=self.fn(task.model_dump(), candidate.path, seed))


class PythonTargetConfig(TargetConfig):
    """``kind: python``: ``target: module:function`` called in this process."""

    kind: Literal["python"]
    target: ModuleRef
    #: run each trial in its own process, so timeout_s holds (and kills)
    isolate: bool = False

    def build(self, project: ProjectView) -> AdapterParts:
        if self.isolate:
            from ._isolated import IsolatedPythonTarget

            return AdapterParts(
                IsolatedPythonTarget(project.root, self.target, timeout_s=project.config.timeout_s)
            )
        return AdapterParts(PythonTarget(project.root, self.target))

    def module_refs(self) -> list[str]:
        return [self.target, *super().module_refs()]


class NoTarget:
    """``kind: none``: no target runs, the output is null and the scorer does the work."""

    enforces_timeout = True  # returns at once: no thread needed

    def run(self, task: Task, candidate: Candidate, *, seed: int, trial: int) -> Rollout:
        return Rollout(output=None)


class NoTargetConfig(TargetConfig):
    """``kind: none``: the scorer (typically ``evaluation:`` steps) runs the candidate itself."""

    kind: Literal["none"]

    def build(self, project: ProjectView) -> AdapterParts:
        return AdapterParts(NoTarget())


def score_from_value(value: Any) -> Score:
    """Turn what a scorer returned into a :class:`Score`; anything ungradeable is errored.

    Accepted: a number, or a mapping with ``reward`` (and optional ``feedback``,
    ``errored``, ``reason``). A bool, a string, NaN, ±inf or a reward outside [0, 1] is not a
    score: the trial becomes ``scorer_error`` (missing data), never a crash and never a zero.
    """
    feedback = reason = None
    errored = False
    if isinstance(value, dict):
        feedback = value.get("feedback")
        reason = value.get("reason")
        errored = bool(value.get("errored", False))
        reward = value.get("reward")
        if errored:
            return Score(
                errored=True,
                reason=str(reason or "the scorer said errored"),
                feedback=None if feedback is None else str(feedback),
            )
        if "reward" not in value:
            return Score(errored=True, reason="the scorer returned a mapping without 'reward'")
    else:
        reward = value
    if isinstance(reward, bool) or not isinstance(reward, numbers.Real):  # numpy scalars too
        return Score(errored=True, reason=f"reward is not a number: {reward!r}"[:300])
    # NaN, ±inf and the [0, 1] range: one rule for every scorer, in checked_score.
    return checked_score(
        Score(reward=float(reward), feedback=None if feedback is None else str(feedback))
    )


class PythonScorer:
    """``score(task: dict, output) -> float | {"reward", "feedback"?, "errored"?}``."""

    def __init__(self, root: Path, ref: str):
        self.ref = ref
        self.fn = load_callable(root, ref)

    def score(self, task: Task, rollout: Rollout) -> Score:
        return score_from_value(self.fn(task.model_dump(), rollout.output))
