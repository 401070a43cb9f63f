"""The Prefect flows under their original import path (deployments name ``honesteval.flows``).

The flows live in :mod:`honesteval.orchestration.flows`; this module only re-exports them.
"""

from honesteval.orchestration.flows import evaluate, finalize, gate, reevaluate_best, rescore

__all__ = ["evaluate", "finalize", "gate", "reevaluate_best", "rescore"]
