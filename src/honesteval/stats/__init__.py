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
    minimum_detectable_effect,
    paired_components,
    required_tasks,
    required_trials,
    variance_components,
)
from ._quantiles import normal_quantile, t_quantile

__all__ = [
    "PairedDeltas",
    "VarianceComponents",
    "aggregate",
    "betting_ci",
    "bootstrap_ci",
    "clustered_stderr",
    "combined_stderr",
    "compare_to_bar",
    "decide",
    "minimum_detectable_effect",
    "normal_quantile",
    "paired_components",
    "paired_deltas",
    "pass_at_k",
    "pass_hat_k",
    "required_tasks",
    "required_trials",
    "stderr",
    "t_quantile",
    "variance_components",
]
