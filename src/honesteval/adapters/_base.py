"""The adapter protocol, the base of every adapter kind's config, and the project adapter that
composes a target and a scorer."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, NamedTuple, Protocol, runtime_checkable

from pydantic import AfterValidator

from honesteval.adapters.context import current_trial
from honesteval.adapters.rate_limit import RateLimit, limit_name
from honesteval.models import Candidate, Rollout, Score, StrictModel, Task

if TYPE_CHECKING:
    from honesteval.adapters.project_view import ProjectView


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
    """What runs one trial of a candidate.

    ``enforces_timeout`` is True when ``run`` itself stops at the project's ``timeout_s`` (a
    subprocess it can kill, an HTTP timeout); otherwise the trial runner calls it in a thread
    and gives up waiting at ``timeout_s``.
    """

    enforces_timeout: bool

    def run(self, task: Task, candidate: Candidate, *, seed: int, trial: int) -> Rollout: ...


class Scorer(Protocol):
    def score(self, task: Task, rollout: Rollout) -> Score: ...


def _module_ref(ref: str) -> str:
    if ref.count(":") != 1 or not all(ref.split(":")):
        raise ValueError(f"must look like 'module:name', got {ref!r}")
    return ref


#: ``module:name``: a function or class the project names, imported from the project folder.
ModuleRef = Annotated[str, AfterValidator(_module_ref)]


class AdapterParts(NamedTuple):
    """What an adapter kind builds: its target, and the scorer it brings (None: the project's
    ``scorer:`` or ``evaluation:`` grades)."""

    target: Target
    scorer: Scorer | None = None


class TargetConfig(StrictModel):
    """The base of every adapter kind's config (the ``adapter:`` block of the project file).

    A kind is a subclass with ``kind: Literal["<name>"]`` and :meth:`build`, placed beside its
    adapter and listed once in :data:`honesteval.adapters.AdapterConfig`.
    """

    kind: str
    scorer: ModuleRef | None = None
    #: How fast the target may be called, across every worker (not part of the scoring
    #: fingerprint: :mod:`honesteval.adapters.rate_limit`).
    rate_limit: RateLimit | None = None
    #: True when the kind may bring its own scorer, so ``scorer:`` is not required.
    brings_scorer: ClassVar[bool] = False

    def build(self, project: ProjectView) -> AdapterParts:
        """The target (and the scorer, if the kind brings one) for this project."""
        raise NotImplementedError

    def module_refs(self) -> list[str]:
        """The ``module:name`` refs this adapter imports from the project folder (their files
        are part of the scoring fingerprint)."""
        return [self.scorer] if self.scorer else []

    def secret_env_names(self) -> list[str]:
        """Environment variables holding secrets this adapter reads (redacted everywhere)."""
        return []


class ProjectAdapter:
    """A project's tasks + its configured target + its configured scorer."""

    def __init__(self, project: ProjectView, target: Target, scorer: Scorer):
        self.project = project
        self.target = target
        self.scorer = scorer

    @property
    def enforces_timeout(self) -> bool:
        """True when the target kills its own work at ``timeout_s`` (a subprocess can)."""
        return self.target.enforces_timeout

    @property
    def scorer_fingerprint(self) -> str | None:
        """What the scorer's verdicts depend on besides the candidate (the steps scorer's
        files and settings), or None; a stored trial is reused only when it matches."""
        return getattr(self.scorer, "fingerprint", None)

    @property
    def rate_limit(self) -> tuple[str, RateLimit] | None:
        """The limit's name and setting when the project limits its target's calls."""
        cfg = self.project.config
        limit = cfg.adapter.rate_limit
        return None if limit is None else (limit_name(cfg.name, cfg.adapter.kind), limit)

    @property
    def saw_tamper(self) -> bool:
        """True once the scorer saw its evaluator files changed during a run: its snapshot
        serves that run's trials to the end, never a later run."""
        return bool(getattr(self.scorer, "saw_tamper", False))

    @property
    def scorer_enforces_timeout(self) -> bool:
        """True when the scorer bounds its own time (steps and judges have their timeouts)."""
        return bool(getattr(self.scorer, "enforces_timeout", False))

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
    if score.errored or score.failed:  # no reward to check: the trial's status says it all
        return score
    r = score.reward
    if isinstance(r, bool) or not isinstance(r, int | float):
        return Score(errored=True, reason=f"reward is not a number: {r!r}"[:300])
    if not math.isfinite(r):
        return Score(errored=True, reason=f"reward is not finite: {r!r}")
    if not 0.0 <= r <= 1.0:
        return Score(errored=True, reason=f"reward {r!r} is outside [0, 1]")
    return score
