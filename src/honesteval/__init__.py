"""honesteval: honest, variance-aware evaluation and significance gating.

A crashed rollout is missing data, never a zero; a candidate is promoted only when it beats
the current best by more than its own error bar; every number carries coverage and SE.

Importing the package does not import Prefect: flows live in :mod:`honesteval.orchestration.flows`.
"""

from honesteval.errors import (
    CandidateFailure,
    ConfigError,
    GateSplitError,
    HonestevalError,
    InfraError,
    NotGateable,
    RateLimited,
    SealedSplitError,
    TargetTimeout,
    TestSealedError,
)
from honesteval.models import (
    Candidate,
    GateConfig,
    Rollout,
    Score,
    SplitResult,
    Task,
    TaskResult,
    TaskTrials,
    TrialRecord,
)

__version__ = "0.1.0"

__all__ = [
    "Candidate",
    "CandidateFailure",
    "ConfigError",
    "GateConfig",
    "GateSplitError",
    "HonestevalError",
    "InfraError",
    "NotGateable",
    "RateLimited",
    "Rollout",
    "Score",
    "SealedSplitError",
    "SplitResult",
    "TargetTimeout",
    "Task",
    "TaskResult",
    "TaskTrials",
    "TestSealedError",
    "TrialRecord",
    "__version__",
]
