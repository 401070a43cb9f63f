"""Stopping a gate's screen early: a group-sequential screen in rounds (pure functions).

The screen of the two-stage gate runs K trials a task. Staged, it runs them in K rounds of one
trial a task (round k adds the seed ``base_seed + k − 1``, so the rounds are the same trials a
full screen runs, stored by seed), and after each round k < K it decides, from the paired
z statistic Z_k = Δ_k / SE_k of the rounds so far:

* **futility** (stop, REJECT): the *conditional power* under the current trend, the chance
  that the full screen would still clear its bar c (``bar_multiplier``: k_se, or the t
  quantile with ``alpha``) if the candidate's true gain were the one measured so far, is below
  ``futility``. Stochastic curtailment (Lan, Simon & Halperin 1982, "Stochastically curtailed
  tests in long-term clinical trials", Sequential Analysis 1(3); Jennison & Turnbull 2000,
  *Group Sequential Methods with Applications to Clinical Trials*, ch. 10), with the B-value
  of Lan & Wittes 1988 (Biometrics 44(2)): B(f) = Z_k·√f at information fraction f = k/K is
  a Brownian motion with drift θ, B(1) = Z_K, and the trend is θ̂ = B(f)/f, so

      CP_θ = 1 − Φ((c − B(f) − θ·(1 − f)) / √(1 − f)).

* **efficacy** (stop, go to the confirmation): the full screen would pass with probability at
  least ``efficacy`` even if the candidate gained nothing more from here on, CP_0 ≥ efficacy,
  and the screen on the rounds so far passes its bar (every rule of ``decide``, missing data
  and vetoes included).
* otherwise **continue**; after round K the screen decides exactly as an unstaged one.

What this changes, and what it does not. The futility stop only turns screens that would have
continued into rejects, so it can only remove confirmations. The efficacy stop only moves a
confirmation earlier; by Lan, Simon & Halperin's bound it raises the screen's pass rate of a
candidate that is no better by at most a factor 1/efficacy. Neither touches the search's
guarantee: the confirmation runs on fresh seeds, independent of the screen's trials, at the
level alpha_j the online rule assigns from past decisions only, so its e-value is valid
whatever rule chose to run it (see :mod:`._confirmation`, :mod:`._online`). The figures a stopped
screen reports (Δ, SE, bar) are those of the trials it ran, with the round and the conditional
power that stopped it; the two-stage power (:func:`._gate_power.promotion_power`) simulates
the staged screen, so the printed MDE is the MDE of the gate that runs.

f = k/K is the share of the screen's trials; with a between-task spread of the true per-task
gains the information grows more slowly than the trials, so this Z_k is somewhat closer to
Z_K than f says. The screen is a filter, not the test that carries the guarantee; the bench
(``bench/search_sim.py --compare-stopping``) measures what the rule does to a whole search.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from honesteval.models import GateConfig, GateDecision

from ._quantiles import normal_quantile

__all__ = [
    "RoundVerdict",
    "ScreenStopping",
    "boundaries",
    "conditional_pass",
    "round_decision",
    "screen_round",
    "screen_stopping",
    "staged_rule",
    "staged_verdicts",
]

RoundAction = Literal["futility", "efficacy", "continue"]


def _normal_sf(x: float) -> float:
    """P(N(0, 1) > x)."""
    return 0.5 * math.erfc(x / math.sqrt(2.0))


@dataclass(frozen=True)
class ScreenStopping:
    """The staged screen's thresholds: stop for futility when CP under the trend is below
    ``futility``; stop for efficacy when CP under no further gain is at least ``efficacy``
    (None: never)."""

    futility: float | None = 0.10
    efficacy: float | None = 0.90

    def __post_init__(self) -> None:
        for name in ("futility", "efficacy"):
            value = getattr(self, name)
            if value is not None and not 0 < value < 1:
                raise ValueError(f"{name} must be in (0, 1), got {value}")


def conditional_pass(z: float, fraction: float, bar: float, drift: float) -> float:
    """P(Z_K > bar | Z_k = z) when B(t) = Z·√t is a Brownian motion with drift ``drift``
    (E B(1) = drift) observed at t = ``fraction`` (Lan & Wittes 1988).

    >>> round(conditional_pass(0.0, 0.5, 0.0, 0.0), 6)      # no drift, bar at the mean
    0.5
    >>> round(conditional_pass(1.0, 1 / 3, 1.0, 0.0), 4)    # 1 − Φ((1 − 1/√3)/√(2/3))
    0.3024
    """
    if not 0 < fraction < 1:
        raise ValueError(f"fraction must be in (0, 1), got {fraction}")
    b = z * math.sqrt(fraction)
    rest = 1.0 - fraction
    return _normal_sf((bar - b - drift * rest) / math.sqrt(rest))


@dataclass(frozen=True)
class RoundVerdict:
    """What one round of a staged screen decided, and the conditional powers it used."""

    action: RoundAction
    round: int
    rounds: int
    z: float
    cp_trend: float
    cp_null: float

    def text(self, bar: float) -> str:
        """The stop in one clause, for a decision's reason."""
        where = f"after round {self.round} of {self.rounds}"
        if self.action == "futility":
            return (
                f"stopped for futility {where}: were its true gain the Δ measured so far "
                f"(z = {self.z:.2f}), the full screen would clear its bar {bar:.3g}×SE with "
                f"probability {self.cp_trend:.2g}"
            )
        if self.action == "efficacy":
            return (
                f"passed early {where}: z = {self.z:.2f}; even with no further gain the full "
                f"screen would clear its bar {bar:.3g}×SE with probability {self.cp_null:.2g}"
            )
        return f"continued {where} (z = {self.z:.2f})"


