"""One typed request from the CLI to the flow (issue 34 §1): ``EvaluateRequest`` and
``GateRequest`` are what the CLI builds and the API takes, their settings have one help text
(the CLI's ``--help``, the models' descriptions and the flows' run form say the same), and a
request's settings are exactly the flow's parameters."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import typer

import honesteval
from honesteval import ConfigError, EvaluateRequest, GateOverrides, GateRequest, SealedSplitError
from honesteval.api import request_of
from honesteval.cli import app
from honesteval.models.requests import flow_parameters
from honesteval.project.scaffold import scaffold_project
from honesteval.settings_help import SETTINGS_HELP


def _options(command: str) -> dict[str, str]:
    """A CLI command's options by parameter name, with their help text."""
    cmd = typer.main.get_command(app).commands[command]  # type: ignore[attr-defined]
    return {p.name: p.help or "" for p in cmd.params if isinstance(p, typer.core.TyperOption)}


@pytest.mark.parametrize(
    ("command", "model", "skip"),
    [
        ("evaluate", EvaluateRequest, set()),
        # the gate's distribution options are not CLI options yet; its candidate is the challenger
        ("gate", GateRequest, {"overrides", "batch_size", "task_runner", "dask_address"}),
    ],
)
def test_the_cli_help_is_the_request_field_description(
    command: str, model: type[EvaluateRequest] | type[GateRequest], skip: set[str]
) -> None:
    options = _options(command)
    fields = dict(model.model_fields)
    if model is GateRequest:
        fields.update(GateOverrides.model_fields)
    for name, field in fields.items():
        if name in skip:
            continue
        assert field.description, f"{model.__name__}.{name} has no description"
        if name == "budget":  # one option per key of the Budget it builds
            for key in ("usd", "tokens"):
                assert options[f"budget_{key}"] == SETTINGS_HELP[f"budget_{key}"]
            continue
        # the CLI may add how to type a list (comma-separated); the text itself is the field's
        assert options[name].startswith(field.description), name
    assert (
        fields["candidate"].description
        == SETTINGS_HELP["challenger" if model is GateRequest else "candidate"]
    )


def test_a_request_is_exactly_its_flow_parameters() -> None:
    from honesteval.orchestration.flows import evaluate, gate

    for request, flow in (
        (EvaluateRequest(candidate="a", ks=[1, 2], fresh=True), evaluate),
        (GateRequest(candidate="b", overrides=GateOverrides(alpha=0.05)), gate),
    ):
        parameters = flow_parameters(request)
        names = set(inspect.signature(flow.fn).parameters) - {"project"}
        assert set(parameters) == names, flow.name
        # Prefect validates and describes them: each has the request's text on the run form
        schema = flow.parameters.model_dump()["properties"]
        for name in names:
            field = "trials" if name == "n_trials" else name
            if flow is gate and name == "candidate":
                field = "challenger"
            assert schema[name]["description"] == SETTINGS_HELP[field], (flow.name, name)
    assert flow_parameters(GateRequest(candidate="b", overrides=GateOverrides(alpha=0.05)))[
        "alpha"
    ] == pytest.approx(0.05)


def test_a_request_or_its_keywords_not_both_and_bad_settings_are_one_line() -> None:
    assert request_of(EvaluateRequest, trials=4) == EvaluateRequest(trials=4)
    with pytest.raises(ConfigError, match=r"not both \(got trials\)"):
        request_of(EvaluateRequest, EvaluateRequest(), trials=4)
    with pytest.raises(ConfigError, match=r"^max_concurrency: .*greater than or equal to 1"):
        request_of(EvaluateRequest, max_concurrency=0)
    with pytest.raises(ConfigError, match=r"^gate k_se: .*greater than 0"):
        honesteval.api.gate_overrides(k_se=0)
    with pytest.raises(ConfigError, match=r"^gate mode: "):
        honesteval.api.gate_overrides(mode="lucky")
    with pytest.raises(Exception, match="frozen"):
        EvaluateRequest().trials = 3  # type: ignore[misc]


def test_the_api_takes_a_request_as_its_keywords_would_build_it(tmp_path: Path) -> None:
    root = tmp_path / "proj"
    scaffold_project(root)
    by_keywords = honesteval.evaluate(root, "baseline", trials=2, orchestration="local")
    request = EvaluateRequest(candidate="baseline", trials=2)
    by_request = honesteval.evaluate(root, request=request, orchestration="local")
    # the same request: the same seeds and trials, all 20 tasks x 2 reused, the same reward
    assert (by_request.n_trials, by_request.base_seed) == (2, by_keywords.base_seed)
    assert by_request.trials_reused == 20 * 2
    assert by_request.reward == by_keywords.reward
    with pytest.raises(ConfigError, match="not both"):
        honesteval.evaluate(root, "baseline", request=request, orchestration="local")
    first = honesteval.gate(
        root, request=GateRequest(candidate="baseline", trials=2), orchestration="local"
    )
    assert first.accept and first.promoted  # a project's first gate promotes its baseline
    with pytest.raises(SealedSplitError, match="test split is sealed"):
        honesteval.evaluate(root, "baseline", split="test", orchestration="local")  # type: ignore[arg-type]


def test_a_gate_planned_once_runs_its_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``prepare_gate`` then ``gate(plan=)``: the project is read once, the plan's screen is
    what runs (its trials, no more), and a plan is not mixed with a request or another
    project."""
    from honesteval.project import loader

    root, other = tmp_path / "proj", tmp_path / "other"
    scaffold_project(root)
    scaffold_project(other)
    reads: list[Path] = []
    parse = loader.parse_project_file
    monkeypatch.setattr(loader, "parse_project_file", lambda f: reads.append(f) or parse(f))
    plan = honesteval.prepare_gate(root, GateRequest(candidate="baseline", trials=2))
    assert plan.best is None and len(plan.screen.todo) == 20 * 2  # 20 val tasks x 2 trials
    decision = honesteval.gate(root, plan=plan, orchestration="local")
    assert reads == [root / "honesteval.yaml"]
    assert decision.accept and decision.candidate_trials == 20 * 2  # trials counted
    with pytest.raises(ConfigError, match="plan or its request, not both"):
        honesteval.gate(root, plan=plan, request=GateRequest(candidate="baseline"))
    with pytest.raises(ConfigError, match="planned for the project in"):
        honesteval.gate(other, plan=plan, orchestration="local")
