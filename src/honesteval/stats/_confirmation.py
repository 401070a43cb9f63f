"""The confirmation's tests and decisions, beside :func:`._gate.decide` (the screen's).

Two claims, two tests, both e-values against 1/alpha_j (the online level, :mod:`._online`):

* **Better on these val tasks, with new trials** (the default): the trial-level e-process of
  :mod:`._eprocess`, run round by round on fresh paired trials until it decides
  (:func:`rounds_decide`). Its evidence grows with trials, not only with tasks.
* **Better on new tasks** (``gate.confirm_holdout``): the task-level betting e-value below,
  over the held-out tasks' per-task deltas (:func:`confirm_decide`). Its evidence grows
  with tasks only, so it needs enough of them (see "What it costs").

The task-level test:

The confirmation decides at the online level alpha_j (1e−2 at j = 1, 1e−5 further on). A t bar
there assumes normal tails that bounded, skewed per-task deltas do not have (a candidate a bit
better on most tasks and much worse on a few: the t test rejects 2.3× too often at 1e−5). This
test's level holds for any distribution of deltas in [−1, 1]:

* **The e-value.** A gambler starts with capital 1 and, task after task, stakes a fraction
  λ_t ∈ [0, 1] of it on x_t > 0: K = Π_t (1 + λ_t·x_t). λ_t is chosen from x_1..x_{t−1} only
  (Waudby-Smith & Ramdas 2024, "Estimating means of bounded random variables by betting",
  JRSS-B 86(1), the fixed-n plug-in bet of their Eq. 26 read one-sided:
  λ_t = min(1, sqrt(2·log(1/α) / (n·σ̂²_{t−1})))), so when the deltas are independent with mean
  ≤ 0 each factor has conditional mean ≤ 1 and E[K] ≤ 1. The capital depends on the order of
  the tasks; averaging it over :data:`PERMUTATIONS` fixed permutations of the *sorted* deltas
  makes the e-value a function of the multiset alone (a mean of e-values is an e-value), so
  the task ids' order cannot move it.
* **The decision.** Promote iff E ≥ 1/alpha_j. Markov: P(E ≥ 1/α) ≤ α·E[E] ≤ α, exactly,
  for every n and every distribution on [−1, 1] with mean ≤ 0: no normal approximation.
* **What it costs.** Nothing can confirm faster than the worst null allows: with n tasks whose
  deltas are all v > 0, a two-point null {−1, v} with mean 0 produces that sample with
  probability (1 + v)^−n, so *no* valid test can confirm at α unless n·log(1 + v) ≥ log(1/α)
  (at 1e−5: 50 tasks need v ≥ 0.26). The t bar's extra power at small alpha_j is its normal
  assumption. The power (:func:`promotion_power`) is computed by simulation, never by the t
  formula.

The null the level holds under: the observations (per-task deltas, or per-cluster means of them
when tasks carry clusters) are independent, each with mean ≤ 0 — e.g. i.i.d. draws from a
population of tasks on which the candidate is no better, with fresh seeds for the trials.

With e-values the online rule e-LOND (Xu & Ramdas 2024, "Online multiple testing with
e-values", AISTATS; :mod:`._online`) controls the false discovery rate under arbitrary
dependence between confirmations.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from honesteval.models import GateConfig, GateDecision, SplitResult

from ._eprocess import TrialEvidence, evidence_ceiling, trial_evidence
from ._gain_sequence import gain_interval
from ._gate import PairedDeltas, _evidence, decide
from ._selective import truncated_gain

__all__ = [
    "CONFIRM_MAX_BET",
    "PERMUTATIONS",
    "ConfirmEvidence",
    "cluster_means",
    "confirm_decide",
    "confirm_evidence",
    "confirmation_log_e",
    "e_value_bar",
    "log_e_of_shift",
    "promotion_bar",
    "round_rewards",
    "rounds_decide",
    "selective_gain",
]

#: Bets up to the whole capital: λ = 1 is still valid (a delta of −1 ruins that ordering, the
#: e-value stays an e-value) and lets a sample of n deltas ≈ v reach (1 + v)^n, the most any
#: valid test can use (see the module docstring).
CONFIRM_MAX_BET = 1.0
#: Orderings averaged: enough that the e-value barely moves with the permutation seed.
PERMUTATIONS = 32
PERMUTATION_SEED = 24_2024
SHIFT_TOLERANCE = 1e-7
PRIOR_VAR = 0.25  # one pseudo-observation of variance 1/4 (the most a [−1, 1] half-range has)


@functools.lru_cache(maxsize=64)
def _orderings(n: int, count: int) -> np.ndarray:
    """``count`` fixed orderings of n items (seeded, so the e-value is reproducible)."""
    rng = np.random.default_rng(PERMUTATION_SEED + n)
    return np.argsort(rng.random((count, n)), axis=-1)


def _bets(x: np.ndarray, alpha: float) -> np.ndarray:
    """λ_t along the last axis from x_1..x_{t−1}: shift-invariant (the running variance about
    the running mean), so a shift of every delta moves the capital monotonically."""
    n = x.shape[-1]
    t = np.arange(1, n + 1, dtype=float)
    s1 = np.cumsum(x, axis=-1)
    s2 = np.cumsum(x * x, axis=-1)
    centred = np.maximum(s2 - s1 * s1 / t, 0.0)
    var = (PRIOR_VAR + centred) / (t + 1)
    prev = np.concatenate([np.full((*x.shape[:-1], 1), PRIOR_VAR), var[..., :-1]], axis=-1)
    bets: np.ndarray = np.minimum(
        np.sqrt(2.0 * math.log(1.0 / alpha) / (n * prev)), CONFIRM_MAX_BET
    )
    return bets


def confirmation_log_e(
    samples: ArrayLike, alpha: float, *, permutations: int = PERMUTATIONS
) -> np.ndarray:
    """log E for each row of ``samples`` (observations along the last axis, any order).

    Vectorised over leading axes. −inf when every ordering was ruined (a delta of −1 met a bet
    of 1). An empty row has E = 1 (log 0). ``permutations`` fewer than the default only for
    power simulations (the decision always averages :data:`PERMUTATIONS`).

    >>> float(np.exp(confirmation_log_e([0.2] * 50, 1e-3))) > 1e3   # 50 tasks, +0.2 each
    True
    >>> bool(confirmation_log_e([0.2, -0.2] * 25, 1e-3) < 0)         # mean 0: no evidence
    True
    """
    x = np.sort(np.asarray(samples, dtype=float), axis=-1)
    if np.any(np.abs(x) > 1):
        raise ValueError("paired deltas must lie in [-1, 1]")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    n = x.shape[-1]
    if n == 0:
        return np.zeros(x.shape[:-1])
    ordered = x[..., _orderings(n, permutations)]  # (..., P, n)
    return _log_mean_capital(ordered, alpha)


def _log_mean_capital(ordered: np.ndarray, alpha: float) -> np.ndarray:
    factors = 1.0 + _bets(ordered, alpha) * ordered
    with np.errstate(divide="ignore"):
        log_k = np.sum(np.log(np.maximum(factors, 0.0)), axis=-1)  # (..., P)
    top = np.max(log_k, axis=-1)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.mean(np.exp(log_k - safe[..., None]), axis=-1)
        out: np.ndarray = np.where(np.isfinite(top), safe + np.log(mean), -np.inf)
    return out


def log_e_of_shift(residuals: np.ndarray, shift: float, alpha: float) -> float:
    """log E of ``residuals + shift`` (no range check: a factor below 0 counts as ruin). The
    bets depend on the residuals only, so this increases with ``shift``; the selective
    interval (:func:`promotion_bar`) finds the promotion bar with it."""
    x = np.sort(residuals) + shift
    return float(_log_mean_capital(x[_orderings(x.size, PERMUTATIONS)], alpha))


def e_value_bar(alpha: float) -> float:
    """log(1/α): the confirmation promotes iff log E ≥ this."""
    return math.log(1.0 / alpha)


def cluster_means(values: Sequence[float], keys: Sequence[str] | None) -> np.ndarray:
    """The test's observations: per-task deltas, or with clusters one mean per cluster (tasks
    of a cluster are not independent; clusters are)."""
    x = np.asarray(values, dtype=float)
    if keys is None:
        return x
    groups: dict[str, list[float]] = {}
    for key, value in zip(keys, values, strict=True):
        groups.setdefault(key, []).append(value)
    return np.array([float(np.mean(g)) for _, g in sorted(groups.items())])


@dataclass(frozen=True)
class ConfirmEvidence:
    """One confirmation's e-value against its level, on the test's observations."""

    log_e: float
    alpha: float
    n_obs: int

    @property
    def e_value(self) -> float:
        return math.exp(self.log_e) if self.log_e < 700 else math.inf

    @property
    def accept(self) -> bool:
        return self.log_e >= e_value_bar(self.alpha)

    def text(self) -> str:
        return f"e-value {self.e_value:.4g} vs 1/alpha_j = {1 / self.alpha:.4g}"


def confirm_evidence(observations: np.ndarray, alpha: float) -> ConfirmEvidence:
    return ConfirmEvidence(float(confirmation_log_e(observations, alpha)), alpha, observations.size)


def promotion_bar(observations: np.ndarray, level: float) -> float:
    """b(r): the smallest mean at which these residuals would have been promoted at ``level``."""
    residuals = observations - observations.mean()
    target = math.log(1.0 / level)
    low, high = -2.0, 2.0
    if log_e_of_shift(residuals, high, level) < target:
        return math.inf
    while high - low > SHIFT_TOLERANCE:
        mid = 0.5 * (low + high)
        if log_e_of_shift(residuals, mid, level) >= target:
            high = mid
        else:
            low = mid
    return high


def selective_gain(
    observations: np.ndarray, level: float, confidence: float = 0.95
) -> tuple[float, tuple[float, float]] | None:
    """(estimate, interval) of the mean gain given that the task-level confirmation promoted
    at ``level`` (:mod:`._selective`, conditional on b(r) = :func:`promotion_bar`); None when
    these observations would not have promoted.

    >>> est, (lo, hi) = selective_gain(np.array([0.3, 0.1, 0.2, 0.25] * 10), 0.01)
    >>> round(lo, 3), round(hi, 3)   # far above the bar: the plain t interval
    (0.189, 0.236)
    """
    x = np.asarray(observations, dtype=float)
    if x.size < 2 or float(np.std(x)) == 0.0:
        return None
    return truncated_gain(x, promotion_bar(x, level), confidence)


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
        "bar": None,  # no Δ bar: the e-value decides, against its own threshold
        "e_value_bar": 1.0 / level,
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


# -- the default confirmation: the trial-level e-process, round by round -------------------


def round_rewards(current: SplitResult, candidate: SplitResult) -> tuple[np.ndarray, np.ndarray]:
    """Both sides' trial rewards as (rounds, tasks) arrays, trial r of task t at [r, t]
    (round r: trial r of every task), NaN where a side has no counted reward (an infra or
    scorer error, or a task it lacks). The tasks are the union of both sides', in id order
    (the e-process does not depend on it)."""
    ids = sorted({t.id for t in current.per_task} | {t.id for t in candidate.per_task})
    rounds = max(current.n_trials, candidate.n_trials)

    def matrix(result: SplitResult) -> np.ndarray:
        out = np.full((rounds, len(ids)), np.nan)
        column = {t: i for i, t in enumerate(ids)}
        for task in result.per_task:
            values = [np.nan if r is None else r for r in task.rewards[:rounds]]
            out[: len(values), column[task.id]] = values
        return out

    return matrix(current), matrix(candidate)


def _budget_for(n_tasks: int, level: float, budget: int) -> int | None:
    """The fewest rounds (up to 100× ``budget``) in which Δ = +1 everywhere reaches 1/level."""
    for rounds in range(1, 100 * budget + 1):
        if evidence_ceiling(n_tasks, rounds) >= e_value_bar(level):
            return rounds
    return None


def unreachable(n_tasks: int, budget: int, level: float) -> str | None:
    """Why no gain can be promoted: even Δ = +1 on every trial of ``budget`` rounds on
    ``n_tasks`` tasks stays below 1/level (None: the bar is within reach).

    >>> unreachable(12, 30, 0.0109) is None
    True
    >>> print(unreachable(2, 2, 0.0109))  # doctest: +ELLIPSIS
    even Δ = +1 on every trial could not reach 1/alpha_j = 91.74 within 2 round(s) of 2 tasks ...
    """
    ceiling = evidence_ceiling(n_tasks, budget)
    if ceiling >= e_value_bar(level):
        return None
    needed = _budget_for(n_tasks, level, budget)
    more = f"confirm_trials >= {needed}" if needed else "a larger confirm_trials"
    return (
        f"even Δ = +1 on every trial could not reach 1/alpha_j = {1 / level:.4g} within "
        f"{budget} round(s) of {n_tasks} tasks (at most E = {math.exp(ceiling):.4g}): more val "
        f"tasks, {more}, or a one-stage gate (--no-confirm)"
    )


def _rounds_reason(ev: TrialEvidence, verdict: str, test: str) -> tuple[str, str]:
    """(stop, reason) for a confirmation that ended in ``verdict`` without promoting."""
    settle = ev.rounds_to_settle() if verdict == "exhausted" else None
    if verdict == "exhausted" and settle is not None:
        return "exhausted", (
            f"INDECISIVE: not confirmed: {test}; the budget of {ev.budget} round(s) is spent; "
            f"about {settle} more round(s) would likely settle it: gate again with "
            f"confirm_trials >= {ev.budget + settle} (the same confirmation continues, at the "
            "same alpha_j)"
        )
    if verdict == "exhausted":
        return "exhausted", f"REJECT: {test}: the observed gain is not positive"
    return "futile", (
        f"REJECT (futility): {test}; even an optimistic gain could not reach the bar in the "
        f"{ev.budget - ev.rounds} round(s) left: the evidence is against the candidate"
    )


def rounds_decide(
    current: SplitResult, candidate: SplitResult, cfg: GateConfig, level: float, budget: int
) -> GateDecision:
    """The default confirmation's decision after the rounds run so far: both sides' results
    on the reserved seeds, ``n_trials`` rounds, of a ``budget`` (``confirm_trials``).

    A confirmation that ended also reports ``gain_cs95``: the 95 % interval for the mean
    paired Δ a trial on these tasks that holds at its stop (:mod:`._gain_sequence`).

    ``confirm_stop`` says why it ended: ``promote`` (E reached 1/alpha_j: ACCEPT, unless
    ``no_regression`` vetoes), ``futile`` (REJECT: the evidence is against the candidate),
    ``exhausted`` (the budget ran out in between: INDECISIVE, with about how many more
    rounds; REJECT when the observed gain is not positive), ``unreachable`` (INDECISIVE before
    any trial: even Δ = +1 everywhere cannot reach the bar), ``coverage`` (as :func:`decide`);
    None: run another round. :func:`decide` (paired, at ``level``) frames it as in
    :func:`confirm_decide`: its coverage checks, regressions, Δ and SE stand.
    """
    paired_cfg = cfg.model_copy(update={"mode": "paired", "alpha": level})
    framed = decide(current, candidate, paired_cfg)
    fields: dict[str, object] = {"bar": None, "e_value_bar": 1.0 / level}
    fields |= {"bar_multiplier": None, "mde": None}
    fields |= {"confirm_budget": budget, "confirm_rounds": candidate.n_trials}
    n_tasks = len({t.id for t in current.per_task} | {t.id for t in candidate.per_task})
    why = unreachable(n_tasks, budget, level)
    if why is not None:
        reason = f"INDECISIVE: {why}"
        update = {"accept": False, "indecisive": True, "reason": reason}
        return framed.model_copy(update=fields | update | {"confirm_stop": "unreachable"})
    if framed.delta is None:  # nothing scored, coverage too low
        return framed.model_copy(update=fields | {"confirm_stop": "coverage"})
    cur, cand = round_rewards(current, candidate)
    ev = trial_evidence(cand, cur, level, budget)
    fields |= {"e_value": ev.e_value, "confirm_rounds": ev.rounds}
    missing = f"; {ev.missing} trial(s) one side lacks counted at the worst case" * bool(ev.missing)
    test = f"{ev.text()} (paired Δ = {framed.delta:+.4f} over {framed.n_paired} tasks){missing}"
    verdict = ev.verdict()
    if verdict == "continue":
        return framed.model_copy(update=fields | {"accept": False, "reason": f"running: {test}"})
    gain = gain_interval(cand, cur, ev.rounds)  # valid at this stop, whichever rule made it
    fields |= {"gain_cs95": (gain.low, gain.high)}
    if verdict == "promote":
        if cfg.no_regression in ("passed", "any") and framed.regressions:
            reason = (
                f"REJECT: {test} clears the bar, but no_regression={cfg.no_regression} vetoes "
                f"it: {', '.join(framed.regressions[:10])} got worse"
            )
            update = {"accept": False, "indecisive": False, "reason": reason}
        else:
            update = {"accept": True, "indecisive": False, "reason": f"ACCEPT: {test}"}
        return framed.model_copy(update=fields | update | {"confirm_stop": "promote"})
    stop, reason = _rounds_reason(ev, verdict, test)
    indecisive = reason.startswith("INDECISIVE")
    update = {"accept": False, "indecisive": indecisive, "reason": reason, "confirm_stop": stop}
    return framed.model_copy(update=fields | update)
