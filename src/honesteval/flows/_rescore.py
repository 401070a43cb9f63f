"""The ``rescore`` flow: re-grade stored rollouts with the current scorer (no target runs)."""

from __future__ import annotations

from typing import Annotated, Literal

from prefect import flow
from prefect.states import State
from prefect.utilities.annotations import quote
from pydantic import Field

from honesteval.evaluation import plan_rescore
from honesteval.flows._execute import (
    RESULT_OPTIONS,
    final_state,
    publish_evaluation,
    retrying,
    run_task,
    tag_flow_run,
    task_runner,
)
from honesteval.flows._local import track_task_run
from honesteval.flows._params import documented, evaluation_run_name
from honesteval.models import TrialRecord
from honesteval.reporting import result_line
from honesteval.tasks import aggregate_evaluation, score

PositiveInt = Annotated[int, Field(ge=1)]


@flow(
    name="rescore", flow_run_name=evaluation_run_name("rescore"), log_prints=False, **RESULT_OPTIONS
)
@documented()
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
    plan, to_grade, kept = plan_rescore(
        project, candidate, split, n_trials=n_trials, base_seed=base_seed
    )
    tag_flow_run(plan.candidate, plan.split)
    records: list[TrialRecord] = list(kept)
    if to_grade:
        score_task = retrying(score, plan.settings)
        concurrency = max_concurrency or plan.project.config.max_concurrency
        with task_runner("thread", concurrency) as runner:
            futures = []
            for spec, record in to_grade:
                params = {"spec": spec, "settings": plan.settings, "record": quote(record)}
                fut = runner.submit(score_task, params)
                track_task_run(fut.task_run_id)
                futures.append((fut, record))
            for fut, record in futures:
                out = fut.result(raise_on_failure=False)
                # a crashed score task run leaves the stored record as it was
                records.append(record if isinstance(out, BaseException) else out)
    result = run_task(aggregate_evaluation, quote(plan), quote(records))
    publish_evaluation(plan, result, records)
    line = (
        f"{result_line(result)}; {len(to_grade)} re-graded by {(plan.settings.scorer or '')[:12]}"
    )
    low = result.coverage < plan.project.gate_config.min_coverage
    return final_state(result, line, "LowCoverage" if low else None)
