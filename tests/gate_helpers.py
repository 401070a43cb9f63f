"""Build SplitResults from per-task means for gate tests (through the real aggregate)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from honesteval.models import SplitResult, TaskTrials
from honesteval.stats import aggregate


def result(
    means: Sequence[float | None],
    *,
    name: str = "cand",
    split: str = "val",
    ids: Sequence[str] | None = None,
    subset: bool = False,
    trials: int = 1,
) -> SplitResult:
    """One task per mean (None: unscored, its trials infra_error), ``trials`` equal trials."""
    ids = list(ids) if ids is not None else [f"t{i:03d}" for i in range(len(means))]
    tasks = [
        TaskTrials(id=i, statuses=["infra_error"] * trials, rewards=[None] * trials)
        if m is None
        else TaskTrials(id=i, statuses=["ok"] * trials, rewards=[m] * trials)
        for i, m in zip(ids, means, strict=True)
    ]
    return aggregate(tasks, candidate=name, fingerprint=f"fp-{name}", split=split, subset=subset)


def rounds_result(rewards: np.ndarray, name: str) -> SplitResult:
    """A SplitResult through the real aggregate: rewards (rounds, tasks), NaN an infra error."""
    tasks = [
        TaskTrials(
            id=f"t{t:02d}",
            statuses=["infra_error" if math.isnan(x) else "ok" for x in rewards[:, t]],
            rewards=[None if math.isnan(x) else float(x) for x in rewards[:, t]],
        )
        for t in range(rewards.shape[1])
    ]
    return aggregate(tasks, candidate=name, fingerprint=f"fp-{name}", n_trials=rewards.shape[0])
