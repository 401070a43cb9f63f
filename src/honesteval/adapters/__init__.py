"""Adapters: where tasks come from, how a trial of the target runs, how a rollout is scored.

An adapter is any object with the three methods of :class:`Adapter`. The built-in targets
(``python``, ``command``, ``none``) and the python scorer are chosen in ``honesteval.yaml``;
:func:`build_adapter` assembles them for a project.
"""

from __future__ import annotations

from ._base import Adapter, ProjectAdapter, Scorer, Target, build_adapter
from ._command import CommandTarget
from ._python import NoTarget, PythonScorer, PythonTarget, load_callable

__all__ = [
    "Adapter",
    "CommandTarget",
    "NoTarget",
    "ProjectAdapter",
    "PythonScorer",
    "PythonTarget",
    "Scorer",
    "Target",
    "build_adapter",
    "load_callable",
]
