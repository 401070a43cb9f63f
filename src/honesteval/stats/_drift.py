"""``drift_report``: has the current best moved since it was promoted?

The nightly ``reevaluate-best`` re-runs the best on fresh seeds and compares the new run with
the stored one, paired per task, two-sided. Not the gate's one-sided ``k_se`` bar: at
``k_se = 1`` a two-sided check would cry "drifted" on about a third of perfectly stable nights.

The reference must not be selected: a best promoted by a test (the confirmation passed
alpha_j, or a single-stage screen passed its bar) has a stored run biased upwards, and against
it the check cried "drifted" twice as often as its 5 % (0.100 ± 0.026 at j = 10). So the first
re-run after such a promotion becomes the reference (:func:`reference_report`, no test that
night) and later nights compare with it; ``bench/confirm_power.py`` measures the alarm rate.
"""

from __future__ import annotations

from typing import Literal

from honesteval.models import DriftReport, GateConfig, SplitResult

from ._gate import compare_to_bar, paired_deltas
from ._quantiles import t_quantile

__all__ = ["DRIFT_ALPHA", "drift_report", "reference_report"]

#: The two-sided level of the drift check.
DRIFT_ALPHA = 0.05

DriftStatus = Literal["stable", "drifted", "indecisive", "reference"]


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


def reference_report(stored: SplitResult, fresh: SplitResult, cfg: GateConfig) -> DriftReport:
    """The first re-run after a selected promotion: recorded as the drift reference.

    Below ``cfg.min_coverage`` it is indecisive instead (an outage makes no reference)."""
    drift = drift_report(stored, fresh, cfg)
    if drift.status == "indecisive":
        return drift
    return drift.model_copy(
        update={
            "status": "reference",
            "delta": None,
            "se": None,
            "bar": None,
            "message": (
                f"reference: the first run on fresh seeds since the promotion (val reward "
                f"{fresh.reward:.4f}); the run that promoted it passed a test and is biased "
                "upwards, so later nights compare with this one"
            ),
        }
    )
