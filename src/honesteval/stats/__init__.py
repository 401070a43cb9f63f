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
from ._interval import betting_ci
from ._power import (
    VarianceComponents,
    bar_z,
    minimum_detectable_effect,
    paired_components,
    required_tasks,
    required_trials,
    task_means,
    variance_components,
)

__all__ = [
    "PairedDeltas",
    "VarianceComponents",
    "aggregate",
    "bar_z",
    "betting_ci",
    "bootstrap_ci",
    "clustered_stderr",
    "combined_stderr",
    "compare_to_bar",
    "decide",
    "minimum_detectable_effect",
    "paired_components",
    "paired_deltas",
    "pass_at_k",
    "pass_hat_k",
    "required_tasks",
    "required_trials",
    "stderr",
    "task_means",
    "variance_components",
]
