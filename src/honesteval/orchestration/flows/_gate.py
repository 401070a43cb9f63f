"""The ``gate``, ``reevaluate-best`` and ``finalize`` flows (SPEC §4, §7)."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from typing import Annotated

from prefect import Flow, State, flow
from prefect.runtime import flow_run
from prefect.utilities.annotations import quote
from pydantic import Field

from honesteval.errors import ConfigError
from honesteval.evaluation.budget import SpendGuard, guard_for
from honesteval.evaluation.plan import EvaluationPlan, plan_evaluation
from honesteval.gating.ledger import check_best_unchanged, drift_reference, fresh_seed, read_best
from honesteval.gating.run import (
    ConfirmJob,
    GatePlan,
    prepare_gate,
    run_confirmation_job,
    run_finalize,
    run_gate,
)
from honesteval.gating.spend import search_spent
from honesteval.models import (
    Budget,
    GateConfig,
    GateMode,
    GateRequest,
    PositiveInt,
    SplitResult,
    TaskRunnerKind,
)
from honesteval.models.requests import from_flow_parameters
from honesteval.orchestration.dask_watch import NO_LIVE_WORKER, NoLiveWorker
from honesteval.orchestration.flows._artifacts import (
    publish_decision,
    publish_drift,
    publish_report,
)
from honesteval.orchestration.flows._events import (
    emit_drift,
    emit_gate_verdict,
    emit_low_coverage,
    emit_reevaluated,
)
from honesteval.orchestration.flows._execute import (
    RESULT_OPTIONS,
    RunOptions,
    ends_cancelled_on_interrupt,
    final_state,
    planned_flow,
    run_options,
    run_plan,
    run_plans,
    run_task,
    tag_flow_run,
)
from honesteval.orchestration.flows._params import documented
from honesteval.orchestration.tasks import decide_task
from honesteval.project.loader import Project, load_project
from honesteval.settings_help import SETTINGS_HELP
from honesteval.stats import drift_report, reference_report
from honesteval.store.state_dir import Store
from honesteval.views.text import confirmation_notice, decision_line, verdict


def gate_run_name() -> str:
    return f"gate-{flow_run.parameters.get('candidate')}"


@flow(name="gate", flow_run_name=gate_run_name, log_prints=False, **RESULT_OPTIONS)
@documented(candidate=SETTINGS_HELP["challenger"])
@ends_cancelled_on_interrupt
def gate(
    project: str,
    candidate: str,
    n_trials: PositiveInt | None = None,
    base_seed: int | None = None,
    max_concurrency: PositiveInt | None = None,
    mode: GateMode | None = None,
    k_se: Annotated[float, Field(gt=0)] | None = None,
    alpha: Annotated[float, Field(gt=0, lt=0.5)] | None = None,
    batch_size: PositiveInt | None = None,
    task_runner: TaskRunnerKind = "thread",
    dask_address: str | None = None,
    confirm: bool | None = None,
    confirm_trials: PositiveInt | None = None,
    budget: Budget | None = None,
) -> State:
    """Evaluate the current best and the candidate on val with the same seeds, decide, record.

    Two stages unless ``confirm=False``: this evaluation is the screen; a screen pass runs the
    ``confirm`` subflow (both sides again on fresh seeds), reserved in the ledger before it
    runs, and the ledger decides it at the reserved online level alpha_j. Returns the
    GateDecision as the data of the final state (message: the decision in one line). An
    INDECISIVE decision (coverage too low on either side, or a confirmation whose budget ended
    in between) ends in a Failed-type state named ``Indecisive``, and for low coverage emits
    ``honesteval.coverage.low``; the current best is untouched.
    """
    request = from_flow_parameters(GateRequest, locals())  # the parameters, as one request
    # a run started from a deployment (or called directly): all it has is JSON, so it plans
    return _gate(prepare_gate(load_project(project), request))


def gate_of(gate_plan: GatePlan) -> Flow[..., State]:
    """The ``gate`` flow for a gate planned already (:func:`honesteval.gate`, the CLI's
    notice): it runs that plan, loading and planning nothing again."""
    return planned_flow(gate, lambda: _gate(gate_plan))


def _gate(gate_plan: GatePlan) -> State:
    proj, candidate = gate_plan.project, gate_plan.request.candidate
    tag_flow_run(candidate, "val")
    run = run_options(gate_plan.request, proj)
    # one for the whole gate, screen and confirmation; a search's spend from the ledger
    guard = guard_for(proj, gate_plan.request.budget, search_spent=search_spent(proj))

    def confirm_stage_of(job: ConfirmJob) -> list[SplitResult]:
        confirmation = planned_flow(confirm_stage, lambda: _confirm(proj, job, run, guard))
        # the subflow's state, not its result: a Failed one would raise FailedRun here
        state: State[list[SplitResult]] = confirmation(  # type: ignore[assignment]
            project=str(proj.root),
            current=job.current,
            candidate=job.candidate,
            n_trials=job.n_trials,
            base_seed=job.base_seed,
            cfg=job.cfg,
            level=job.level,
            holdout=job.holdout,
            **run,
            return_state=True,
        )
        if state.name == NO_LIVE_WORKER:  # the gate ends as its subflow did: one line
            raise NoLiveWorker(state.message)
        return state.result()

    gate_run = run_gate(
        gate_plan,
        run_plans=lambda plans: run_plans(list(plans), **run, guard=guard),
        confirmation_notice=confirmation_notice,
        run_confirmation=confirm_stage_of,
        decide_screen=lambda current, new, cfg: run_task(
            decide_task, quote(current), quote(new), cfg
        ),
    )
    decision, results, cfg = gate_run.decision, gate_run.results, gate_run.cfg
    publish_decision(proj.config.name, decision, results)
    publish_report(proj)
    tag_flow_run(candidate, "val", f"verdict:{verdict(decision).lower()}")
    emit_gate_verdict(proj.config.name, decision)
    if decision.indecisive:
        low = any(r.coverage < cfg.min_coverage for r in results)
        if low and all(r.budget is None for r in results):  # not a budget spent
            emit_low_coverage(proj.config.name, results, cfg.min_coverage)
        return final_state(decision, decision_line(decision), "Indecisive")
    # Rejected and accepted gates both completed; a rejection is named so a user can filter.
    name = "Completed" if decision.accept else "Rejected"
    return final_state(decision, decision_line(decision), completed_name=name)


@flow(name="confirm", log_prints=False, flow_run_name="confirm-{candidate}-seeds-{base_seed}")
@ends_cancelled_on_interrupt
def confirm_stage(
    project: str,
    current: str,
    candidate: str,
    n_trials: PositiveInt,
    base_seed: int,
    cfg: GateConfig,
    level: Annotated[float, Field(gt=0, lt=1)],
    max_concurrency: PositiveInt,
    batch_size: PositiveInt | None = None,
    runner_kind: TaskRunnerKind = "thread",
    dask_address: str | None = None,
    holdout: bool = False,
    budget: Budget | None = None,
    spent_usd: Annotated[float, Field(ge=0)] = 0.0,
    spent_tokens: Annotated[int, Field(ge=0)] = 0,
) -> list[SplitResult]:
    """The second stage of ``gate``: the current best and the candidate on fresh seeds, in
    rounds of one trial a task until the e-process at ``level`` decides (at most
    ``n_trials``), or on the held-out part of val only (``holdout``), when one is frozen.

    Its own flow run, so the UI shows the confirmation's evaluations apart from the screen's
    (the gate runs it with its project in hand: :func:`_confirm`). Returns [current,
    candidate]; the gate's ledger decides on them. ``budget``: the gate's, of which
    ``spent_usd`` and ``spent_tokens`` are gone already.
    """
    job = ConfirmJob(current, candidate, n_trials, base_seed, holdout, cfg, level)
    run = RunOptions(
        max_concurrency=max_concurrency,
        batch_size=batch_size,
        runner_kind=runner_kind,
        dask_address=dask_address,
    )
    proj = load_project(project)
    guard = guard_for(proj, budget, spent_usd=spent_usd, spent_tokens=spent_tokens)
    return _confirm(proj, job, run, guard)


def _confirm(
    project: Project, job: ConfirmJob, run: RunOptions, guard: SpendGuard | None
) -> list[SplitResult]:
    tag_flow_run(job.candidate, "val")
    return run_confirmation_job(
        project, job, lambda plans: run_plans(list(plans), **run, guard=guard)
    )


def reevaluate_run_name() -> str:
    """``reevaluate-<best>-<UTC date>``: what a morning's list of runs needs to say."""
    name = "none"
    with contextlib.suppress(Exception):  # a project without a best fails in the flow itself
        best = read_best(load_project(str(flow_run.parameters.get("project"))))
        name = best.name if best is not None else name
    return f"reevaluate-{name}-{datetime.now(UTC):%Y-%m-%d}"


