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

Every mode is exact and computed from the trial rewards (see :mod:`._exact`), each read as the
shortest decimal that reads back as it (0.1 + 0.2 == 0.3): per-task means are rationals, and
Δ > bar·SE is decided as Δ² > bar² · Var(Δ) on those rationals, with the threshold, k_se and
pass_threshold read as decimals too, so neither float rounding nor the order of tasks can turn
a tie into an accept (cap-evolve #351: a one-task gain makes Δ̄ == SE exactly). A tie rejects.
cap-evolve's ``combined`` SE is computed exactly as well (between-task variance plus each
task's trial variance), and rule 5 computes every SE again on the imputed sample.

Each numbered rule is one function below (``_rule_1_split`` … ``_rule_6_veto``).

With clusters (any task carries ``cluster``) the paired SE is cluster-robust (CR2) and the t
bar and MDE use its Bell–McCaffrey degrees of freedom (C − 1 with clusters of equal size;
fewer when a few clusters hold most tasks), the rule ``aggregate`` uses.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

from honesteval.errors import GateSplitError, NotGateable
from honesteval.models import (
    GateConfig,
    GateDecision,
    GateMode,
    SplitResult,
    cluster_key,
)

from ._exact import ExactSample, TaskSums, common_grid, decimal, task_sums
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
    sums = (task_sums(current), task_sums(candidate))
    unit, (cur, cand) = common_grid(*sums)
    return _Evidence(
        unit,
        cur,
        cand,
        {t.id: t.cluster for r in (current, candidate) for t in r.per_task},
        (_trial_variances(current, sums[0]), _trial_variances(candidate, sums[1])),
    )


def _trial_variances(result: SplitResult, sums: dict[str, TaskSums]) -> dict[str, Fraction] | None:
    """cap-evolve's ``combined`` SE adds each task's se² over its trials: kept per task, exactly,
    for a side that reports it; None for a side whose SE is the spread of task means."""
    if result.stderr_method != "combined":
        return None
    return {tid: s.variance_of_mean for tid, s in sums.items()}


def paired_deltas(current: SplitResult, candidate: SplitResult) -> PairedDeltas:
    """Exact per-task deltas from the trial rewards; cluster-robust when tasks carry clusters."""
    return _evidence(current, candidate).paired()


def compare_to_bar(delta: Fraction, variance_of_delta: Fraction, bar: float) -> Comparison:
    """Exactly: is Δ > bar · sqrt(Var(Δ))? Squared on both sides, so no square root rounds;
    ``bar`` is read as the decimal it prints as (a k_se of 0.2 is 1/5)."""
    if delta <= 0:
        return "below"
    lhs = delta * delta
    rhs = decimal(bar) ** 2 * variance_of_delta
    if lhs > rhs:
        return "above"
    return "tie" if lhs == rhs else "below"


def _sign(x: Fraction) -> Comparison:
    return "above" if x > 0 else "tie" if x == 0 else "below"


def _quantiles(cfg: GateConfig, df: float) -> tuple[float, float]:
    """(bar quantile, power quantile): one-sided t with ``df`` when ``alpha`` is set, else k_se
    read as a normal quantile (and the normal 80 % quantile). A df of 0 (a side with one task)
    reads as 1; a Bell–McCaffrey df below 1 stands (its t is heavier still)."""
    if cfg.alpha is None:
        return cfg.k_se, Z_POWER_80
    d = df if df > 0 else 1.0
    return t_quantile(1.0 - cfg.alpha, d), t_quantile(POWER, d)


@dataclass(frozen=True)
class _Evidence:
    """Both sides' task means on one grid (``value / unit``), and clusters."""

    unit: int
    current: dict[str, int]
    candidate: dict[str, int]
    clusters: Mapping[str, str | None]
    # Per side: each task's se² over its trials when that side's SE is cap-evolve's
    # "combined" one; None when the SE is the spread of task means alone.
    trial_variances: tuple[dict[str, Fraction] | None, dict[str, Fraction] | None] = (None, None)

    def _keys(self, ids: list[str]) -> list[str] | None:
        """One cluster key per id (:func:`cluster_key`); None if no task has a cluster."""
        if all(self.clusters.get(i) is None for i in ids):
            return None
        return [cluster_key(i, self.clusters.get(i)) for i in ids]

    def side(self, values: dict[str, int]) -> ExactSample:
        ids = sorted(values)
        return ExactSample([values[i] for i in ids], self.unit, self._keys(ids))

    def side_variance(self, which: int) -> Fraction:
        """Var of one side's mean: exactly from its task means, or cap-evolve's combined
        between/n + Σ se_i²/n² (tasks as independent units) when that side reports it."""
        values = (self.current, self.candidate)[which]
        within = self.trial_variances[which]
        if within is None:
            return self.side(values).variance_of_mean
        ids = sorted(values)
        plain = ExactSample([values[i] for i in ids], self.unit).variance_of_mean
        return plain + sum((within.get(i, Fraction(0)) for i in ids), Fraction(0)) / len(ids) ** 2

    def paired(self) -> PairedDeltas:
        ids = sorted(self.current.keys() & self.candidate.keys())
        deltas = [self.candidate[i] - self.current[i] for i in ids]
        return PairedDeltas(deltas, self.unit, self._keys(ids), ids=ids)

    def imputed(self, ids: list[str]) -> _Evidence:
        """Every task in ``ids`` one side lacks at the worst case for the candidate: the
        current best missing → the reward maximum 1, the candidate missing → the minimum 0.
        An imputed task has one value and no trial variance; every SE is computed again."""
        return _Evidence(
            self.unit,
            fill_missing(self.current, ids, self.unit),
            fill_missing(self.candidate, ids, 0),
            self.clusters,
            self.trial_variances,
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
        gain = diff - decimal(cfg.threshold)
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
        delta, variance = diff, ev.side_variance(0) + ev.side_variance(1)
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


def _regressions(ev: _Evidence, cfg: GateConfig, rule: str) -> tuple[list[str], list[str]]:
    """(regressions, unverified) by ``rule`` (``passed`` or ``any``), exactly.

    ``passed``: a task the current best passed (mean ≥ pass_threshold) is now below it.
    ``any``: any per-task drop. Unverified: tasks the best passed that the candidate lacks.
    """
    # mean >= pass_threshold  <=>  value * q >= p * unit, with pass_threshold = p / q exactly
    p, q = decimal(cfg.pass_threshold).as_integer_ratio()
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


@dataclass(frozen=True)
class _Case:
    """One gate call: both results, the evidence and what every decision carries."""

    current: SplitResult
    candidate: SplitResult
    cfg: GateConfig
    observed: _Evidence
    all_ids: list[str]
    lacking: list[str]  # tasks one side has no score for
    both: float  # share of all tasks scored on both sides
    common: dict[str, Any]

    def indecisive(self, reason: str, **extra: Any) -> GateDecision:
        return GateDecision(
            accept=False, indecisive=True, reason=reason, rerun=self.lacking, **self.common, **extra
        )

    @property
    def coverages(self) -> str:
        return (
            f"coverage current {self.current.coverage:.2f}, candidate "
            f"{self.candidate.coverage:.2f}, both {self.both:.2f}"
        )


def _case(current: SplitResult, candidate: SplitResult, cfg: GateConfig) -> _Case:
    observed = _evidence(current, candidate)
    all_ids = sorted({t.id for t in current.per_task} | {t.id for t in candidate.per_task})
    overlap = observed.current.keys() & observed.candidate.keys()
    regressions: list[str] = []
    unverified: list[str] = []
    if cfg.no_regression != "off":
        rule = "any" if cfg.no_regression == "any" else "passed"
        regressions, unverified = _regressions(observed, cfg, rule)
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
        current_failed=current.trials_failed,
        candidate_failed=candidate.trials_failed,
        candidate_trials=candidate.trials_planned,
        regressions=regressions,
        unverified=unverified,
    )
    lacking = [t for t in all_ids if t not in overlap]
    return _Case(
        current, candidate, cfg, observed, all_ids, lacking, len(overlap) / len(all_ids), common
    )


def _rule_1_split(current: SplitResult, candidate: SplitResult) -> None:
    """1. A result of another split than ``val`` raises :class:`GateSplitError`."""
    for side, r in (("current", current), ("candidate", candidate)):
        if r.split != "val":
            raise GateSplitError(
                f"the gate reads val results only; the {side} result is on {r.split!r}"
            )


def _rule_2_gateable(current: SplitResult, candidate: SplitResult) -> None:
    """2. A subset run or an empty split raises :class:`NotGateable`."""
    for side, r in (("current", current), ("candidate", candidate)):
        if r.subset:
            raise NotGateable(f"the {side} result is a subset run: it is never gateable")
        if r.empty or r.n_tasks == 0:
            raise NotGateable(f"the {side} result is an empty split: it is never gateable")


def _rule_3_nothing_scored(case: _Case) -> GateDecision | None:
    """3. A side with nothing scored is INDECISIVE, whatever ``min_coverage`` (even 0)."""
    sides = (("current", case.observed.current), ("candidate", case.observed.candidate))
    empty = [side for side, scored in sides if not scored]
    if not empty:
        return None
    return case.indecisive(
        f"INDECISIVE: nothing scored on the {' and '.join(empty)} side ({case.coverages}); "
        "rerun when the infrastructure is back"
    )


def _rule_4_coverage(case: _Case) -> GateDecision | None:
    """4. Coverage below ``min_coverage`` on either side, or on the overlap, is INDECISIVE."""
    lowest = min(case.current.coverage, case.candidate.coverage, case.both)
    if lowest >= case.cfg.min_coverage:
        return None
    return case.indecisive(
        f"INDECISIVE: {case.coverages} (min {case.cfg.min_coverage:.2f}); missing data is not "
        "a regression, rerun when the infrastructure is back"
    )


def _rule_5_decide_twice(case: _Case) -> GateDecision | tuple[_Verdict, list[str]]:
    """5. The mode decides on the observed data and again, every SE recomputed, with every
    task one side lacks imputed at the worst case for the candidate; disagreeing verdicts
    are INDECISIVE. Returns the observed verdict and its notes when they agree."""
    seen = _judge(case.observed, case.cfg)
    worst = _judge(case.observed.imputed(case.all_ids), case.cfg) if case.lacking else None
    case.common.update(
        delta=float(seen.delta),
        se=seen.se,
        bar=seen.bar,
        bar_multiplier=seen.multiplier,
        n_paired=seen.n_paired,
        mde=seen.mde,
        worst_case_delta=None if worst is None else float(worst.delta),
    )
    notes = list(seen.notes)
    n_lacking = len(case.lacking)
    if worst is not None and worst.accept != seen.accept:
        verdicts = {True: "ACCEPT", False: "REJECT"}
        return case.indecisive(
            f"INDECISIVE: on the tasks both sides scored, {verdicts[seen.accept]} "
            f"({seen.test}); with the {n_lacking} task(s) one side lacks imputed at the "
            f"worst case for the candidate, {verdicts[worst.accept]} ({worst.test}). The "
            f"missing data could flip it: rerun {_listed(case.lacking)} when the "
            "infrastructure is back" + (" [" + "; ".join(notes) + "]" if notes else "")
        )
    if worst is not None:
        notes.append(
            f"also holds with the {n_lacking} task(s) one side lacks imputed at the worst "
            f"case: {worst.test}"
        )
    return seen, notes


def _rule_6_veto(case: _Case, seen: _Verdict, notes: list[str]) -> GateDecision:
    """6. After an accept, ``no_regression: passed|any`` may veto; every decision lists the
    regressions and the unverified tasks."""
    cfg, regressions = case.cfg, case.common["regressions"]
    unverified = case.common["unverified"]
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
    current = case.current
    if current.coverage < 1.0:
        notes.append(f"the current best's result covers {current.n_scored}/{current.n_tasks} tasks")
    if notes:
        reason += " [" + "; ".join(notes) + "]"
    return GateDecision(accept=accept, reason=reason, rerun=case.lacking, **case.common)


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
    _rule_1_split(current, candidate)
    _rule_2_gateable(current, candidate)
    case = _case(current, candidate, cfg)
    early = _rule_3_nothing_scored(case) or _rule_4_coverage(case)
    if early is not None:
        return early
    twice = _rule_5_decide_twice(case)
    if isinstance(twice, GateDecision):
        return twice
    return _rule_6_veto(case, *twice)


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
        candidate_failed=result.trials_failed,
        candidate_trials=result.trials_planned,
        baseline=True,
    )


def gain_ci95(current: SplitResult, candidate: SplitResult) -> tuple[float, float] | None:
    """Student-t 95 % interval of the paired Δ (the selection-adjusted gain of a confirmation,
    run on fresh seeds); df = n − 1, or Bell–McCaffrey's with clusters. None below 2 paired
    tasks (or 2 clusters): no variance to build it from."""
    return paired_ci95(paired_deltas(current, candidate))


def paired_ci95(pairs: PairedDeltas) -> tuple[float, float] | None:
    """The Student-t 95 % interval of a paired Δ (df n − 1, or Bell–McCaffrey's with
    clusters, CR2 SE); None without a df (one task, or one cluster)."""
    if pairs.df <= 0:
        return None
    half = t_quantile(0.975, pairs.df) * pairs.se
    mean = float(pairs.mean)
    return (mean - half, mean + half)
