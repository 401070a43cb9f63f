"""The events an automation can watch: low coverage, a gate's verdict, a drifted best, a
nightly re-evaluation that ran.

Each names what it is about as its resource: the project for ``honesteval.coverage.low``,
the candidate (``honesteval.candidate.<project>.<candidate>``, with its fingerprint) for a
gate's verdict and a drift, and carries the figures the decision was made on in its payload,
so a notification can say what happened without opening the UI (``honesteval automations
install`` creates the automations on them: :mod:`honesteval.orchestration.automations`).
"""

from __future__ import annotations

from typing import Any

from prefect.events import emit_event

from honesteval.models import DriftReport, GateDecision, SplitResult
from honesteval.views.text import slug

COVERAGE_LOW = "honesteval.coverage.low"
DRIFT_DETECTED = "honesteval.drift.detected"
#: ``honesteval.gate.accepted`` / ``.rejected`` / ``.indecisive``
GATE_VERDICT = "honesteval.gate."
#: A ``reevaluate-best`` run checked the best (whatever it found): its absence for a day is
#: what the "nightly did not run" automation watches.
BEST_REEVALUATED = "honesteval.best.reevaluated"


def project_resource(project_name: str) -> dict[str, str]:
    return {
        "prefect.resource.id": f"honesteval.project.{slug(project_name)}",
        "prefect.resource.name": project_name,
    }


def candidate_resource(project_name: str, candidate: str, fingerprint: str) -> dict[str, str]:
    return {
        "prefect.resource.id": f"honesteval.candidate.{slug(project_name)}.{slug(candidate)}",
        "prefect.resource.name": candidate,
        "honesteval.project": project_name,
        "honesteval.fingerprint": fingerprint,
    }


def emit_low_coverage(project_name: str, results: list[SplitResult], min_coverage: float) -> None:
    """``honesteval.coverage.low``: a result whose coverage is under the project's minimum."""
    emit_event(
        event=COVERAGE_LOW,
        resource=project_resource(project_name),
        payload={
            "min_coverage": min_coverage,
            "results": [
                {
                    "candidate": r.candidate,
                    "split": r.split,
                    "coverage": r.coverage,
                    "n_scored": r.n_scored,
                    "n_tasks": r.n_tasks,
                }
                for r in results
            ],
        },
    )


def gate_verdict(decision: GateDecision) -> str:
    """``accepted``, ``rejected`` or ``indecisive``."""
    if decision.indecisive:
        return "indecisive"
    return "accepted" if decision.accept else "rejected"


def emit_gate_verdict(project_name: str, decision: GateDecision) -> None:
    """``honesteval.gate.<verdict>`` about the candidate, with the decision's figures."""
    figures: dict[str, Any] = decision.model_dump(
        include={
            "reason",
            "mode",
            "stage",
            "delta",
            "se",
            "bar",
            "n_paired",
            "mde",
            "level",
            "current",
            "current_reward",
            "candidate_reward",
            "current_coverage",
            "candidate_coverage",
            "baseline",
            "promoted",
            "regressions",
        },
        mode="json",
    )
    emit_event(
        event=f"{GATE_VERDICT}{gate_verdict(decision)}",
        resource=candidate_resource(
            project_name, decision.candidate, decision.candidate_fingerprint
        ),
        payload=figures,
    )


def emit_drift(project_name: str, report: DriftReport) -> None:
    """``honesteval.drift.detected`` about the current best, with the check's figures."""
    emit_event(
        event=DRIFT_DETECTED,
        resource=candidate_resource(project_name, report.candidate, report.fingerprint),
        payload=report.model_dump(
            include={
                "message",
                "stored_reward",
                "new_reward",
                "delta",
                "se",
                "bar",
                "n_paired",
                "stored_base_seed",
                "new_base_seed",
            },
            mode="json",
        ),
    )


def emit_reevaluated(project_name: str, report: DriftReport) -> None:
    """``honesteval.best.reevaluated`` about the project: the nightly check ran, and what it
    found (``status``: stable, drifted, indecisive, reference)."""
    emit_event(
        event=BEST_REEVALUATED,
        resource=project_resource(project_name),
        payload={"candidate": report.candidate, "status": report.status, "message": report.message},
    )
