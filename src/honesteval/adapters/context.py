"""What a target or scorer may know about the running trial beyond its seed: set by the trial
runner (:mod:`honesteval.evaluation.trial`), read by the adapters that need it."""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from dataclasses import dataclass

from honesteval.models import Candidate, Rollout, Task


@dataclass(frozen=True)
class TrialInfo:
    """Which trial is being scored (the steps scorer names its workspace after it)."""

    project_root: str
    split: str
    candidate: Candidate
    seed: int
    trial: int
    probe: bool = False  # a `check` probe: scorers use throw-away folders


#: The trial number of the trial running in this context (the command target reads it for
#: ``HONESTEVAL_TRIAL``; the adapter protocol itself only carries the seed).
current_trial: contextvars.ContextVar[int] = contextvars.ContextVar("current_trial", default=0)

#: When the trial running in this context belongs to a ``fresh`` evaluation (nothing stored
#: is reused), that evaluation's start: a target that batches a seed's tasks then counts only
#: the trials recorded since as done, and runs the stored ones again too.
current_fresh_since: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "current_fresh_since", default=None
)

#: The trial being scored, when a trial runner is scoring it (None in ``check`` probes).
current_info: contextvars.ContextVar[TrialInfo | None] = contextvars.ContextVar(
    "current_info", default=None
)

#: Stores a rollout the running target made for another task of its evaluation, at the running
#: trial's seed and number (Inspect's eval() grades a seed's tasks in one call), awaiting its
#: score: set by the trial runner, so an adapter never writes a trial record itself.
current_rollout_store: contextvars.ContextVar[Callable[[Task, Rollout], None] | None] = (
    contextvars.ContextVar("current_rollout_store", default=None)
)
