"""Pure statistics for honesteval: numpy/scipy only, no Prefect.

The public names are re-exported here; the modules behind them are private.
"""

from ._aggregate import aggregate
from ._estimators import (
    bootstrap_ci,
    clustered_stderr,
    combined_stderr,
    pass_at_k,
    pass_hat_k,
    stderr,
)
from ._gate import PairedDeltas, compare_to_bar, decide, paired_deltas

__all__ = [
    "PairedDeltas",
    "aggregate",
    "bootstrap_ci",
    "clustered_stderr",
    "combined_stderr",
    "compare_to_bar",
    "decide",
    "paired_deltas",
    "pass_at_k",
    "pass_hat_k",
    "stderr",
]
