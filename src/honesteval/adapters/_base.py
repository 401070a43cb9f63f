"""The adapter protocol and the project adapter that composes a target and a scorer."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from honesteval._context import current_trial
from honesteval.models import Candidate, Rollout, Score, Task

if TYPE_CHECKING:
    from honesteval.project import Project


@runtime_checkable
class Adapter(Protocol):
    """What honesteval needs from a benchmark (SPEC §5)."""

    def tasks(self, split: str) -> list[Task]:
        """The tasks of a split; must be deterministic."""
        ...

    def run_target(self, task: Task, candidate: Candidate, *, seed: int) -> Rollout:
        """One trial. Forward ``seed`` to anything stochastic; raise ``InfraError`` on faults."""
        ...

    def score(self, task: Task, rollout: Rollout) -> Score:
        """Grade a rollout; ``Score(errored=True, reason=...)`` when it cannot be graded."""
        ...


class Target(Protocol):
    def run(self, task: Task, candidate: Candidate, *, seed: int, trial: int) -> Rollout: ...


class Scorer(Protocol):
    def score(self, task: Task, rollout: Rollout) -> Score: ...


class ProjectAdapter:
    """A project's tasks + its configured target + its configured scorer."""

    def __init__(self, project: Project, target: Target, scorer: Scorer):
        self.project = project
        self.target = target
        self.scorer = scorer

    @property
    def enforces_timeout(self) -> bool:
        """True when the target kills its own work at ``timeout_s`` (a subprocess can)."""
        return bool(getattr(self.target, "enforces_timeout", False))

    @property
    def scorer_fingerprint(self) -> str | None:
        """What the scorer's verdicts depend on besides the candidate (the steps scorer's
        files and settings), or None; a stored trial is reused only when it matches."""
        return getattr(self.scorer, "fingerprint", None)

    def tasks(self, split: str) -> list[Task]:
        return self.project.tasks(split)

    def run_target(self, task: Task, candidate: Candidate, *, seed: int) -> Rollout:
        return self.target.run(task, candidate, seed=seed, trial=current_trial.get())

    def score(self, task: Task, rollout: Rollout) -> Score:
        return self.scorer.score(task, rollout)


def checked_score(score: Any) -> Score:
    """A score that can be averaged, or an errored one saying why not (SPEC §2, §9)."""
    if not isinstance(score, Score):
        return Score(errored=True, reason=f"scorer returned {type(score).__name__}, not a Score")
    if score.errored:
        return score
    r = score.reward
    if isinstance(r, bool) or not isinstance(r, int | float):
        return Score(errored=True, reason=f"reward is not a number: {r!r}"[:300])
    if not math.isfinite(r):
        return Score(errored=True, reason=f"reward is not finite: {r!r}")
    if not 0.0 <= r <= 1.0:
        return Score(errored=True, reason=f"reward {r!r} is outside [0, 1]")
    return score


def build_adapter(project: Project) -> ProjectAdapter:
    """The adapter a project's file asks for."""
    from ._command import CommandTarget
    from ._python import NoTarget, PythonScorer, PythonTarget

    cfg = project.config.adapter
    target: Target
    if cfg.kind == "python":
        assert cfg.target is not None  # checked by the schema
        target = PythonTarget(project.root, cfg.target)
    elif cfg.kind == "command":
        assert cfg.command is not None
        target = CommandTarget(
            project.root,
            cfg.command,
            timeout_s=project.config.timeout_s,
            infra_exit_codes=cfg.infra_exit_codes,
            env=cfg.env,
        )
    elif cfg.kind == "openai":
        from ._openai import OpenAITarget

        target = OpenAITarget(cfg, timeout_s=project.config.timeout_s)
    else:
        target = NoTarget()
    scorer: Scorer
    if project.config.evaluation is not None:
        from ._steps import StepsScorer

        scorer = StepsScorer(project)
    else:
        assert cfg.scorer is not None  # checked by the schema
        scorer = PythonScorer(project.root, cfg.scorer)
    return ProjectAdapter(project, target, scorer)
