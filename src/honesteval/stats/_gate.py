"""``decide``: does a candidate beat the current best by more than its own error bar?

The order of checks is the contract (SPEC §4, revised by the missing-data issue); the first that
applies decides:

1. a result of another split than ``val`` raises :class:`GateSplitError`;
2. a subset run or an empty split raises :class:`NotGateable`;
3. a side with nothing scored is INDECISIVE, whatever ``min_coverage`` (even 0);
4. coverage below ``min_coverage`` on either side, or on the overlap of tasks scored on both
   sides, is INDECISIVE (an outage is not a regression, and not progress either);
5. the mode decides twice: on the observed data, and with every task one side lacks imputed at
   the worst case for the candidate (candidate missing → the reward range's minimum 0, current
   missing → its maximum 1). Both accept → accept; both reject → reject; they disagree →
   INDECISIVE, naming the tasks to rerun: the missing data could flip the decision;
6. after an accept, ``no_regression: passed|any`` may veto. ``report`` (the default) only
   lists the regressions; every decision lists them, and the tasks the best passed that the
   candidate has no score for (*unverified*).

Every mode is exact and computed from the trial rewards (see :mod:`._exact`): per-task means are
rationals, and Δ > bar·SE is decided as Δ² > bar² · Var(Δ) on those rationals, so neither float
rounding nor the order of tasks can turn a tie into an accept (cap-evolve #351: a one-task gain
makes Δ̄ == SE exactly). A tie rejects.

With clusters (any task carries ``cluster``) the paired SE is cluster-robust and the t bar
and MDE use C − 1 degrees of freedom.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

from honesteval.errors import GateSplitError, NotGateable
from honesteval.models import GateConfig, GateDecision, GateMode, SplitResult

from ._exact import ExactSample, common_grid, task_sums
from ._missing import fill_missing
from ._power import POWER, Z_POWER_80
from ._quantiles import t_quantile

__all__ = [
    "PairedDeltas",
    "baseline_decision",
    "compare_to_bar",
    "decide",
    "gain_ci95",
    "paired_ci95",
    "paired_deltas",
]

LISTED = 10  # task ids quoted in a reason

Comparison = Literal["above", "tie", "below"]


@dataclass(frozen=True)
class PairedDeltas(ExactSample):
    """Per-task differences (candidate − current) over tasks scored on both sides, by id.

    Exact: integers over a common unit (:class:`ExactSample`).
    """

    ids: list[str] = field(default_factory=list)


def _evidence(current: SplitResult, candidate: SplitResult) -> _Evidence:
    """Both results' scored task means, exactly, on one grid."""
    unit, (cur, cand) = common_grid(task_sums(current), task_sums(candidate))
    return _Evidence(
        unit,
        cur,
        cand,
        {t.id: t.cluster for r in (current, candidate) for t in r.per_task},
        (_side_variance(current), _side_variance(candidate)),
    )


def paired_deltas(current: SplitResult, candidate: SplitResult) -> PairedDeltas:
    """Exact per-task deltas from the trial rewards; cluster-robust when tasks carry clusters."""
    return _evidence(current, candidate).paired()


def compare_to_bar(delta: Fraction, variance_of_delta: Fraction, bar: float) -> Comparison:
    """Exactly: is Δ > bar · sqrt(Var(Δ))? Squared on both sides, so no square root rounds."""
    if delta <= 0:
        return "below"
    lhs = delta * delta
    rhs = Fraction(bar) ** 2 * variance_of_delta
    if lhs > rhs:
        return "above"
    return "tie" if lhs == rhs else "below"


def _sign(x: Fraction) -> Comparison:
    return "above" if x > 0 else "tie" if x == 0 else "below"


def _quantiles(cfg: GateConfig, df: int) -> tuple[float, float]:
    """(bar quantile, power quantile): one-sided t with ``df`` when ``alpha`` is set, else k_se
    read as a normal quantile (and the normal 80 % quantile)."""
    if cfg.alpha is None:
        return cfg.k_se, Z_POWER_80
    d = max(df, 1)
    return t_quantile(1.0 - cfg.alpha, d), t_quantile(POWER, d)