@flow(
    name="reevaluate-best",
    flow_run_name=reevaluate_run_name,
    log_prints=False,
    **RESULT_OPTIONS,
)
@documented(base_seed="Seed of trial 0; empty: fresh seeds derived from the UTC date.")
@ends_cancelled_on_interrupt
def reevaluate_best(
    project: str,
    n_trials: PositiveInt | None = None,
    base_seed: int | None = None,
    max_concurrency: PositiveInt | None = None,
) -> State:
    """Re-run the current best on val with fresh seeds; report drift against an unselected
    reference: the baseline's run, or the first re-run after a promotion by a test (that first
    night records the reference and tests nothing)."""
    proj = load_project(project)
    best = read_best(proj)
    if best is None:
        raise ConfigError("no current best yet: gate a candidate first")
    check_best_unchanged(proj, best)
    tag_flow_run(best.name, "val")
    stored = best.result
    trials = n_trials or stored.n_trials
    seed = base_seed if base_seed is not None else fresh_seed(stored.base_seed, trials)
    # fresh=True: a re-run must not reuse today's stored trials, the world may have changed.
    plan = plan_evaluation(proj, best.name, "val", n_trials=trials, base_seed=seed, fresh=True)
    fresh = run_plan(plan, max_concurrency=max_concurrency or proj.config.max_concurrency)
    reference = drift_reference(proj, best)
    if reference is None:  # the first unselected run since a promotion a test selected
        report = reference_report(stored, fresh, proj.gate_config)
    else:
        report = drift_report(reference, fresh, proj.gate_config)
    publish_drift(proj.config.name, report)
    Store(proj.state_dir).append_drift_check(report)  # before the report, which shows it
    publish_report(proj)
    emit_reevaluated(proj.config.name, report)
    if report.status == "indecisive":
        emit_low_coverage(proj.config.name, [fresh], proj.gate_config.min_coverage)
        return final_state(report, report.message, "Indecisive")
    if report.status == "drifted":
        emit_drift(proj.config.name, report)
        # Completed-type (the check ran and decided), named so runs and automations see it
        return final_state(report, report.message, completed_name="Drifted")
    return final_state(report, report.message)


