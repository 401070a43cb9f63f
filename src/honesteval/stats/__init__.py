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

__all__ = [
    "aggregate",
    "bootstrap_ci",
    "clustered_stderr",
    "combined_stderr",
    "pass_at_k",
    "pass_hat_k",
    "stderr",
]
