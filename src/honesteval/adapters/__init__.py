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
    checked_score,
)
from ._command import CommandTarget
from ._custom import CustomAdapter
from ._loading import load_callable
from ._process import live_start_time, start_time
from ._python import NoTarget, PythonScorer, PythonTarget
from ._registry import ADAPTER_KINDS, AdapterConfig
from ._sandbox import SandboxConfig, sandbox_line, say_unconfined_with
from .assemble import build_adapter

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
    "SandboxConfig",
    "Scorer",
    "Target",
    "TargetConfig",
    "build_adapter",
    "checked_score",
    "live_start_time",
    "load_callable",
    "sandbox_line",
    "say_unconfined_with",
    "start_time",
]
