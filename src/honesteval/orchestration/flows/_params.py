"""One description per flow parameter: the deployment forms in the UI show them.

Prefect reads parameter descriptions from the ``Args:`` section of a flow's docstring;
:func:`documented` writes that section from :data:`PARAMETER_HELP`: the text of the request's
field each parameter carries (:data:`~honesteval.settings_help.SETTINGS_HELP`), the one the
CLI's ``--help`` shows.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from honesteval.settings_help import SETTINGS_HELP

F = TypeVar("F", bound=Callable[..., Any])

PARAMETER_HELP: dict[str, str] = {
    "project": "Project folder (the one holding honesteval.yaml), as the server sees it.",
    "n_trials": SETTINGS_HELP["trials"],  # the request's ``trials``
    **SETTINGS_HELP,
}


def documented(**overrides: str) -> Callable[[F], F]:
    """Append an ``Args:`` section for every parameter of the decorated function."""

    def decorate(fn: F) -> F:
        names = inspect.signature(fn).parameters
        lines = [f"    {name}: {overrides.get(name) or PARAMETER_HELP[name]}" for name in names]
        fn.__doc__ = f"{inspect.getdoc(fn) or ''}\n\nArgs:\n" + "\n".join(lines)
        return fn

    return decorate


def evaluation_run_name(flow_name: str) -> Callable[[], str]:
    """A flow-run namer: ``<flow>-<candidate>-<split>`` (``current-best`` when unnamed)."""

    def name() -> str:
        from prefect.runtime import flow_run

        params = flow_run.parameters
        candidate = params.get("candidate") or "current-best"
        return f"{flow_name}-{candidate}-{params.get('split', 'val')}"

    return name