def screen_round(
    z: float, done: int, rounds: int, bar: float, rule: ScreenStopping
) -> RoundVerdict:
    """The verdict after round ``done`` of ``rounds`` given the screen's z = Δ/SE so far.

    Futility first (a screen that cannot reach the bar stops), then efficacy; the caller
    requires the screen on the rounds so far to pass before it acts on ``efficacy``. The last
    round always ``continue``s: the full screen's own decision stands.

    >>> rule = ScreenStopping(futility=0.1, efficacy=0.9)
    >>> screen_round(-0.5, 1, 3, 1.0, rule).action
    'futility'
    >>> screen_round(3.0, 2, 3, 1.0, rule).action
    'efficacy'
    >>> screen_round(1.0, 1, 3, 1.0, rule).action
    'continue'
    """
    if not 1 <= done <= rounds:
        raise ValueError(f"round {done} of {rounds}")
    if done == rounds:
        return RoundVerdict("continue", done, rounds, z, math.nan, math.nan)
    f = done / rounds
    trend = z / math.sqrt(f)  # θ̂ = B(f)/f
    cp_trend = conditional_pass(z, f, bar, trend)
    cp_null = conditional_pass(z, f, bar, 0.0)
    action: RoundAction = "continue"
    if rule.futility is not None and cp_trend < rule.futility:
        action = "futility"
    elif rule.efficacy is not None and cp_null >= rule.efficacy:
        action = "efficacy"
    return RoundVerdict(action, done, rounds, z, cp_trend, cp_null)


def boundaries(done: int, rounds: int, bar: float, rule: ScreenStopping) -> tuple[float, float]:
    """The z boundaries of round ``done`` < ``rounds`` in closed form: (stop for futility below,
    pass early at or above); ∓inf where that stop is off. With θ̂ = z/√f the trend's
    CP < γ ⇔ z < √f·(c − z_{1−γ}·√(1 − f)); CP_0 ≥ ρ ⇔ z ≥ (c + z_ρ·√(1 − f))/√f.

    >>> [round(b, 3) for b in boundaries(1, 3, 1.0, ScreenStopping(0.1, 0.9))]
    [-0.027, 3.544]
    """
    f = done / rounds
    low = -math.inf
    high = math.inf
    if rule.futility is not None:
        low = math.sqrt(f) * (bar - normal_quantile(1.0 - rule.futility) * math.sqrt(1.0 - f))
    if rule.efficacy is not None:
        high = (bar + normal_quantile(rule.efficacy) * math.sqrt(1.0 - f)) / math.sqrt(f)
    return low, high


