"""Entrypoints for `prefect deploy` (deployments/prefect.yaml): the honesteval flows."""

from honesteval.orchestration.flows import evaluate, finalize, gate, reevaluate_best

__all__ = ["evaluate", "finalize", "gate", "reevaluate_best"]
