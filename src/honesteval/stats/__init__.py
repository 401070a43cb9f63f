"""Pure statistics for honesteval: numpy/scipy only, no Prefect.

The public names are re-exported here; the modules behind them are private.
"""

from ._aggregate import aggregate
from ._checks import positive_int, sorted_ks
from ._confirmation import (
    confirm_decide,
    confirmation_log_e,
    observed_gain,
    round_rewards,
    rounds_decide,
    rounds_for_gain,
    selective_gain,
    unreachable,
)
from ._drift import DRIFT_ALPHA, drift_report, reference_report
from ._eprocess import (
    TrialEvidence,
    evidence_ceiling,
    promoted_paths,
    trial_evidence,
    trial_log_e,
)
from ._estimators import (
    bootstrap_ci,
    clustered_stderr,
    combined_stderr,
    pass_at_k,
    pass_hat_k,
    stderr,
)
from ._gate import (
    PairedDeltas,
    baseline_decision,
    compare_to_bar,
    decide,
    gain_ci95,
    paired_ci95,
    paired_deltas,
)
from ._gate_power import (
    SMALL_GAIN,
    GateDesign,
    observation_components,
    planning_mde,
    promotion_mde,
    promotion_power,
    screen_pass_rate,
    small_val_warning,
)
from ._interval import betting_ci
from ._missing import fill_missing, missing_bounds
from ._online import advance, gamma, new_online_state, next_level, wealth_left
from ._power import (
    VarianceComponents,
    bar_z,
    between_variance,
    minimum_detectable_effect,
    paired_components,
    required_tasks,
    required_trials,
    task_means,
    variance_components,
)
from ._quantiles import normal_quantile, t_quantile
from ._reason import HEADLINE_CHARS, first_sentence, headline, headlined, reason_details
from ._screen_stop import (
    RoundVerdict,
    ScreenStopping,
    boundaries,
    conditional_pass,
    round_decision,
    screen_round,
    screen_stopping,
    staged_rule,
)
from ._sequential import (
    SequentialOutcome,
    betting_log_wealth,
    sequential_stops,
    sequential_test,
)

__all__ = [
    "DRIFT_ALPHA",
    "HEADLINE_CHARS",
    "SMALL_GAIN",
    "GateDesign",
    "PairedDeltas",
    "RoundVerdict",
    "ScreenStopping",
    "SequentialOutcome",
    "TrialEvidence",
    "VarianceComponents",
    "advance",
    "aggregate",
    "bar_z",
    "baseline_decision",
    "betting_ci",
    "betting_log_wealth",
    "between_variance",
    "bootstrap_ci",
    "boundaries",
    "clustered_stderr",
    "combined_stderr",
    "compare_to_bar",
    "conditional_pass",
    "confirm_decide",
    "confirmation_log_e",
    "decide",
    "drift_report",
    "evidence_ceiling",
    "fill_missing",
    "first_sentence",
    "gain_ci95",
    "gamma",
    "headline",
    "headlined",
    "minimum_detectable_effect",
    "missing_bounds",
    "new_online_state",
    "next_level",
    "normal_quantile",
    "observation_components",
    "observed_gain",
    "paired_ci95",
    "paired_components",
    "paired_deltas",
    "pass_at_k",
    "pass_hat_k",
    "planning_mde",
    "positive_int",
    "promoted_paths",
    "promotion_mde",
    "promotion_power",
    "reason_details",
    "reference_report",
    "required_tasks",
    "required_trials",
    "round_decision",
    "round_rewards",
    "rounds_decide",
    "rounds_for_gain",
    "screen_pass_rate",
    "screen_round",
    "screen_stopping",
    "selective_gain",
    "sequential_stops",
    "sequential_test",
    "small_val_warning",
    "sorted_ks",
    "staged_rule",
    "stderr",
    "t_quantile",
    "task_means",
    "trial_evidence",
    "trial_log_e",
    "unreachable",
    "variance_components",
    "wealth_left",
]
