"""Every Prefect artifact honesteval publishes, and the keys it publishes them under.

Keys are stable: the UI links of a gate decision, the tests and users' automations find the
artifacts by them. Per evaluation: ``progress-``, ``rollouts-`` and ``summary-<split>-<candidate>``;
per gate: ``gate-decision`` and ``gate-decision-table``; per drift check ``drift-<candidate>``;
the project's report ``honesteval-report``. Candidate names go through :func:`slug`.
"""

from __future__ import annotations

from typing import Literal, cast
from uuid import UUID

from prefect import get_run_logger
from prefect.artifacts import (
    create_markdown_artifact,
    create_progress_artifact,
    create_table_artifact,
    update_progress_artifact,
)

from honesteval.evaluation import EvaluationPlan
from honesteval.models import DriftReport, GateDecision, SplitResult, TrialRecord
from honesteval.project import Project
from honesteval.report import headline_markdown, write_report
from honesteval.reporting import (
    decision_markdown,
    decision_rows,
    drift_markdown,
    rollout_rows,
    slug,
    summary_markdown,
)
from honesteval.store import Store

DECISION_KEY = "gate-decision"
DECISION_TABLE_KEY = "gate-decision-table"
REPORT_KEY = "honesteval-report"
EvaluationArtifact = Literal["progress", "rollouts", "summary"]


def evaluation_key(kind: EvaluationArtifact, split: str, candidate: str) -> str:
    """The key of one evaluation's progress bar, rollouts table or summary."""
    return f"{kind}-{split}-{slug(candidate)}"


def drift_key(candidate: str) -> str:
    return f"drift-{slug(candidate)}"


def start_progress(plan: EvaluationPlan, done: int) -> UUID:
    """The evaluation's progress bar, at ``done`` of its planned trials (the reused ones)."""
    total = plan.trials_planned
    artifact_id = create_progress_artifact(
        progress=100.0 * done / total,
        key=evaluation_key("progress", plan.split, plan.candidate),
        description=f"trials finished for {plan.candidate} on {plan.split} ({total} planned)",
    )
    return cast(UUID, artifact_id)


def update_progress(artifact_id: UUID, done: int, total: int) -> None:
    update_progress_artifact(artifact_id=artifact_id, progress=100.0 * done / total)


def publish_evaluation(
    plan: EvaluationPlan, result: SplitResult, records: list[TrialRecord]
) -> None:
    """One row per trial (reused ones included, each with its file) and the summary."""
    ordered = sorted([*plan.reused.values(), *records], key=lambda r: (r.task_id, r.trial))
    store = Store(plan.project.state_dir)

    def trial_file(r: TrialRecord) -> str:
        path = store.trial_log(r.split, r.candidate, r.fingerprint)
        return str(path.relative_to(plan.project.root))

    create_table_artifact(
        table=rollout_rows(ordered, set(plan.reused), trial_file),
        key=evaluation_key("rollouts", plan.split, plan.candidate),
        description=f"one row per trial: {plan.candidate} on {plan.split}",
    )
    create_markdown_artifact(
        markdown=summary_markdown(result),
        key=evaluation_key("summary", plan.split, plan.candidate),
        description=f"{plan.candidate} on {plan.split}: reward ± SE, coverage, pass^k",
    )


def summary_links(results: list[SplitResult]) -> dict[str, str]:
    """Where each evaluation's summary artifact is: in the UI when its address is known
    (``PREFECT_UI_URL``), else the artifact key's path."""
    from prefect.settings import PREFECT_UI_URL

    base = (PREFECT_UI_URL.value() or "").rstrip("/")
    return {
        f"{r.candidate} on {r.split}": f"{base}/artifacts/key/"
        + evaluation_key("summary", r.split, r.candidate)
        for r in results
    }


def publish_decision(decision: GateDecision, results: list[SplitResult]) -> None:
    """The gate decision as markdown (linking the evaluations it decided on) and a table."""
    description = f"gate decision for {decision.candidate}"
    create_markdown_artifact(
        markdown=decision_markdown(decision, summary_links(results)),
        key=DECISION_KEY,
        description=description,
    )
    create_table_artifact(
        table=decision_rows(decision), key=DECISION_TABLE_KEY, description=description
    )


def publish_drift(report: DriftReport) -> None:
    create_markdown_artifact(
        markdown=drift_markdown(report),
        key=drift_key(report.candidate),
        description="re-evaluation of the current best with fresh seeds",
    )


def publish_report(project: Project) -> None:
    """End of a ``gate`` / ``reevaluate-best`` run: write ``.honesteval/report.html`` and
    publish its headline table and a link.

    A report that fails to render is logged as a warning: the decision is already recorded,
    and a broken picture of it must not turn the run red.
    """
    try:
        path, data = write_report(project)
        markdown = headline_markdown(data, path)
    except Exception as exc:  # a rendering bug must not undo a recorded decision
        get_run_logger().warning("honesteval report not written: %s: %s", type(exc).__name__, exc)
        return
    create_markdown_artifact(markdown=markdown, key=REPORT_KEY, description="honesteval report")
