"""``honesteval serve``: the deployments of a project (the local server: ``localserver``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from honesteval.errors import ConfigError
from honesteval.project.loader import load_project

DEFAULT_CRON = "0 3 * * *"


def deployments_for(project: str | Path, cron: str = DEFAULT_CRON) -> list[Any]:
    """The four deployments, with the project bound as a parameter.

    ``evaluate/val``, ``evaluate/train``, ``gate/val`` (pass ``candidate``) and
    ``reevaluate-best/nightly`` (cron, UTC). Bad parameters (``split=test``, ``n_trials=0``)
    are refused by Prefect before a run is created: the flows' signatures are the schema.
    """
    from prefect.deployments.runner import RunnerDeployment
    from prefect.schedules import Cron

    from honesteval.orchestration.flows import evaluate, gate, reevaluate_best

    proj = load_project(project)  # a bad project fails here, before serving
    root = str(proj.root)
    try:
        nightly = Cron(cron, timezone="UTC")
    except Exception as exc:
        raise ConfigError(f"--cron {cron!r} is not a valid cron expression: {exc}") from None
    deployments = [
        evaluate.to_deployment(
            name="val",
            parameters={"project": root, "split": "val"},
            description="Evaluate a candidate on val",
        ),
        evaluate.to_deployment(
            name="train",
            parameters={"project": root, "split": "train"},
            description="Evaluate a candidate on train",
        ),
        gate.to_deployment(
            name="val",
            parameters={"project": root},
            description="Gate a candidate against the current best on val",
        ),
        reevaluate_best.to_deployment(
            name="nightly",
            parameters={"project": root},
            schedules=[nightly],
            description="Re-run the current best on val with fresh seeds; report drift",
        ),
    ]
    for deployment in deployments:
        assert isinstance(deployment, RunnerDeployment)  # to_deployment is sync here
        offer_candidates(deployment._parameter_openapi_schema.properties, proj.candidate_names())
    return deployments


def offer_candidates(properties: dict[str, Any], names: list[str]) -> None:
    """Make the ``candidate`` parameter a choice among the candidates found now (the form in
    the UI shows a list; Prefect refuses another name before a run exists). Serve again to
    offer candidates added later."""
    schema = properties.get("candidate")
    if schema is None or not names:
        return
    choice = {"type": "string", "enum": sorted(names)}
    if "anyOf" in schema:  # optional: the current best when left empty
        schema["anyOf"] = [choice, {"type": "null"}]
    else:
        schema.pop("type", None)
        schema.update(choice)


def serve(project: str | Path, *, cron: str = DEFAULT_CRON, limit: int | None = None) -> None:
    from prefect import serve as prefect_serve

    prefect_serve(*deployments_for(project, cron), limit=limit)
