"""``drift_report``: has the current best moved since it was promoted?

The nightly ``reevaluate-best`` re-runs the best on fresh seeds and compares the new run with
the stored one, paired per task, two-sided. Not the gate's one-sided ``k_se`` bar: at
``k_se = 1`` a two-sided check would cry "drifted" on about a third of perfectly stable nights.
"""

from __future__ import annotations

from typing import Literal

from honesteval.models import DriftReport, GateConfig, SplitResult

from ._gate import compare_to_bar, paired_deltas
from ._quantiles import t_quantile

__all__ = ["DRIFT_ALPHA", "drift_report"]

#: The two-sided level of the drift check.
DRIFT_ALPHA = 0.05

DriftStatus = Literal["stable", "drifted", "indecisive"]


def drift_report(stored: SplitResult, fresh: SplitResult, cfg: GateConfig) -> DriftReport:
    """Two-sided paired t-test on per-task means at α = :data:`DRIFT_ALPHA`.

    Edge cases: ``fresh`` below ``cfg.min_coverage`` is indecisive (an outage is not drift),
    and so are fewer than 2 tasks scored in both runs (no variance to test against). The
    comparison Δ vs the bar is exact (:func:`compare_to_bar`), so a tie reads "stable".
    """

    def report(
        status: DriftStatus,
        message: str,
        *,
        n_paired: int = 0,
        delta: float | None = None,
        se: float | None = None,
        bar: float | None = None,
    ) -> DriftReport:
        return DriftReport(
            status=status,
            message=message,
            n_paired=n_paired,
            delta=delta,
            se=se,
            bar=bar,
            candidate=stored.candidate,
            fingerprint=stored.fingerprint,
            stored_reward=stored.reward,
            new_reward=fresh.reward,
            stored_base_seed=stored.base_seed,
            new_base_seed=fresh.base_seed,
        )

    if fresh.coverage < cfg.min_coverage:
        return report(
            "indecisive", f"indecisive: coverage {fresh.coverage:.2f} < {cfg.min_coverage:.2f}"
        )
    pairs = paired_deltas(stored, fresh)
    if pairs.n < 2:
        return report(
            "indecisive", "indecisive: fewer than 2 tasks scored in both runs", n_paired=pairs.n
        )
    delta, variance = pairs.mean, pairs.variance_of_mean
    se = pairs.se
    multiplier = t_quantile(1 - DRIFT_ALPHA / 2, pairs.n - 1)
    bar = multiplier * se
    moved = compare_to_bar(abs(delta), variance, multiplier) == "above"
    text = (
        f"paired Δ = {float(delta):+.4f}, SE = {se:.4f}, two-sided bar "
        f"{multiplier:.3g}×SE = {bar:.4f} over {pairs.n} tasks"
    )
    return report(
        "drifted" if moved else "stable",
        ("current best has drifted: " if moved else "stable: ") + text,
        delta=float(delta),
        se=se,
        bar=bar,
        n_paired=pairs.n,
    )
