"""``confirm_decide``: the confirmation's decision, beside :func:`._gate.decide`.

The screen decides with ``decide`` (a t bar at a lenient level); the confirmation, at the
online level alpha_j, decides with the betting e-value of :mod:`._confirm`, whose level holds
for bounded deltas whatever their skew, and reports the promoted gain conditional on the
promotion (:mod:`._selective`).
"""

from __future__ import annotations

import numpy as np

from honesteval.models import GateConfig, GateDecision, SplitResult

from ._confirm import cluster_means, confirm_evidence
from ._gate import PairedDeltas, _evidence, decide
from ._selective import selective_gain

__all__ = ["confirm_decide"]


def _observations(pairs: PairedDeltas) -> np.ndarray:
    values = [v / pairs.unit for v in pairs.values]
    clustered = pairs.clusters is not None and pairs.n_clusters >= 2
    return cluster_means(values, pairs.clusters if clustered else None)


def confirm_decide(
    current: SplitResult, candidate: SplitResult, cfg: GateConfig, level: float
) -> GateDecision:
    """The confirmation's decision at ``level`` = alpha_j: promote iff E ≥ 1/alpha_j.

    :func:`decide` (paired, at ``level``) frames it: its coverage checks, regression lists and
    notes, Δ and SE stand; only the verdict is the e-value's. As in ``decide``, tasks one side
    lacks are imputed at the worst case for the candidate and the test is run again: both
    promote → promote, both not → not, they disagree → INDECISIVE. A vetoing
    ``no_regression`` still vetoes a promotion.
    """
    paired_cfg = cfg.model_copy(update={"mode": "paired", "alpha": level})
    framed = decide(current, candidate, paired_cfg)
    if framed.delta is None:  # decided before any test: nothing scored, coverage too low
        return framed
    observed = _evidence(current, candidate)
    seen = confirm_evidence(_observations(observed.paired()), level)
    all_ids = sorted({t.id for t in current.per_task} | {t.id for t in candidate.per_task})
    lacking = [t for t in all_ids if t not in observed.current or t not in observed.candidate]
    worst = (
        confirm_evidence(_observations(observed.imputed(all_ids).paired()), level)
        if lacking
        else None
    )
    units = "clusters" if observed.paired().clusters is not None else "tasks"
    test = (
        f"paired Δ = {framed.delta:+.4f} over {framed.n_paired} tasks; betting {seen.text()} "
        f"({seen.n_obs} {units})"
    )
    gain = selective_gain(_observations(observed.paired()), level) if seen.accept else None
    update = {
        "gain_estimate": None if gain is None else gain[0],
        "gain_ci95": None if gain is None else gain[1],
        "e_value": seen.e_value,
        "bar": 1.0 / level,
        "bar_multiplier": None,
        "mde": None,
        "rerun": lacking,
    }
    if worst is not None and worst.accept != seen.accept:
        verdicts = {True: "ACCEPT", False: "REJECT"}
        return framed.model_copy(
            update=update
            | {
                "accept": False,
                "indecisive": True,
                "reason": f"INDECISIVE: on the tasks both sides scored, {verdicts[seen.accept]}"
                f" ({test}); with the {len(lacking)} task(s) one side lacks imputed at the "
                f"worst case for the candidate, {verdicts[worst.accept]} ({worst.text()}): "
                "the missing data could flip it, rerun them when the infrastructure is back",
            }
        )
    notes = [] if worst is None else [f"also holds with the missing tasks imputed: {worst.text()}"]
    accept = seen.accept
    if accept and cfg.no_regression in ("passed", "any") and framed.regressions:
        reason = (
            f"REJECT: {test} clears the bar, but no_regression={cfg.no_regression} vetoes it: "
            f"{', '.join(framed.regressions[:10])} got worse"
        )
        accept = False
    elif accept:
        reason = f"ACCEPT: {test}"
    else:
        reason = f"REJECT: {test}: below 1/alpha_j"
    if notes:
        reason += " [" + "; ".join(notes) + "]"
    return framed.model_copy(
        update=update | {"accept": accept, "indecisive": False, "reason": reason}
    )
