"""The data honesteval passes around and writes to disk (pydantic 2, frozen).

Every name is importable from here; each lives in the module of its kind:
:mod:`~honesteval.models.base` (the frozen base, the status and split vocabularies, cluster
identity), :mod:`~honesteval.models.inputs` (what a project gives: tasks, candidates, rollouts,
scores, the gate's settings), :mod:`~honesteval.models.results` (what honesteval computes: a
trial, a split's result, a gate decision) and :mod:`~honesteval.models.records` (the ledger's
lines and files).
"""

from honesteval.models.base import (
    COUNTED_STATUSES,
    EMPTY_CLUSTER,
    MISSING_STATUSES,
    REWARD_RANGE,
    ConfirmStop,
    GateMode,
    GateStage,
    NoRegression,
    OnlineRule,
    ScreenStop,
    SplitName,
    StderrMethod,
    StrictModel,
    TimeoutIs,
    TrialStatus,
    cluster_key,
    utc_now,
)
from honesteval.models.inputs import Budget, Candidate, GateConfig, Rollout, Score, Task, TaskTrials
from honesteval.models.records import (
    BestIdentity,
    BestRecord,
    ContinuationRecord,
    DecisionRecord,
    DriftRecord,
    RepairRecord,
    ReservationRecord,
    Seal,
)
from honesteval.models.requests import (
    EvaluateRequest,
    GateOverrides,
    GateRequest,
    PositiveInt,
    TaskRunnerKind,
)
from honesteval.models.results import (
    BudgetStop,
    DriftReport,
    GateDecision,
    OnlineState,
    SplitResult,
    TaskResult,
    TrialRecord,
)
from honesteval.models.seeds import Seeding, trial_seed

# Each class keeps the qualified name it had as one module (``honesteval.models.SplitResult``):
# Prefect's JSON result serializer writes it into every persisted flow result, and results
# stored before the split must read back the same way as the ones written after it.
for _model in (
    BestIdentity,
    BestRecord,
    Budget,
    BudgetStop,
    Candidate,
    DecisionRecord,
    DriftRecord,
    DriftReport,
    GateConfig,
    GateDecision,
    OnlineState,
    RepairRecord,
    ReservationRecord,
    Rollout,
    Score,
    Seal,
    SplitResult,
    Task,
    TaskResult,
    TaskTrials,
    TrialRecord,
):
    _model.__module__ = __name__
del _model

__all__ = [
    "COUNTED_STATUSES",
    "EMPTY_CLUSTER",
    "MISSING_STATUSES",
    "REWARD_RANGE",
    "BestIdentity",
    "BestRecord",
    "Budget",
    "BudgetStop",
    "Candidate",
    "ConfirmStop",
    "ContinuationRecord",
    "DecisionRecord",
    "DriftRecord",
    "DriftReport",
    "EvaluateRequest",
    "GateConfig",
    "GateDecision",
    "GateMode",
    "GateOverrides",
    "GateRequest",
    "GateStage",
    "NoRegression",
    "OnlineRule",
    "OnlineState",
    "PositiveInt",
    "RepairRecord",
    "ReservationRecord",
    "Rollout",
    "Score",
    "ScreenStop",
    "Seal",
    "Seeding",
    "SplitName",
    "SplitResult",
    "StderrMethod",
    "StrictModel",
    "Task",
    "TaskResult",
    "TaskRunnerKind",
    "TaskTrials",
    "TimeoutIs",
    "TrialRecord",
    "TrialStatus",
    "cluster_key",
    "trial_seed",
    "utc_now",
]