@dataclass(frozen=True)
class _Evidence:
    """Both sides' task means on one grid (``value / unit``), and clusters."""

    unit: int
    current: dict[str, int]
    candidate: dict[str, int]
    clusters: Mapping[str, str | None]
    # A side whose SE is cap-evolve's "combined" one (not a variance of task means) keeps its
    # reported variance; None: computed exactly from the task means.
    side_variances: tuple[Fraction | None, Fraction | None] = (None, None)

    def _keys(self, ids: list[str]) -> list[str] | None:
        """One cluster key per id (a task without a cluster is its own); None if none has one."""
        if all(self.clusters.get(i) is None for i in ids):
            return None
        return [f"c:{self.clusters[i]}" if self.clusters.get(i) else f"t:{i}" for i in ids]

    def side(self, values: dict[str, int]) -> ExactSample:
        ids = sorted(values)
        return ExactSample([values[i] for i in ids], self.unit, self._keys(ids))

    def paired(self) -> PairedDeltas:
        ids = sorted(self.current.keys() & self.candidate.keys())
        deltas = [self.candidate[i] - self.current[i] for i in ids]
        return PairedDeltas(deltas, self.unit, self._keys(ids), ids=ids)

    def imputed(self, ids: list[str]) -> _Evidence:
        """Every task in ``ids`` one side lacks at the worst case for the candidate: the
        current best missing → the reward maximum 1, the candidate missing → the minimum 0."""
        return _Evidence(
            self.unit,
            fill_missing(self.current, ids, self.unit),
            fill_missing(self.candidate, ids, 0),
            self.clusters,
            self.side_variances,
        )


@dataclass(frozen=True)
class _Verdict:
    comparison: Comparison
    delta: Fraction
    se: float | None
    bar: float
    multiplier: float | None
    mde: float | None
    n_paired: int
    test: str
    notes: list[str]

    @property
    def accept(self) -> bool:
        return self.comparison == "above"


def _judge(ev: _Evidence, cfg: GateConfig) -> _Verdict:
    """The mode's verdict on one set of task means (observed, or worst-case imputed)."""
    pairs = ev.paired()
    cur, cand = ev.side(ev.current), ev.side(ev.candidate)
    diff = cand.mean - cur.mean
    notes: list[str] = []
    mode: GateMode = cfg.mode
    if mode == "threshold":
        gain = diff - Fraction(cfg.threshold)
        test = f"Δ of rewards = {float(diff):+.4f} vs threshold {cfg.threshold:g}"
        return _Verdict(_sign(gain), diff, None, cfg.threshold, None, None, pairs.n, test, [])
    if mode == "strict":
        test = f"Δ of rewards = {float(diff):+.4f} vs 0"
        return _Verdict(_sign(diff), diff, None, 0.0, None, None, pairs.n, test, [])

    if mode == "paired" and pairs.n < 2:
        notes.append(f"only {pairs.n} task(s) scored on both sides: fell back to significant")
        mode = "significant"
    if mode == "paired" and pairs.clusters is not None and pairs.n_clusters < 2:
        notes.append("fewer than 2 clusters on both sides: paired SE over tasks, not clusters")
        pairs = PairedDeltas(pairs.values, pairs.unit, None, ids=pairs.ids)
    if mode == "paired":
        delta, variance, df = pairs.mean, pairs.variance_of_mean, pairs.df
        what = f"paired Δ over {pairs.n} tasks"
        if pairs.clusters is not None:
            what += f" ({pairs.n_clusters} clusters)"
    else:
        var_cur, var_cand = (
            exact if given is None else given
            for given, exact in zip(
                ev.side_variances, (cur.variance_of_mean, cand.variance_of_mean), strict=True
            )
        )
        delta, variance = diff, var_cur + var_cand
        df = min(cur.df, cand.df)
        what = "Δ of rewards"
    if variance == 0:
        notes.append("SE = 0: strict fallback (accept iff Δ > 0)")
        test = f"{what} = {float(delta):+.4f} vs 0"
        return _Verdict(_sign(delta), delta, 0.0, 0.0, None, None, pairs.n, test, notes)
    se = math.sqrt(float(variance))
    q_bar, q_power = _quantiles(cfg, df)
    bar = q_bar * se
    test = f"{what} = {float(delta):+.4f} vs bar {q_bar:.3g}×SE = {bar:.4f}"
    comparison = compare_to_bar(delta, variance, q_bar)
    return _Verdict(comparison, delta, se, bar, q_bar, (q_bar + q_power) * se, pairs.n, test, notes)


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


