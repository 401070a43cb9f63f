"""Prefect flows. Each is orchestration only; the logic lives in plain modules."""

from honesteval.flows.evaluate import evaluate

__all__ = ["evaluate"]
