"""The ``evaluate`` flow (SPEC §7)."""

from __future__ import annotations

from typing import Annotated, Literal

from prefect import flow
from prefect.states import Completed, State
from pydantic import Field

from honesteval.evaluation import plan_evaluation
from honesteval.flows._execute import TaskRunnerKind, emit_low_coverage, run_plan
from honesteval.models import SplitResult
from honesteval.reporting import coverage_text

PositiveInt = Annotated[int, Field(ge=1)]


@flow(name="evaluate", log_prints=False)
def evaluate(
    project: str,
    candidate: str | None = None,
    split: Literal["train", "val"] = "val",
    n_trials: PositiveInt | None = None,
    base_seed: int | None = None,
    ks: list[PositiveInt] | None = None,
    task_ids: list[str] | None = None,
    max_concurrency: PositiveInt | None = None,
    fresh: bool = False,
    batch_size: PositiveInt | None = None,
    task_runner: TaskRunnerKind = "thread",
    dask_address: str | None = None,
) -> SplitResult | State:
    """Evaluate one candidate on train or val: every trial recorded, coverage and SE reported.

    A result below the project's ``min_coverage`` ends Completed in a state named
    ``LowCoverage`` and emits ``honesteval.coverage.low``.
    """
    plan = plan_evaluation(
        project,
        candidate,
        split,
        n_trials=n_trials,
        base_seed=base_seed,
        ks=ks,
        task_ids=task_ids,
        fresh=fresh,
    )
    result = run_plan(
        plan,
        max_concurrency=max_concurrency or plan.project.config.max_concurrency,
        batch_size=batch_size,
        runner_kind=task_runner,
        dask_address=dask_address,
    )
    min_cov = plan.project.gate_config.min_coverage
    if result.coverage < min_cov:
        emit_low_coverage(plan.project.config.name, [result], min_cov)
        return Completed(
            name="LowCoverage",
            message=f"coverage {coverage_text(result)} < {min_cov:.2f}",
            data=result,
        )
    return result
