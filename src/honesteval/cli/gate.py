"""``honesteval gate``, ``finalize`` and ``plan``: the gate, the sealed test split, the
sample sizes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from honesteval.cli.common import (
    EXIT_INDECISIVE,
    EXIT_OK,
    EXIT_REJECTED,
    BatchSizeOpt,
    BudgetTokensOpt,
    BudgetUsdOpt,
    DaskAddressOpt,
    FormatOpt,
    JsonOpt,
    ProjectOpt,
    TaskRunnerOpt,
    VerboseOpt,
    budget_given,
    distribution,
    start_server_early,
    text_format,
)
from honesteval.cli.output import (
    live_progress,
    print_decision,
    print_json,
    print_lines,
    print_result,
    rich_console,
    stderr_line,
)
from honesteval.errors import HonestevalError
from honesteval.settings_help import SETTINGS_HELP as HELP

if TYPE_CHECKING:
    from honesteval.evaluation.plan import EvaluationPlan
    from honesteval.gating.run import GatePlan


def _gate_notice(gate_plan: GatePlan) -> None:
    """Before a gate runs: what it will run, and why (on stderr), from the plan the gate then
    runs. Said only once every check the gate makes before it spends anything has passed:
    bad input stays one line."""
    from honesteval.gating.config import confirm_trials as confirmation_trials
    from honesteval.gating.run import best_screen_trials, screen_is_imported_only
    from honesteval.gating.spend import confirmation_trials_at_most, measured_trial_cost
    from honesteval.stats import screen_stopping, staged_rule
    from honesteval.views.text import gate_plan_notice

    proj, cfg, best, plan = gate_plan.project, gate_plan.cfg, gate_plan.best, gate_plan.screen
    later = confirmation_trials(cfg, plan.n_trials) if cfg.confirm else None
    current = None if best is None else best.name
    staged = best is not None and staged_rule(screen_stopping(cfg), plan.n_trials) is not None
    best_reused, best_to_run = ([], 0) if best is None else best_screen_trials(proj, best, plan)
    imported = best is not None and screen_is_imported_only(plan, best_reused)
    notice = gate_plan_notice(
        gate_plan.request.candidate,
        current,
        len(plan.tasks),
        plan.n_trials,
        later,
        staged=staged,
        imported_only=imported,
    )
    stderr_line(notice)
    if best is None:
        stderr_line(_baseline_runs(plan))
    else:
        cost = measured_trial_cost(proj)
        confirmation = confirmation_trials_at_most(len(plan.tasks), later) if later else 0
        stderr_line(
            f"gate: expected cost of the screen: {cost.of(len(plan.todo) + best_to_run)}"
            + (f"; of its confirmation, at most: {cost.of(confirmation)}" if later else "")
        )


def _baseline_runs(plan: EvaluationPlan) -> str:
    """What a baseline's gate reuses and what it runs: a stored result (an imported one)
    is not taken as it is, its missing or errored trials run again and its number may move."""
    run = len(plan.todo)
    if not run:
        return f"gate: its {plan.trials_planned} trials are stored: nothing runs"
    return (
        f"gate: {len(plan.reused)} of its {plan.trials_planned} trials are stored and reused; "
        f"{run} run now by the project's adapter (missing or errored), so its result may move"
    )


def gate_command(
    project: ProjectOpt = Path("."),
    candidate: Annotated[str, typer.Option(help=HELP["challenger"])] = "",
    split: Annotated[str, typer.Option(help="val only: the gate reads no other split")] = "val",
    trials: Annotated[int | None, typer.Option(help=HELP["trials"])] = None,
    base_seed: Annotated[int | None, typer.Option(help=HELP["base_seed"])] = None,
    mode: Annotated[str | None, typer.Option(help=HELP["mode"])] = None,
    k_se: Annotated[float | None, typer.Option(help=HELP["k_se"])] = None,
    alpha: Annotated[float | None, typer.Option(help=HELP["alpha"])] = None,
    max_concurrency: Annotated[int | None, typer.Option(help=HELP["max_concurrency"])] = None,
    batch_size: BatchSizeOpt = None,
    task_runner: TaskRunnerOpt = "thread",
    dask_address: DaskAddressOpt = None,
    confirm: Annotated[
        bool | None,
        typer.Option("--confirm/--no-confirm", help=HELP["confirm"]),
    ] = None,
    confirm_trials: Annotated[int | None, typer.Option(help=HELP["confirm_trials"])] = None,
    budget_usd: BudgetUsdOpt = None,
    budget_tokens: BudgetTokensOpt = None,
    as_json: JsonOpt = False,
    fmt: FormatOpt = "text",
    verbose: VerboseOpt = False,
) -> int:
    """Gate a candidate against the current best on val: promote only a real gain."""
    start_server_early()
    from honesteval import api

    markdown = text_format(fmt, as_json)
    if not candidate:
        raise HonestevalError("--candidate is required")
    if split != "val":
        raise HonestevalError(
            f"gate --split {split}: the gate reads val only (train is the optimiser's, test is "
            "sealed until finalize); drop --split"
        )
    from honesteval.evaluation.plan import check_positive

    check_positive("--trials", trials)
    where = distribution(max_concurrency, batch_size, task_runner, dask_address)
    # one request: what the notice checks is what the gate then runs
    request = api.request_of(
        api.GateRequest,
        candidate=candidate,
        trials=trials,
        base_seed=base_seed,
        overrides=api.gate_overrides(
            mode=mode, k_se=k_se, alpha=alpha, confirm=confirm, confirm_trials=confirm_trials
        ),
        budget=budget_given(budget_usd, budget_tokens),
        **where,
    )
    proj = api.load_project(project)
    gate_plan = api.prepare_gate(proj, request)  # once: the notice says what the gate runs
    if not as_json:
        _gate_notice(gate_plan)
    with live_progress():
        decision = api.gate(proj, plan=gate_plan, orchestration="prefect", echo=stderr_line)
    if as_json:
        print_json(decision.model_dump_json(indent=2))
    elif markdown:
        from honesteval.store.reading import decided_on
        from honesteval.store.state_dir import Store
        from honesteval.views.text import decision_markdown

        print_json(decision_markdown(decision, decided_on(Store(proj.state_dir), decision)))
    else:
        print_decision(proj, decision, project, verbose)
    if decision.indecisive:
        return EXIT_INDECISIVE
    return EXIT_OK if decision.accept else EXIT_REJECTED


def finalize_command(
    project: ProjectOpt = Path("."),
    candidate: Annotated[str | None, typer.Option(help="default: the current best")] = None,
    trials: Annotated[int | None, typer.Option(help=HELP["trials"])] = None,
    as_json: JsonOpt = False,
) -> int:
    """Score the sealed test split once (a second call is refused)."""
    start_server_early()
    from honesteval import api

    with live_progress():
        result = api.finalize(
            project, candidate, trials=trials, orchestration="prefect", echo=stderr_line
        )
    if as_json:
        print_json(result.model_dump_json(indent=2))
    else:
        print_result(result)
        rich_console().print("test split sealed: finalize will refuse from now on")
    return EXIT_OK


def plan_command(
    effect: Annotated[float, typer.Option(help="the gain to detect, e.g. 0.03")],
    project: ProjectOpt = Path("."),
    as_json: JsonOpt = False,
) -> int:
    """How many tasks or trials detect EFFECT at 80% power (Miller 2024, Eq. 9-10)."""
    from honesteval.gating.power import plan_lines, plan_sample_size

    report = plan_sample_size(project, effect)
    if as_json:
        print_json(json.dumps(report, indent=2))
    else:
        print_lines(plan_lines(report))
    return EXIT_OK
