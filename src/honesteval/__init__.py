"""honesteval: honest, variance-aware evaluation and significance gating.

A crashed rollout is missing data, never a zero; a candidate is promoted only when it beats
the current best by more than its own error bar; every number carries coverage and SE.

The API (:mod:`honesteval.api`): :func:`evaluate`, :func:`prepare_gate`, :func:`gate`,
:func:`rescore`, :func:`finalize`, :func:`import_inspect`, :func:`load_project`, imported on
first use.
Importing the package does not import Prefect: flows live in
:mod:`honesteval.orchestration.flows`.
"""

from typing import TYPE_CHECKING, Any

from honesteval.errors import (
    CandidateFailure,
    ConfigError,
    GateSplitError,
    HonestevalError,
    InfraError,
    NotGateable,
    RateLimited,
    SealedSplitError,
    ServiceTimeout,
    TargetTimeout,
    TestSealedError,
)

if TYPE_CHECKING:
    from honesteval.api import (
        evaluate,
        finalize,
        gate,
        import_inspect,
        load_project,
        prepare_gate,
        rescore,
    )
    from honesteval.models import (
        Candidate,
        EvaluateRequest,
        GateConfig,
        GateDecision,
        GateOverrides,
        GateRequest,
        Rollout,
        Score,
        SplitResult,
        Task,
        TaskResult,
        TaskTrials,
        TrialRecord,
    )

__version__ = "0.1.0"

_API = (
    "evaluate",
    "finalize",
    "gate",
    "import_inspect",
    "load_project",
    "prepare_gate",
    "rescore",
)
_MODELS = (
    "Candidate",
    "EvaluateRequest",
    "GateConfig",
    "GateDecision",
    "GateOverrides",
    "GateRequest",
    "Rollout",
    "Score",
    "SplitResult",
    "Task",
    "TaskResult",
    "TaskTrials",
    "TrialRecord",
)


def __getattr__(name: str) -> Any:
    """The API functions and the models, imported on first use: ``import honesteval`` stays
    light, so a Prefect server started by the CLI (``python -m
    honesteval.server.localserver``) and the CLI before it starts one do not build pydantic
    models they never use."""
    if name in _API:
        from honesteval import api

        return getattr(api, name)
    if name in _MODELS:
        from honesteval import models

        return getattr(models, name)
    raise AttributeError(f"module 'honesteval' has no attribute {name!r}")


__all__ = [
    "Candidate",
    "CandidateFailure",
    "ConfigError",
    "EvaluateRequest",
    "GateConfig",
    "GateDecision",
    "GateOverrides",
    "GateRequest",
    "GateSplitError",
    "HonestevalError",
    "InfraError",
    "NotGateable",
    "RateLimited",
    "Rollout",
    "Score",
    "SealedSplitError",
    "ServiceTimeout",
    "SplitResult",
    "TargetTimeout",
    "Task",
    "TaskResult",
    "TaskTrials",
    "TestSealedError",
    "TrialRecord",
    "__version__",
    "evaluate",
    "finalize",
    "gate",
    "import_inspect",
    "load_project",
    "prepare_gate",
    "rescore",
]