def staged_verdicts(
    z: np.ndarray, bar: float, rule: ScreenStopping
) -> tuple[np.ndarray, np.ndarray]:
    """Many staged screens at once from their z after each round, ``z`` (rounds, draws):
    (passed, rounds run) per draw. After round k < K a z below the futility boundary rejects,
    one at or above the efficacy boundary (and above the bar) passes; the rest decide after
    round K on the bar. For power simulations (:mod:`._gate_power`, ``bench/``).

    >>> z = np.array([[3.6, 0.0, -1.0], [0.0, 1.5, 0.0], [0.0, 1.5, 0.0]])
    >>> [a.tolist() for a in staged_verdicts(z, 1.0, ScreenStopping(0.1, 0.9))]
    [[True, True, False], [1, 3, 1]]
    """
    rounds, draws = z.shape
    alive = np.ones(draws, dtype=bool)
    passed = np.zeros(draws, dtype=bool)
    used = np.full(draws, rounds)
    for k in range(1, rounds):
        low, high = boundaries(k, rounds, bar, rule)
        early = alive & (z[k - 1] >= high) & (z[k - 1] > bar)
        stop = early | (alive & (z[k - 1] < low))
        passed |= early
        used = np.where(stop, k, used)
        alive &= ~stop
    return passed | (alive & (z[-1] > bar)), used


def screen_stopping(cfg: GateConfig) -> ScreenStopping | None:
    """The gate config's staged screen, or None: unstaged (both stops off, or single stage,
    where the screen is the decision and an early stop would change its error rates)."""
    if not cfg.confirm or (cfg.screen_futility is None and cfg.screen_efficacy is None):
        return None
    return ScreenStopping(cfg.screen_futility, cfg.screen_efficacy)


def staged_rule(rule: ScreenStopping | None, rounds: int) -> ScreenStopping | None:
    """The rule a screen of ``rounds`` trials a task runs in rounds under, or None when it is
    one evaluation: no rule, or a single trial a task (no round to stop after).

    >>> staged_rule(ScreenStopping(0.5, 0.9), 3), staged_rule(ScreenStopping(0.5, 0.9), 1)
    (ScreenStopping(futility=0.5, efficacy=0.9), None)
    """
    return rule if rounds >= 2 else None


def round_decision(
    decision: GateDecision, done: int, rounds: int, rule: ScreenStopping, tasks: int
) -> tuple[GateDecision, bool]:
    """The screen's decision on rounds 1..``done`` (of ``rounds``, ``tasks`` tasks a round),
    labelled with the round, and whether the screen stops here.

    It stops after the last round, or earlier for futility (the decision becomes a REJECT
    that says why, with the Δ and SE of the rounds it ran), or for efficacy when the screen
    on the rounds so far also passes. A decision without a z (INDECISIVE, SE 0 or none, a
    threshold or strict mode) never stops early: the full screen decides it.
    """
    labels: dict[str, object] = {
        "screen_round": done,
        "screen_rounds": rounds,
        "screen_trials": done * tasks,
        "screen_trials_planned": rounds * tasks,
    }
    usable = (
        not decision.indecisive
        and decision.delta is not None
        and decision.se is not None
        and decision.se > 0
        and decision.bar_multiplier is not None
    )
    if done >= rounds or not usable:
        return decision.model_copy(update=labels), done >= rounds
    assert decision.delta is not None and decision.se is not None  # for mypy: usable
    bar = float(decision.bar_multiplier or 0.0)
    verdict = screen_round(decision.delta / decision.se, done, rounds, bar, rule)
    ran = f"{done * tasks} of {rounds * tasks} trials"
    if verdict.action == "futility" and not decision.accept:
        test = decision.reason.split(": ", 1)[-1]
        reason = f"REJECT ({verdict.text(bar)}; {ran}): {test}"
        update = {"reason": reason, "screen_stop": "futility", "screen_cp": verdict.cp_trend}
        return decision.model_copy(update=labels | update), True
    if verdict.action == "efficacy" and decision.accept:
        reason = f"{decision.reason} [{verdict.text(bar)}; {ran}]"
        update = {"reason": reason, "screen_stop": "efficacy", "screen_cp": verdict.cp_null}
        return decision.model_copy(update=labels | update), True
    return decision.model_copy(update=labels), False
