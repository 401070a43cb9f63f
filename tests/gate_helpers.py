"""Build SplitResults from per-task means for gate tests (through the real aggregate)."""

from __future__ import annotations

from collections.abc import Sequence

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
