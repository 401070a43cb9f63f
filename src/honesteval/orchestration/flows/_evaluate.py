"""The ``evaluate`` flow (SPEC §7)."""

from __future__ import annotations

from typing import Literal

from prefect import Flow, State, flow

from honesteval.evaluation.budget import budget_line, guard_for
from honesteval.evaluation.plan import EvaluationPlan, plan_evaluation
from honesteval.models import Budget, EvaluateRequest, PositiveInt, TaskRunnerKind
from honesteval.models.requests import from_flow_parameters
from honesteval.orchestration.flows._events import emit_low_coverage
from honesteval.orchestration.flows._execute import (
    RESULT_OPTIONS,
    completed_state_name,
    ends_cancelled_on_interrupt,
    final_state,
    planned_flow,
    run_options,
    run_plan,
    tag_flow_run,
)
from honesteval.orchestration.flows._params import documented, evaluation_run_name
from honesteval.views.text import result_line


@flow(
    name="evaluate",
    flow_run_name=evaluation_run_name("evaluate"),
    log_prints=False,
    **RESULT_OPTIONS,
)
@documented()
@ends_cancelled_on_interrupt
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
    budget: Budget | None = None,
) -> State:
    """Evaluate one candidate on train or val: every trial recorded, coverage and SE reported.

    Returns the SplitResult as the data of the final state, whose message is the result in
    one line. A result below the project's ``min_coverage`` ends in a Failed-type state named
    ``LowCoverage`` and emits ``honesteval.coverage.low``; one the budget stopped (trials that
    never started) ends in a Failed-type state named ``BudgetReached``.
    """
    request = from_flow_parameters(EvaluateRequest, locals())  # the parameters, as one request
    # a run started from a deployment (or called directly): all it has is JSON, so it plans
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
    return _evaluate(plan, request)


def evaluate_of(plan: EvaluationPlan, request: EvaluateRequest) -> Flow[..., State]:
    """The ``evaluate`` flow for an evaluation planned already (:func:`honesteval.evaluate`,
    the plan made from ``request``): it runs that plan, planning nothing again."""
    return planned_flow(evaluate, lambda: _evaluate(plan, request))


def _evaluate(plan: EvaluationPlan, request: EvaluateRequest) -> State:
    tag_flow_run(plan.candidate, plan.split)
    guard = guard_for(plan.project, request.budget)
    result = run_plan(plan, **run_options(request, plan.project), guard=guard)
    min_cov = plan.project.gate_config.min_coverage
    line = result_line(result)
    if result.budget is not None:
        return final_state(result, f"{line}; {budget_line(result)}", "BudgetReached")
    if result.coverage < min_cov:
        emit_low_coverage(plan.project.config.name, [result], min_cov)
        return final_state(result, f"{line} (coverage < {min_cov:.2f})", "LowCoverage")
    return final_state(result, line, completed_name=completed_state_name(result))
