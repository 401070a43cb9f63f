"""``honesteval evaluate`` and ``honesteval rescore``: score a candidate on a split."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from honesteval.cli.common import (
    BatchSizeOpt,
    BudgetTokensOpt,
    BudgetUsdOpt,
    CsvOpt,
    DaskAddressOpt,
    JsonOpt,
    ProjectOpt,
    TaskRunnerOpt,
    VerboseOpt,
    budget_given,
    distribution,
    one_format,
    parse_int_list,
    start_server_early,
)
from honesteval.cli.output import live_progress, report_evaluation, stderr_line
from honesteval.settings_help import SETTINGS_HELP as HELP

if TYPE_CHECKING:
    from honesteval.project.loader import Project


def say_default_candidate(project: Project, candidate: str | None) -> None:
    """Without ``--candidate`` the current best is the one evaluated: say which, in one line
    (with no best yet, the evaluation itself refuses in one line)."""
    from honesteval.evaluation.plan import current_best_name

    best = None if candidate is not None else current_best_name(project)
    if best is not None:
        stderr_line(f"no --candidate: evaluating the current best, {best!r}")


def evaluate_command(
    project: ProjectOpt = Path("."),
    candidate: Annotated[str | None, typer.Option(help=HELP["candidate"])] = None,
    split: Annotated[str, typer.Option(help=HELP["split"])] = "val",
    trials: Annotated[int | None, typer.Option(help=HELP["trials"])] = None,
    base_seed: Annotated[int | None, typer.Option(help=HELP["base_seed"])] = None,
    ks: Annotated[str | None, typer.Option(help=HELP["ks"] + " (comma-separated)")] = None,
    task_ids: Annotated[
        str | None, typer.Option(help=HELP["task_ids"] + " (comma-separated)")
    ] = None,
    max_concurrency: Annotated[int | None, typer.Option(help=HELP["max_concurrency"])] = None,
    batch_size: BatchSizeOpt = None,
    fresh: Annotated[bool, typer.Option(help=HELP["fresh"])] = False,
    task_runner: TaskRunnerOpt = "thread",
    dask_address: DaskAddressOpt = None,
    budget_usd: BudgetUsdOpt = None,
    budget_tokens: BudgetTokensOpt = None,
    as_json: JsonOpt = False,
    as_csv: CsvOpt = False,
    verbose: VerboseOpt = False,
) -> int:
    """Evaluate a candidate: reward ± SE, 95% CI, coverage, pass^k and pass@k."""
    start_server_early()
    from honesteval import api

    one_format(as_json, as_csv)
    from honesteval.evaluation.plan import check_positive, check_split

    check_split(split)  # the sealed test split and a misspelt one: their own errors
    ks_list = parse_int_list(ks, "--ks")
    for setting, value in [("--trials", trials), *(("--ks", k) for k in ks_list or [])]:
        check_positive(setting, value)
    where = distribution(max_concurrency, batch_size, task_runner, dask_address)
    request = api.request_of(
        api.EvaluateRequest,
        candidate=candidate,
        split=split,
        trials=trials,
        base_seed=base_seed,
        ks=ks_list,
        task_ids=None if task_ids is None else [t for t in task_ids.split(",") if t],
        fresh=fresh,
        budget=budget_given(budget_usd, budget_tokens),
        **where,
    )
    proj = api.load_project(project)
    say_default_candidate(proj, candidate)
    with live_progress():
        result = api.evaluate(proj, request=request, echo=stderr_line)
    return report_evaluation(result, proj, as_json, as_csv, verbose)


def rescore_command(
    project: ProjectOpt = Path("."),
    candidate: Annotated[str | None, typer.Option(help="default: the current best")] = None,
    split: Annotated[str, typer.Option(help="train or val")] = "val",
    trials: Annotated[int | None, typer.Option(help=HELP["trials"])] = None,
    base_seed: Annotated[int | None, typer.Option(help=HELP["base_seed"])] = None,
    as_json: JsonOpt = False,
    verbose: VerboseOpt = False,
) -> int:
    """Re-grade stored rollouts with the current scorer; no target runs again."""
    start_server_early()
    from honesteval import api

    proj = api.load_project(project)
    say_default_candidate(proj, candidate)
    with live_progress():
        result = api.rescore(
            proj,
            candidate,
            split=split,
            trials=trials,
            base_seed=base_seed,
            orchestration="prefect",
            echo=stderr_line,
        )
    return report_evaluation(result, proj, as_json, verbose=verbose)
