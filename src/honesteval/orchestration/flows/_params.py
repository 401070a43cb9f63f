"""One description per flow parameter: the deployment forms in the UI show them.

Prefect reads parameter descriptions from the ``Args:`` section of a flow's docstring;
:func:`documented` writes that section from :data:`PARAMETER_HELP`, so the flows that share a
parameter share its text.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from pydantic import Field

#: A flow parameter that counts something: an integer >= 1 (Prefect validates it).
PositiveInt = Annotated[int, Field(ge=1)]

F = TypeVar("F", bound=Callable[..., Any])

PARAMETER_HELP: dict[str, str] = {
    "project": "Project folder (the one holding honesteval.yaml), as the server sees it.",
    "candidate": "Candidate to evaluate (a folder or file in the project's candidates "
    "folder); empty: the current best.",
    "split": "Which split to score: train or val (test is sealed; only finalize scores it).",
    "n_trials": "Trials per task (trial k runs with seed base_seed + k); empty: the "
    "project's `trials`.",
    "base_seed": "Seed of trial 0; empty: the project's `base_seed`. Every candidate gets the "
    "same seeds.",
    "ks": "The k values for pass^k and pass@k, e.g. [1, 2, 3]; empty: 1..n_trials.",
    "task_ids": "Evaluate only these task ids of the split (the result is marked subset).",
    "max_concurrency": "Trials in flight at once; empty: the project's `max_concurrency`.",
    "fresh": "Ignore stored trials and run every trial again.",
    "batch_size": "Trials per task run; empty: one per trial up to 64 trials, batches above.",
    "task_runner": "Where trials run: thread (this process) or dask.",
    "dask_address": "Address of an existing Dask scheduler, e.g. tcp://host:8786 (task_runner "
    "dask); empty: a local cluster.",
    "mode": "Gate mode: paired, significant, threshold or strict; empty: the project's gate.",
    "k_se": "The gain must exceed k_se standard errors; empty: the project's gate.",
    "alpha": "One-sided significance level; replaces k_se when set.",
    "confirm": "Confirm a screen pass on fresh seeds at the online level alpha_j (the "
    "search-level guarantee); false: single stage, no such guarantee; empty: the project's gate.",
    "confirm_trials": "Trials per task of the confirmation; empty: the project's "
    "`confirm_trials` (3x the screen's trials by default).",
}


def documented(**overrides: str) -> Callable[[F], F]:
    """Append an ``Args:`` section for every parameter of the decorated function."""

    def decorate(fn: F) -> F:
        names = inspect.signature(fn).parameters
        lines = [f"    {name}: {overrides.get(name) or PARAMETER_HELP[name]}" for name in names]
        fn.__doc__ = f"{inspect.getdoc(fn) or ''}\n\nArgs:\n" + "\n".join(lines)
        return fn

    return decorate


def evaluation_run_name(flow_name: str) -> Callable[[], str]:
    """A flow-run namer: ``<flow>-<candidate>-<split>`` (``current-best`` when unnamed)."""

    def name() -> str:
        from prefect.runtime import flow_run

        params = flow_run.parameters
        candidate = params.get("candidate") or "current-best"
        return f"{flow_name}-{candidate}-{params.get('split', 'val')}"

    return name
