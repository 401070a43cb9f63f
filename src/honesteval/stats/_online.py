"""Online error control over an unbounded sequence of confirmations (pure functions).

Every gate call is another draw from the noise; over a search of hundreds of calls a fixed
per-call level promotes lucky candidates almost surely. An *online* procedure assigns the j-th
confirmation a level alpha_j that depends only on the past (how many confirmations, which of
them promoted), so that a guarantee holds over the whole, unbounded sequence:

* ``lord++`` (default; Ramdas, Yang, Wainwright & Jordan 2017, "Online control of the false
  discovery rate with decaying memory", §2, LORD++):

      alpha_j = w0·γ_j + (α − w0)·γ_{j−τ1}·1{τ1 < j} + α·Σ_{k≥2, τk < j} γ_{j−τk}

  with τk the confirmations that promoted, w0 = α/2 and γ_j = j^−1.6 / ζ(1.6) (Σγ = 1).
  It bounds the expected share of false promotions among promotions (mFDR/FDR) by α when the
  confirmations are independent. While nothing has been promoted the levels sum to at most
  w0, so in a search where no candidate is better P(any false promotion) ≤ w0 = α/2 by the
  union bound, under any dependence.
* ``e-lond`` (Xu & Ramdas 2024, "Online multiple testing with e-values", AISTATS, e-LOND):
  alpha_j = α·γ_j·(R_{j−1} + 1), R_{j−1} the promotions before j, decided by an e-value
  (the confirmation's, :mod:`._confirmation`) against 1/alpha_j. Bounds the FDR by α under
  *arbitrary* dependence between confirmations (LORD++ needs them independent); while nothing
  is promoted the levels are α·γ_j, so P(any false promotion) ≤ α while no candidate is
  better. Its levels do not reset after a promotion, so they keep decaying with j.
* ``fallback`` (Tian & Ramdas 2021, "Online control of the familywise error rate", online
  fallback): alpha_j = α·γ_j + alpha_{j−1}·1{j−1 promoted}. Bounds P(any false promotion,
  ever) by α under any dependence; fewer promotions than LORD++.

The well-kept ``online-fdr`` package implements both, but as stateful objects that consume a
p-value to reveal a level, with a different default γ for LORD++. The gate needs the level
*before* it decides (it compares Δ against an exact bar, not a p-value) and must rebuild the
state from the decisions log after a crash, so the few lines live here, tested against the
formulas.
"""

from __future__ import annotations

import functools

import numpy as np

from honesteval.models import OnlineRule, OnlineState

__all__ = ["advance", "gamma", "new_online_state", "next_level", "wealth_left"]

GAMMA_EXPONENT = 1.6


@functools.cache
def _gamma_norm() -> float:
    """ζ(1.6), on first use: importing ``scipy.special`` costs ~0.4 s, and an evaluation that
    never gates (a rerun, ``status``) should not pay it."""
    from scipy.special import zeta

    return float(zeta(GAMMA_EXPONENT, 1))


def gamma(j: int | np.ndarray) -> np.ndarray | float:
    """γ_j = j^−1.6 / ζ(1.6) for j ≥ 1 (0 for j < 1): nonincreasing, Σ_{j≥1} γ_j = 1."""
    arr = np.asarray(j, dtype=float)
    out = np.where(arr >= 1, np.maximum(arr, 1.0) ** -GAMMA_EXPONENT / _gamma_norm(), 0.0)
    return float(out) if out.ndim == 0 else out


def new_online_state(rule: OnlineRule = "lord++", alpha: float = 0.05) -> OnlineState:
    """The state before the first confirmation."""
    return OnlineState(rule=rule, alpha=alpha)


def _w0(state: OnlineState) -> float:
    return state.alpha / 2


def _inherited(state: OnlineState) -> float:
    """Fallback: the level the next confirmation inherits when the last one promoted."""
    last_promoted = bool(state.promotions) and state.promotions[-1] == state.tests
    return float(state.last_level or 0.0) if last_promoted else 0.0


def next_level(state: OnlineState) -> float:
    """alpha_j for the next confirmation, j = ``state.tests + 1`` (a function of the past only)."""
    j = state.tests + 1
    if state.rule == "fallback":
        return state.alpha * float(gamma(j)) + _inherited(state)
    if state.rule == "e-lond":
        return state.alpha * float(gamma(j)) * (len(state.promotions) + 1)
    w0 = _w0(state)
    level = w0 * float(gamma(j))
    if state.promotions:
        first, *later = state.promotions
        level += (state.alpha - w0) * float(gamma(j - first))
        if later:
            level += state.alpha * float(np.sum(gamma(j - np.asarray(later))))
    return level


def advance(state: OnlineState, level: float, promoted: bool) -> OnlineState:
    """The state after the confirmation j = ``state.tests + 1`` was decided at ``level``."""
    j = state.tests + 1
    return state.model_copy(
        update={
            "tests": j,
            "promotions": [*state.promotions, j] if promoted else list(state.promotions),
            "spent": state.spent + level,
            "last_level": level,
        }
    )


def wealth_left(state: OnlineState) -> float:
    """The alpha-wealth still to be spent on all future confirmations.

    LORD++: w0 + (α − w0)·1{R ≥ 1} + α·(R − 1)⁺ − Σ alpha_i (R promotions so far): what the
    future levels can add up to at most. Fallback: α·(1 − Σ_{i≤j} γ_i), plus the level the
    next confirmation inherits when the last one promoted. e-LOND: α·(R + 1)·(1 − Σ_{i≤j} γ_i),
    what the future levels add up to if nothing more is promoted.
    """
    r = len(state.promotions)
    if state.rule == "e-lond":  # if nothing more is promoted
        unspent = 1.0 - float(np.sum(gamma(np.arange(1, state.tests + 1))))
        return max(0.0, state.alpha * (r + 1) * unspent)
    if state.rule == "fallback":
        unspent = 1.0 - float(np.sum(gamma(np.arange(1, state.tests + 1))))
        return max(0.0, state.alpha * unspent + _inherited(state))
    w0 = _w0(state)
    earned = w0 + (state.alpha - w0) * (r >= 1) + state.alpha * max(r - 1, 0)
    return max(0.0, earned - state.spent)
