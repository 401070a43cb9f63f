"""The trial-level e-process of the default confirmation: evidence that grows with fresh trials.

The claim the default gate promotes on is "better **on these val tasks**, with new trials":

    H0: Σ_t μ_t ≤ 0,   μ_t = E[candidate − best on task t, at a fresh seed]

The tasks are fixed; the randomness is the trials'. The confirmation runs in *rounds*: round r
is one fresh paired trial of both sides on every task (each task at its own seed,
:mod:`honesteval.models.seeds`), with deltas d_{t,r} ∈ [−1, 1]. The capital is a mixture of
gamblers: gambler k bets the same fraction λ_k of BET_GRID on every trial of every round, and
the capital is their average (K = 4: bets 0.1, 0.2, 0.4, 0.8),

    E_R = (1/K) Σ_k Π_{r ≤ R} Π_t (1 + λ_k·d_{t,r}).

Read round by round, E_R = E_{R−1} · Σ_k w_{k,R} Π_t (1 + λ_k d_{t,R}) with weights
w_{k,R} ∝ gambler k's capital after round R − 1 (:func:`round_weights`): the bets of round R
are fixed by the earlier rounds only (predictable), and every gambler bets one fraction on
the whole round.

**Validity.** Given the past, the round's trials are independent (each task draws at its
own seed, so a target seeded by the seed alone cannot tie them), so for each gambler
E[Π_t (1 + λ_k d_{t,r}) | past] = Π_t (1 + λ_k μ_t) ≤ exp(λ_k Σ_t μ_t) ≤ 1 under H0, whatever
each task's own μ_t (some may be positive, as long as the sum is not): each gambler's capital
is a nonnegative test supermartingale, so is their average, and Ville's inequality gives
P(sup_R E_R ≥ 1/α) ≤ α. Promoting at the first round with E_R ≥ 1/α, stopping for futility,
running out of budget, or going on later with a larger budget (optional continuation) all
keep the level. One bet per round matters: a bet per task could stake more on the tasks that
gain and break the bound above. λ_k ≤ MAX_BET < 1 keeps every factor ≥ 1 − MAX_BET > 0.

**Missing trials.** A trial one side lacks (infra or scorer error) enters at the worst case
for the candidate (its reward 0, the best's 1): the factor can only shrink, so the capital is
still bounded by a valid one.

**Power.** The ceiling is (tasks × rounds)·log(1 + Δ), not tasks·log(1 + Δ) as for a test
over per-task means. The mixture over a grid of constant bets (Waudby-Smith & Ramdas 2024,
§5, the "grid" strategy; Chugg et al. 2023 use it for auditing) pays log K at most against
the best constant bet in hindsight, and nothing in the first round (where a plug-in bet has
no data yet). ``bench/confirm_power.py --only bet`` compares it with the aGRAPA plug-in this
module used before (λ_1 = 0.2, then clip(m/(v + m²), 0, 0.8)), the online Newton step bet and
a plug-in that starts from the screen's mean and variance: at 12 tasks × +0.2 the 80th
percentile of the trials to promote falls from 2.06× to 1.82× that of a fixed-n z test, at
20 × +0.1 from 1.99× to 1.70× (docs/appendix/confirmation-bet.md).

**Futility** (a stopping rule, so the level is untouched): after round r ≥ 2 the confirmation
stops when even an optimistic mean m⁺ = m + 2·sd/√n (n trials so far) could not, at its best
bet, grow the capital to 1/α in the rounds left (the expected log-growth of one trial at bet λ
is ≈ λm⁺ − λ²(v + m⁺²)/2), or when m⁺ ≤ 0.

References
----------
Waudby-Smith, I., & Ramdas, A. (2024). Estimating means of bounded random variables by
betting. JRSS-B 86(1), 1-27.
Shafer, G. (2021). Testing by betting: a strategy for statistical and scientific
communication. JRSS-A 184(2), 407-431.
Chugg, B., Cortes-Gomez, S., Xie, B., Ramdas, A., & Sabato, S. (2023). Auditing fairness
by betting. NeurIPS 36.
Ramdas, A., Grünwald, P., Vovk, V., & Shafer, G. (2023). Game-theoretic statistics and safe
anytime-valid inference. Statistical Science 38(4), 576-601.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import ArrayLike

__all__ = [
    "BET_GRID",
    "MAX_BET",
    "RoundsVerdict",
    "TrialEvidence",
    "evidence_ceiling",
    "log_capital",
    "promoted_paths",
    "round_weights",
    "trial_evidence",
    "trial_log_e",
]

#: The largest bet: a round of deltas −1 then costs log(1 − 0.8) a task, never ruin.
MAX_BET = 0.8
#: The gamblers' constant bets, equally weighted: MAX_BET halved three times. The growth-
#: optimal bet is about gain / E[d²], so these cover gains from about 0.04 (E[d²] ≈ 0.45, the
#: MDE of 50 tasks × 30 rounds) up; four of them cost log 4 of evidence at most against the
#: best of them in hindsight. 16 bets from 0.05 do as well across the bench's worlds, at four
#: times the cost of plan's simulations (docs/appendix/confirmation-bet.md).
BET_GRID = MAX_BET / 2.0 ** np.arange(3, -1, -1)
#: Futility: the optimistic mean is the observed one plus this many standard errors.
FUTILITY_SE = 2.0
#: Futility is not judged on fewer rounds than this.
FUTILITY_MIN_ROUNDS = 2

RoundsVerdict = Literal["promote", "futile", "continue", "exhausted"]


def _deltas(candidate: ArrayLike, current: ArrayLike) -> tuple[np.ndarray, int]:
    """d = candidate − current along (…, rounds, tasks), a missing (NaN) side at the worst
    case for the candidate; and how many trials were imputed."""
    cand = np.asarray(candidate, dtype=float)
    cur = np.asarray(current, dtype=float)
    if cand.shape != cur.shape or cand.ndim < 2:
        raise ValueError(
            f"rewards must be (rounds, tasks) on both sides: {cand.shape}, {cur.shape}"
        )
    known = ~np.isnan(cand) & ~np.isnan(cur)
    for side in (cand, cur):
        seen = side[~np.isnan(side)]
        if np.any(seen < 0) or np.any(seen > 1):
            raise ValueError("rewards must lie in the reward range [0, 1]")
    d = np.nan_to_num(cand, nan=0.0) - np.nan_to_num(cur, nan=1.0)
    return d, int(np.sum(~known))


def _gamblers_log_e(deltas: ArrayLike) -> np.ndarray:
    """Each gambler's log capital after each round: (K, …, rounds) for ``deltas`` (…, rounds,
    tasks), gambler k betting BET_GRID[k] on every trial. Deltas of ±1 (most of a binary
    reward's, all of the power simulation's) are counted, the others summed one by one."""
    d = np.asarray(deltas, dtype=float)
    up, down = d == 1.0, d == -1.0
    ups, downs = up.sum(axis=-1)[..., None], down.sum(axis=-1)[..., None]
    per_round = ups * np.log1p(BET_GRID) + downs * np.log1p(-BET_GRID)  # (…, rounds, K)
    rest = np.where(up | down, 0.0, d)
    if np.any(rest):
        per_round = per_round + np.stack(
            [np.log1p(bet * rest).sum(axis=-1) for bet in BET_GRID], axis=-1
        )
    out: np.ndarray = np.moveaxis(np.cumsum(per_round, axis=-2), -1, 0)
    return out


def log_capital(deltas: ArrayLike) -> np.ndarray:
    """log E after each round of ``deltas`` (…, rounds, tasks): the mean of the gamblers'
    capitals. The one capital of the confirmation: :func:`trial_log_e`, the futility rule
    and the power simulation (:func:`promoted_paths`) all call it.

    >>> bool(np.isclose(log_capital([[1.0]])[0], np.log(np.mean(1 + BET_GRID))))
    True
    """
    gamblers = _gamblers_log_e(deltas)
    top = gamblers.max(axis=0)
    out: np.ndarray = top + np.log(np.mean(np.exp(gamblers - top), axis=0))
    return out


def round_weights(deltas: ArrayLike) -> np.ndarray:
    """w_{k,r}: the weight of gambler k in round r's factor (…, rounds, K), from the rounds
    before r only (equal in round 1): E_r = E_{r−1} · Σ_k w_{k,r} Π_t (1 + λ_k d_{t,r}).

    >>> w = round_weights([[1.0], [1.0]])
    >>> bool(np.allclose(w[0], 1 / 4)), bool(w[1, -1] > w[1, 0])
    (True, True)
    """
    gamblers = np.moveaxis(_gamblers_log_e(deltas), 0, -1)  # (…, rounds, K)
    before = np.concatenate([np.zeros_like(gamblers[..., :1, :]), gamblers[..., :-1, :]], axis=-2)
    weights = np.exp(before - before.max(axis=-1, keepdims=True))
    out: np.ndarray = weights / weights.sum(axis=-1, keepdims=True)
    return out


def trial_log_e(candidate: ArrayLike, current: ArrayLike) -> np.ndarray:
    """log E after each round: rewards in [0, 1] (NaN: missing) shaped (…, rounds, tasks),
    trial r of task t at [..., r, t]; vectorised over leading axes.

    >>> cand = [[1.0, 1.0], [1.0, 0.0]]
    >>> cur = [[0.0, 1.0], [0.0, 0.0]]
    >>> # deltas (1, 0) then (1, 0): the mean over the grid of (1 + λ)²
    >>> bool(np.isclose(trial_log_e(cand, cur)[-1], np.log(np.mean((1 + BET_GRID) ** 2))))
    True
    """
    d, _ = _deltas(candidate, current)
    return log_capital(d)


def _growth(mean: ArrayLike, var: ArrayLike, tasks: int) -> np.ndarray:
    """The expected log-growth of one round at the best bet for ``mean`` (second order:
    E log(1 + λd) ≈ λm − λ²(v + m²)/2), 0 where ``mean`` ≤ 0; elementwise."""
    m, v = np.asarray(mean, dtype=float), np.asarray(var, dtype=float)
    second = np.maximum(v + m * m, 1e-300)
    bet = np.clip(m / second, 0.0, MAX_BET)
    out: np.ndarray = tasks * np.where(m > 0, np.maximum(bet * m - bet**2 * second / 2, 0), 0)
    return out


def _futile(
    log_e: ArrayLike, mean: ArrayLike, var: ArrayLike, rounds: int, tasks: int, budget: int
) -> np.ndarray:
    """The futility rule after ``rounds`` rounds, elementwise: the optimistic mean
    m + FUTILITY_SE·sd/√n is ≤ 0, or at its best bet the rounds left cannot reach the bar."""
    if rounds < FUTILITY_MIN_ROUNDS or rounds >= budget:
        return np.zeros(np.shape(log_e), dtype=bool)
    v = np.maximum(np.asarray(var, dtype=float), 0.0)
    optimistic = np.asarray(mean, dtype=float) + FUTILITY_SE * np.sqrt(v / (rounds * tasks))
    reach = np.asarray(log_e) + _growth(optimistic, v, tasks) * (budget - rounds)
    out: np.ndarray = (optimistic <= 0) | (reach < 0)
    return out


@dataclass(frozen=True)
class TrialEvidence:
    """The e-process after ``rounds`` rounds of ``n_tasks`` paired trials, against 1/alpha.

    ``log_e`` holds log E after each round; ``mean``/``var`` are those of every delta so far;
    ``missing`` counts the trials imputed at the worst case.
    """

    log_e: tuple[float, ...]
    alpha: float
    n_tasks: int
    budget: int
    mean: float
    var: float
    missing: int = 0

    @property
    def rounds(self) -> int:
        return len(self.log_e)

    @property
    def bar(self) -> float:
        return math.log(1.0 / self.alpha)

    @property
    def e_value(self) -> float:
        last = self.log_e[-1] if self.log_e else 0.0
        return math.exp(last) if last < 700 else math.inf

    @property
    def decided_round(self) -> int | None:
        """The first round whose capital reached 1/alpha (the promotion's stopping time)."""
        return next((r + 1 for r, v in enumerate(self.log_e) if v >= self.bar), None)

    def rounds_to_settle(self) -> int | None:
        """About how many more rounds reach 1/alpha at the observed mean and variance
        (None: at this mean, none would)."""
        growth = float(_growth(self.mean, self.var, self.n_tasks))
        if growth <= 0:
            return None
        last = self.log_e[-1] if self.log_e else 0.0
        return max(1, math.ceil((self.bar - last) / growth))

    def futile(self) -> bool:
        """Even an optimistic mean could not reach 1/alpha in the rounds left."""
        last = self.log_e[-1] if self.log_e else 0.0
        return bool(
            _futile(last - self.bar, self.mean, self.var, self.rounds, self.n_tasks, self.budget)
        )

    def verdict(self) -> RoundsVerdict:
        """What the rounds so far decide: promote at the first crossing, stop for futility,
        stop at the budget, or run another round."""
        if self.decided_round is not None:
            return "promote"
        if self.rounds >= self.budget:
            return "exhausted"
        return "futile" if self.futile() else "continue"

    def text(self) -> str:
        return (
            f"evidence E = {self.e_value:.4g} of {1 / self.alpha:.4g} after {self.rounds} "
            f"round(s) of {self.n_tasks} paired trials"
        )


def trial_evidence(
    candidate: ArrayLike, current: ArrayLike, alpha: float, budget: int
) -> TrialEvidence:
    """The confirmation's evidence so far: rewards (rounds, tasks) of both sides, NaN missing.

    Stopped at the first round that crossed 1/alpha: the rounds after it (run, e.g., by a
    gate killed before it recorded the promotion) do not count.

    >>> ev = trial_evidence([[1.0] * 12] * 3, [[0.0] * 12] * 3, alpha=0.01, budget=30)
    >>> ev.decided_round, ev.verdict()   # mean over the grid of (1 + λ)^12: 306 ≥ 100
    (1, 'promote')
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    if budget < 1:
        raise ValueError(f"budget must be at least 1 round, got {budget}")
    d, missing = _deltas(candidate, current)
    if d.ndim != 2:
        raise ValueError("trial_evidence takes one confirmation: rewards shaped (rounds, tasks)")
    path = trial_log_e(candidate, current)
    bar = math.log(1.0 / alpha)
    crossed = np.flatnonzero(path >= bar)
    stop = int(crossed[0]) + 1 if crossed.size else len(path)
    seen = d[:stop]
    return TrialEvidence(
        log_e=tuple(float(v) for v in path[:stop]),
        alpha=alpha,
        n_tasks=d.shape[1],
        budget=budget,
        mean=float(seen.mean()) if seen.size else 0.0,
        var=float(seen.var()) if seen.size else 0.0,
        missing=missing,
    )


def promoted_paths(deltas: ArrayLike, alpha: float) -> tuple[np.ndarray, np.ndarray]:
    """Many confirmations at once, each run as the gate runs it: ``deltas`` (draws, rounds,
    tasks), the budget its rounds; the same rule as :meth:`TrialEvidence.verdict` (promote at
    the first crossing, stop for futility, stop at the budget). Returns (promoted, rounds run)
    per draw. For power simulations (:mod:`._gate_power`, ``bench/``).

    >>> promoted, used = promoted_paths(np.ones((2, 30, 12)) * [[[1.0]], [[-1.0]]], 0.01)
    >>> promoted.tolist(), used.tolist()
    ([True, False], [1, 2])
    """
    d = np.asarray(deltas, dtype=float)
    draws, budget, tasks = d.shape
    bar = math.log(1.0 / alpha)
    log_e = log_capital(d)
    n = tasks * np.arange(1, budget + 1)
    s1 = np.cumsum(d.sum(axis=-1), axis=-1)
    s2 = np.cumsum((d * d).sum(axis=-1), axis=-1)
    mean = s1 / n
    var = s2 / n - mean * mean
    promoted = np.zeros(draws, dtype=bool)
    used = np.full(draws, budget)
    alive = np.ones(draws, dtype=bool)
    for r in range(budget):
        hit = alive & (log_e[:, r] >= bar)
        promoted |= hit
        stop = hit | (
            alive & _futile(log_e[:, r] - bar, mean[:, r], var[:, r], r + 1, tasks, budget)
        )
        used = np.where(stop, r + 1, used)
        alive &= ~stop
    return promoted, used


def evidence_ceiling(n_tasks: int, budget: int) -> float:
    """log E when every delta is +1 for ``budget`` rounds: the most the confirmation can
    reach. Below log(1/alpha_j) no gain can be promoted, and the gate says so before it runs.

    >>> bool(np.isclose(math.exp(evidence_ceiling(7, 1)), np.mean((1 + BET_GRID) ** 7)))
    True
    """
    ones = np.ones((budget, n_tasks))
    return float(trial_log_e(ones, np.zeros_like(ones))[-1])
