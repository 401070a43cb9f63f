"""Prefect flows. Each is orchestration only; the logic lives in plain modules."""

from honesteval.flows._evaluate import evaluate
from honesteval.flows._gate import finalize, gate, reevaluate_best
from honesteval.flows._rescore import rescore

__all__ = ["evaluate", "finalize", "gate", "reevaluate_best", "rescore"]