@flow(name="finalize", log_prints=False)
@documented()
@ends_cancelled_on_interrupt
def finalize(
    project: str,
    candidate: str | None = None,
    n_trials: PositiveInt | None = None,
    max_concurrency: PositiveInt | None = None,
) -> SplitResult:
    """Score the sealed test split once, then record the seal.

    The seal is written only after the result: a run that crashes before scoring does not
    burn it. A second finalize, or one started while another runs, raises TestSealedError.
    """
    # a run started from a deployment (or called directly): all it has is JSON, so it loads
    return _finalize(load_project(project), candidate, n_trials, max_concurrency)


def finalize_of(plan: EvaluationPlan, max_concurrency: int | None = None) -> Flow[..., SplitResult]:
    """The ``finalize`` flow for the test split planned already (:func:`honesteval.finalize`):
    it runs that plan once the seal is checked again under the finalize lock."""
    return planned_flow(
        finalize, lambda: _finalize(plan.project, plan.candidate, None, max_concurrency, plan)
    )


def _finalize(
    proj: Project,
    candidate: str | None,
    n_trials: int | None,
    max_concurrency: int | None,
    plan: EvaluationPlan | None = None,
) -> SplitResult:
    def run_one(plan: EvaluationPlan) -> SplitResult:
        return run_plan(plan, max_concurrency=max_concurrency or proj.config.max_concurrency)

    return run_finalize(proj, candidate, run_plan=run_one, n_trials=n_trials, plan=plan)