def _regressions(ev: _Evidence, cfg: GateConfig, rule: str) -> tuple[list[str], list[str]]:
    """(regressions, unverified) by ``rule`` (``passed`` or ``any``), exactly.

    ``passed``: a task the current best passed (mean ≥ pass_threshold) is now below it.
    ``any``: any per-task drop. Unverified: tasks the best passed that the candidate lacks.
    """
    # mean >= pass_threshold  <=>  value * q >= p * unit, with pass_threshold = p / q exactly
    p, q = Fraction(cfg.pass_threshold).as_integer_ratio()
    passing = p * ev.unit
    regressions, unverified = [], []
    for tid in sorted(ev.current):
        before = ev.current[tid] * q
        after = ev.candidate.get(tid)
        if after is None:
            if before >= passing:
                unverified.append(tid)
        elif (rule == "passed" and before >= passing > after * q) or (
            rule == "any" and after < ev.current[tid]
        ):
            regressions.append(tid)
    return regressions, unverified


def _listed(ids: list[str]) -> str:
    more = f" and {len(ids) - LISTED} more" if len(ids) > LISTED else ""
    return ", ".join(ids[:LISTED]) + more


def _side_variance(result: SplitResult) -> Fraction | None:
    """cap-evolve's ``combined`` SE is not a variance of task means: take the reported one."""
    if result.stderr_method == "combined":
        return Fraction(result.stderr or 0.0) ** 2
    return None


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
    common: dict[str, Any] = dict(
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
    observed = _evidence(current, candidate)
    cur, cand = observed.current, observed.candidate
    all_ids = sorted({t.id for t in current.per_task} | {t.id for t in candidate.per_task})
    regressions: list[str] = []
    unverified: list[str] = []
    if cfg.no_regression != "off":
        rule = "any" if cfg.no_regression == "any" else "passed"
        regressions, unverified = _regressions(observed, cfg, rule)
    common.update(regressions=regressions, unverified=unverified)

    def indecisive(reason: str, **extra: Any) -> GateDecision:
        return GateDecision(accept=False, indecisive=True, reason=reason, **common, **extra)

    overlap = cur.keys() & cand.keys()
    lacking = [t for t in all_ids if t not in overlap]
    coverages = (
        f"coverage current {current.coverage:.2f}, candidate {candidate.coverage:.2f}, "
        f"both {len(overlap) / len(all_ids):.2f}"
    )
    empty = [side for side, r in (("current", cur), ("candidate", cand)) if not r]
    if empty:
        return indecisive(
            f"INDECISIVE: nothing scored on the {' and '.join(empty)} side ({coverages}); "
            "rerun when the infrastructure is back",
            rerun=lacking,
        )
    if min(current.coverage, candidate.coverage, len(overlap) / len(all_ids)) < cfg.min_coverage:
        return indecisive(
            f"INDECISIVE: {coverages} (min {cfg.min_coverage:.2f}); missing data is not a "
            "regression, rerun when the infrastructure is back",
            rerun=lacking,
        )

    seen = _judge(observed, cfg)
    worst: _Verdict | None = None
    if lacking:
        worst = _judge(observed.imputed(all_ids), cfg)
    common.update(
        delta=float(seen.delta),
        se=seen.se,
        bar=seen.bar,
        bar_multiplier=seen.multiplier,
        n_paired=seen.n_paired,
        mde=seen.mde,
        worst_case_delta=None if worst is None else float(worst.delta),
    )
    notes = list(seen.notes)
    if worst is not None and worst.accept != seen.accept:
        verdicts = {True: "ACCEPT", False: "REJECT"}
        return indecisive(
            f"INDECISIVE: on the tasks both sides scored, {verdicts[seen.accept]} "
            f"({seen.test}); with the {len(lacking)} task(s) one side lacks imputed at the "
            f"worst case for the candidate, {verdicts[worst.accept]} ({worst.test}). The "
            f"missing data could flip it: rerun {_listed(lacking)} when the infrastructure "
            "is back" + (" [" + "; ".join(notes) + "]" if notes else ""),
            rerun=lacking,
        )
    if worst is not None:
        notes.append(
            f"also holds with the {len(lacking)} task(s) one side lacks imputed at the worst "
            f"case: {worst.test}"
        )

    accept = seen.accept
    vetoed = accept and cfg.no_regression in ("passed", "any") and bool(regressions)
    if vetoed:
        rule_text = "a task the current best passed" if cfg.no_regression == "passed" else "a task"
        reason = (
            f"REJECT: {seen.test} clears the bar, but no_regression={cfg.no_regression} vetoes"
            f" it: {rule_text} got worse ({_listed(regressions)})"
        )
        accept = False
    elif accept:
        reason = f"ACCEPT: {seen.test}"
    elif seen.comparison == "tie":
        reason = f"REJECT (tie): {seen.test}: Δ equals the bar exactly, and a tie rejects"
    else:
        reason = f"REJECT: {seen.test}: not above the bar"
    if regressions and not vetoed:
        notes.append(
            f"regressions (not a veto, no_regression={cfg.no_regression}): {_listed(regressions)}"
        )
    if unverified:
        notes.append(
            f"unverified (the best passed, the candidate has no score): {_listed(unverified)}"
        )
    if current.coverage < 1.0:
        notes.append(f"the current best's result covers {current.n_scored}/{current.n_tasks} tasks")
    if notes:
        reason += " [" + "; ".join(notes) + "]"
    return GateDecision(accept=accept, reason=reason, rerun=lacking if lacking else [], **common)


def baseline_decision(result: SplitResult, cfg: GateConfig) -> GateDecision:
    """No current best yet: the first candidate gated becomes the baseline (if coverage allows).

    Nothing scored is INDECISIVE whatever ``min_coverage`` says (even 0): there is no reward.
    """
    indecisive = result.reward is None or result.coverage < cfg.min_coverage
    if result.reward is None or indecisive:
        reason = (
            f"INDECISIVE: no current best yet, and the candidate's coverage "
            f"{result.coverage:.2f} ({result.n_scored}/{result.n_tasks} tasks scored) is "
            f"below {cfg.min_coverage:.2f} or nothing was scored; nothing promoted"
        )
    else:
        se = "n/a" if result.stderr is None else f"{result.stderr:.4f}"
        partial = (
            ""
            if result.coverage >= 1.0
            else f"; promoted below full coverage: {result.n_scored}/{result.n_tasks} tasks "
            "scored, the rest never verified"
        )
        reason = (
            f"BASELINE: no current best yet; {result.candidate!r} becomes the baseline "
            f"(val reward {result.reward:.4f} ± {se}){partial}"
        )
    return GateDecision(
        accept=not indecisive,
        indecisive=indecisive,
        reason=reason,
        mode=cfg.mode,
        candidate=result.candidate,
        candidate_fingerprint=result.fingerprint,
        candidate_coverage=result.coverage,
        candidate_reward=result.reward,
        baseline=True,
    )


def gain_ci95(current: SplitResult, candidate: SplitResult) -> tuple[float, float] | None:
    """Student-t 95 % interval of the paired Δ (the selection-adjusted gain of a confirmation,
    run on fresh seeds); df = n − 1, or C − 1 with clusters. None below 2 paired tasks (or 2
    clusters): no variance to build it from."""
    return paired_ci95(paired_deltas(current, candidate))


def paired_ci95(pairs: PairedDeltas) -> tuple[float, float] | None:
    """The Student-t 95 % interval of a paired Δ (df n − 1, or C − 1); None below df 1."""
    if pairs.df < 1:
        return None
    half = t_quantile(0.975, pairs.df) * pairs.se
    mean = float(pairs.mean)
    return (mean - half, mean + half)
