"""The public import paths of the Prefect flows and tasks (the design card's top level)."""

from __future__ import annotations

from prefect import Flow
from prefect.tasks import Task


def test_honesteval_tasks_names_each_task_as_its_task_runs_are_named() -> None:
    import honesteval.tasks as tasks

    names = {name: getattr(tasks, name) for name in tasks.__all__}
    assert all(isinstance(task, Task) for task in names.values())
    assert {name: task.name for name, task in names.items()} == {
        "aggregate": "aggregate",
        "decide": "decide",
        "run_trial": "run_trial",
        "run_trial_batch": "run_trial_batch",
        "score": "score",
        "score_batch": "score",
    }


def test_honesteval_flows_are_the_flows_deployments_name() -> None:
    import honesteval.flows as flows

    assert all(isinstance(getattr(flows, name), Flow) for name in flows.__all__)
    assert sorted(flows.__all__) == ["evaluate", "finalize", "gate", "reevaluate_best", "rescore"]


def test_no_module_of_the_package_takes_an_api_function_s_name() -> None:
    """``honesteval.gate(...)`` is the API's function: no module right under the package may
    take its name (an imported submodule becomes an attribute of the package and replaces
    the function, which is why the gate's package is ``gating``)."""
    import pkgutil

    import honesteval

    modules = {m.name for m in pkgutil.iter_modules(honesteval.__path__)}
    assert "gating" in modules
    assert modules & set(honesteval._API) == set()


def test_what_the_api_returns_is_public_under_the_package() -> None:
    """``honesteval.gate()`` returns a GateDecision and ``honesteval.evaluate()`` a SplitResult:
    both are importable from the package, as a type hint in a user's loop needs them."""
    import inspect

    import honesteval
    from honesteval import api

    for function, model in (("gate", "GateDecision"), ("evaluate", "SplitResult")):
        assert model in honesteval.__all__
        assert getattr(honesteval, model).__name__ == model
        assert inspect.signature(getattr(api, function)).return_annotation in (
            model,
            getattr(honesteval, model),
        )
