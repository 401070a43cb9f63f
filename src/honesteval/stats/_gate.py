"""``decide``: does a candidate beat the current best by more than its own error bar?

The order of checks is the contract (SPEC §4); the first that applies decides:

1. a result of another split than ``val`` raises :class:`GateSplitError`;
2. a subset run or an empty split raises :class:`NotGateable`;
3. coverage below ``min_coverage`` on either side is INDECISIVE (an outage is not a
   regression, and not progress either);
4. the mode decides (``paired``, ``significant``, ``threshold``, ``strict``);
5. after an accept, the no-regression rule may veto.

Comparisons against the bar are exact: Δ > bar·SE is decided as Δ² · n · (n − 1) >
bar² · Σ(d − Δ̄)² in :class:`fractions.Fraction` on the float inputs, so neither float rounding
nor the order of tasks can turn a tie into an accept (cap-evolve #351: a one-task gain makes
Δ̄ == SE exactly).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

from honesteval.errors import GateSplitError, NotGateable
from honesteval.models import GateConfig, GateDecision, SplitResult

from ._quantiles import normal_quantile, t_quantile

__all__ = ["PairedDeltas", "compare_to_bar", "decide", "paired_deltas"]

POWER_Z = normal_quantile(0.8)  # z_{0.8}: 80 % power for the minimum detectable effect
REGRESSION_EPS = 1e-9

Comparison = Literal["above", "tie", "below"]


# Every finite double is an integer multiple of 2^-1074, so deltas scaled by 2^1074 are exact
# integers: sums and squares of Python ints are exact and much faster than Fraction arithmetic.
_SCALE = 2**1074


def _scaled(x: float) -> int:
    num, den = x.as_integer_ratio()  # den is a power of two <= 2^1074
    return num * (_SCALE // den)


@dataclass(frozen=True)
class PairedDeltas:
    """Per-task differences (candidate − current) over tasks scored on both sides, by id.

    Held exactly, as integers in units of 2^-1074.
    """

    ids: list[str]
    scaled: list[int]

    @property
    def n(self) -> int:
        return len(self.scaled)

    @property
    def mean(self) -> Fraction:
        return Fraction(sum(self.scaled), self.n * _SCALE)

    @property
    def variance_of_mean(self) -> Fraction:
        """Σ(d − d̄)² / (n (n − 1)) = (nΣd² − (Σd)²) / (n² (n − 1)), exactly."""
        n = self.n
        s = sum(self.scaled)
        q = sum(d * d for d in self.scaled)
        return Fraction(n * q - s * s, n * n * (n - 1) * _SCALE * _SCALE)

    @property
    def se(self) -> float:
        """sd(d, ddof=1) / sqrt(n)."""
        return math.sqrt(float(self.variance_of_mean))


def paired_deltas(current: SplitResult, candidate: SplitResult) -> PairedDeltas:
    cur = {t.id: t.mean for t in current.per_task if t.mean is not None}
    cand = {t.id: t.mean for t in candidate.per_task if t.mean is not None}
    ids = sorted(cur.keys() & cand.keys())
    return PairedDeltas(ids, [_scaled(cand[i]) - _scaled(cur[i]) for i in ids])


def compare_to_bar(delta: Fraction, variance_of_delta: Fraction, bar: float) -> Comparison:
    """Exactly: is Δ > bar · sqrt(Var(Δ))? Squared on both sides, so no square root rounds."""
    if delta <= 0:
        return "below"
    lhs = delta * delta
    rhs = Fraction(bar) ** 2 * variance_of_delta
    if lhs > rhs:
        return "above"
    return "tie" if lhs == rhs else "below"


def _bar_multiplier(cfg: GateConfig, df: int) -> float:
    if cfg.alpha is None:
        return cfg.k_se
    return t_quantile(1.0 - cfg.alpha, max(df, 1))


def _power_z(cfg: GateConfig) -> float:
    """z_{1−α}: from ``alpha`` when set, else k_se read as a one-sided normal quantile."""
    return normal_quantile(1.0 - cfg.alpha) if cfg.alpha is not None else cfg.k_se


def _check_gateable(current: SplitResult, candidate: SplitResult) -> None:
    for side, r in (("current", current), ("candidate", candidate)):
        if r.split != "val":
            raise GateSplitError(
                f"the gate reads val results only; the {side} result is on {r.split!r}"
            )
    for side, r in (("current", current), ("candidate", candidate)):
        if r.subset:
            raise NotGateable(f"the {side} result is a subset run: it is never gateable")
        if r.empty or r.n_tasks == 0:
            raise NotGateable(f"the {side} result is an empty split: it is never gateable")


def _regressions(current: SplitResult, candidate: SplitResult, cfg: GateConfig) -> list[str]:
    if cfg.no_regression == "off":
        return []
    cur = {t.id: t.mean for t in current.per_task if t.mean is not None}
    cand = {t.id: t.mean for t in candidate.per_task if t.mean is not None}
    out = []
    for tid in sorted(cur.keys() & cand.keys()):
        before, after = cur[tid], cand[tid]
        if cfg.no_regression == "passed":
            if before >= cfg.pass_threshold and after < cfg.pass_threshold:
                out.append(tid)
        elif after < before - REGRESSION_EPS:
            out.append(tid)
    return out


def decide(current: SplitResult, candidate: SplitResult, cfg: GateConfig) -> GateDecision:
    """Decide whether ``candidate`` beats ``current`` (both on val, same tasks and seeds).

    >>> from honesteval.models import TaskTrials, GateConfig
    >>> from honesteval.stats import aggregate
    >>> def res(name, means):
    ...     tasks = [TaskTrials(id=f"t{i}", statuses=["ok"], rewards=[m])
    ...              for i, m in enumerate(means)]
    ...     return aggregate(tasks, candidate=name, split="val")
    >>> d = decide(res("a", [0.5] * 4), res("b", [0.6] * 4), GateConfig())
    >>> d.accept, d.n_paired
    (True, 4)
    """
    _check_gateable(current, candidate)
    common = dict(
        mode=cfg.mode,
        current=current.candidate,
        current_fingerprint=current.fingerprint,
        candidate=candidate.candidate,
        candidate_fingerprint=candidate.fingerprint,
        current_coverage=current.coverage,
        candidate_coverage=candidate.coverage,
        current_reward=current.reward,
        candidate_reward=candidate.reward,
    )
    if current.coverage < cfg.min_coverage or candidate.coverage < cfg.min_coverage:
        return GateDecision(
            accept=False,
            indecisive=True,
            reason=(
                f"INDECISIVE: coverage current {current.coverage:.2f}, candidate "
                f"{candidate.coverage:.2f} (min {cfg.min_coverage:.2f}); missing data is not a "
                "regression, rerun when the infrastructure is back"
            ),
            **common,
        )

    pairs = paired_deltas(current, candidate)
    assert current.reward is not None and candidate.reward is not None  # coverage > 0
    diff = Fraction(candidate.reward) - Fraction(current.reward)
    var_sig = Fraction(candidate.stderr or 0.0) ** 2 + Fraction(current.stderr or 0.0) ** 2
    notes: list[str] = []
    mode = cfg.mode
    if mode == "paired" and pairs.n < 2:
        notes.append(f"only {pairs.n} task(s) scored on both sides: fell back to significant")
        mode = "significant"

    if mode == "paired":
        delta, variance, df = pairs.mean, pairs.variance_of_mean, pairs.n - 1
        what = f"paired Δ over {pairs.n} tasks"
    else:
        delta, variance = diff, var_sig
        df = min(current.n_scored, candidate.n_scored) - 1
        what = "Δ of rewards"
    se = math.sqrt(float(variance))
    multiplier = _bar_multiplier(cfg, df)
    mde = (_power_z(cfg) + POWER_Z) * se

    if cfg.mode == "threshold":
        verdict: Comparison = (
            "above"
            if diff > Fraction(cfg.threshold)
            else "tie"
            if diff == Fraction(cfg.threshold)
            else "below"
        )
        bar = cfg.threshold
        delta, what = diff, "Δ of rewards"
        test = f"Δ={float(delta):+.4f} vs threshold {cfg.threshold:g}"
    elif cfg.mode == "strict" or variance == 0:
        if cfg.mode != "strict":
            notes.append("SE = 0: strict fallback (accept iff Δ > 0)")
        verdict = "above" if delta > 0 else "tie" if delta == 0 else "below"
        bar = 0.0
        test = f"{what} = {float(delta):+.4f} vs 0"
    else:
        verdict = compare_to_bar(delta, variance, multiplier)
        bar = multiplier * se
        test = f"{what} = {float(delta):+.4f} vs bar {multiplier:.3g}×SE = {bar:.4f}"

    accept = verdict == "above"
    regressions: list[str] = []
    if accept:
        regressions = _regressions(current, candidate, cfg)
        if regressions:
            accept = False
    if accept:
        reason = f"ACCEPT: {test}"
    elif regressions:
        rule = "a task the current best passed" if cfg.no_regression == "passed" else "a task"
        reason = (
            f"REJECT: {test} clears the bar, but no_regression={cfg.no_regression} vetoes"
            f" it: {rule} got worse ({', '.join(regressions[:10])})"
        )
    elif verdict == "tie":
        reason = f"REJECT (tie): {test}: Δ equals the bar exactly, and a tie rejects"
    else:
        reason = f"REJECT: {test}: not above the bar"
    if notes:
        reason += " [" + "; ".join(notes) + "]"
    return GateDecision(
        accept=accept,
        reason=reason,
        delta=float(delta),
        se=se,
        bar=bar,
        bar_multiplier=None if cfg.mode in ("threshold", "strict") else multiplier,
        n_paired=pairs.n,
        regressions=regressions,
        mde=mde,
        **common,
    )
