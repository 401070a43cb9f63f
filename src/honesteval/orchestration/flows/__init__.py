"""Prefect flows. Each is orchestration only; the logic lives in plain modules.

``<flow>_of(plan)`` is the flow for a caller with its plan in hand (the API): the same flow,
which runs that plan instead of planning again from its parameters."""

from honesteval.orchestration.flows._dask import dask_task_runner
from honesteval.orchestration.flows._evaluate import evaluate, evaluate_of
from honesteval.orchestration.flows._gate import (
    finalize,
    finalize_of,
    gate,
    gate_of,
    reevaluate_best,
)
from honesteval.orchestration.flows._rescore import rescore, rescore_of
from honesteval.redaction import install_log_redaction

install_log_redaction()  # every log line of a flow run is redacted as it is made

__all__ = [
    "dask_task_runner",
    "evaluate",
    "evaluate_of",
    "finalize",
    "finalize_of",
    "gate",
    "gate_of",
    "reevaluate_best",
    "rescore",
    "rescore_of",
]
