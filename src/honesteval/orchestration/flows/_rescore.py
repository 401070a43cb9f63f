"""The ``rescore`` flow: re-grade stored rollouts with the current scorer (no target runs)."""

from __future__ import annotations

from typing import Literal

from prefect import Flow, State, flow

from honesteval.evaluation.plan import EvaluationPlan, plan_rescore
from honesteval.models import PositiveInt
from honesteval.orchestration.flows._execute import (
    RESULT_OPTIONS,
    ends_cancelled_on_interrupt,
    final_state,
    planned_flow,
    run_plan,
    tag_flow_run,
)
from honesteval.orchestration.flows._params import documented, evaluation_run_name
from honesteval.views.text import result_line


@flow(
    name="rescore", flow_run_name=evaluation_run_name("rescore"), log_prints=False, **RESULT_OPTIONS
)
@documented()
@ends_cancelled_on_interrupt
def rescore(
    project: str,
    candidate: str | None = None,
    split: Literal["train", "val"] = "val",
    n_trials: PositiveInt | None = None,
    base_seed: int | None = None,
    max_concurrency: PositiveInt | None = None,
) -> State:
    """Re-grade the stored rollouts of an evaluation with the current scorer, like Inspect
    AI's ``inspect score``: one ``score`` task run per trial (retried alone on a scorer's
    ``InfraError``), the target never runs. Records keep the new scorer's fingerprint;
    ``infra_error`` trials stay missing data. Returns the new SplitResult.
    """
    # a run started from a deployment (or called directly): all it has is JSON, so it plans
    plan = plan_rescore(project, candidate, split, n_trials=n_trials, base_seed=base_seed)
    return _rescore(plan, max_concurrency)


def rescore_of(plan: EvaluationPlan, max_concurrency: int | None = None) -> Flow[..., State]:
    """The ``rescore`` flow for a rescore planned already (:func:`honesteval.rescore`): it
    grades that plan, planning nothing again."""
    return planned_flow(rescore, lambda: _rescore(plan, max_concurrency))


def _rescore(plan: EvaluationPlan, max_concurrency: int | None) -> State:
    tag_flow_run(plan.candidate, plan.split)
    n_graded = len(plan.to_score)
    result = run_plan(plan, max_concurrency=max_concurrency or plan.project.config.max_concurrency)
    line = f"{result_line(result)}; {n_graded} re-graded by {plan.settings.scoring[:12]}"
    low = result.coverage < plan.project.gate_config.min_coverage
    return final_state(result, line, "LowCoverage" if low else None)
