"""Adapters: where tasks come from, how a trial of the target runs, how a rollout is scored.

An adapter is any object with the three methods of :class:`Adapter`. The kinds of target
(``python``, ``command``, ``openai``, ``none``, ``custom``) are registered in
:data:`AdapterConfig` and chosen in ``honesteval.yaml``; :func:`build_adapter` assembles a
project's target and scorer.
"""

from __future__ import annotations

from ._base import (
    Adapter,
    AdapterParts,
    ProjectAdapter,
    Scorer,
    Target,
    TargetConfig,
    build_adapter,
)
from ._command import CommandTarget
from ._custom import CustomAdapter
from ._python import NoTarget, PythonScorer, PythonTarget, load_callable
from ._registry import ADAPTER_KINDS, AdapterConfig

__all__ = [
    "ADAPTER_KINDS",
    "Adapter",
    "AdapterConfig",
    "AdapterParts",
    "CommandTarget",
    "CustomAdapter",
    "NoTarget",
    "ProjectAdapter",
    "PythonScorer",
    "PythonTarget",
    "Scorer",
    "Target",
    "TargetConfig",
    "build_adapter",
    "load_callable",
]
