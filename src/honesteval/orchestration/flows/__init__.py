"""Prefect flows. Each is orchestration only; the logic lives in plain modules."""

from honesteval.orchestration.flows._dask import dask_task_runner
from honesteval.orchestration.flows._evaluate import evaluate
from honesteval.orchestration.flows._gate import finalize, gate, reevaluate_best
from honesteval.orchestration.flows._rescore import rescore
from honesteval.redaction import install_log_redaction

install_log_redaction()  # every log line of a flow run is redacted as it is made

__all__ = ["dask_task_runner", "evaluate", "finalize", "gate", "reevaluate_best", "rescore"]
