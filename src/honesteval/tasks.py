"""The Prefect tasks under their public import path, beside :mod:`honesteval.flows`.

The tasks live in :mod:`honesteval.orchestration.tasks`, each a thin wrapper around a plain
function (:mod:`honesteval.evaluation.trial`, :mod:`honesteval.stats`); this module only
re-exports them under the names the flows' task runs carry: ``run_trial`` and ``score`` (one
trial), ``run_trial_batch`` and ``score_batch`` (several in one task run), ``aggregate`` and
``decide``.
"""

from honesteval.orchestration.tasks import aggregate_evaluation as aggregate
from honesteval.orchestration.tasks import decide_task as decide
from honesteval.orchestration.tasks import run_trial, run_trial_batch, score, score_batch

__all__ = ["aggregate", "decide", "run_trial", "run_trial_batch", "score", "score_batch"]
