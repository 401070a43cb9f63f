"""The power of the two-stage gate: the screen, then the betting confirmation at alpha_j.

A promotion needs both stages: the screen (paired, its bar ``screen_bar``×SE on the
screen's trials) and the confirmation on fresh seeds with ``confirm_trials`` (the e-value of
:mod:`._confirmation` against 1/alpha_j). The power of a betting test has no closed form (it is not
the t formula: it depends on the bound of the deltas, not only their variance), so it is
computed by simulating the test itself, with common random numbers so the power is monotone in
the effect and the minimum detectable effect (MDE) is found by bisection:

    ω²_d   = V_d − σ²/K_screen,  V_d = V̂·df/χ²_df,d            (one per draw d, see below)
    true per-task gain θ_i = Δ + sqrt(ω²_d⁺)·z_i            (z_i ~ N(0, 1), one per observation)
    screen delta_i  = θ_i + sqrt(ω²_d + σ²/K_screen − ω²_d⁺)·e_i
    confirm delta_i = θ_i + sqrt(ω²_d + σ²/K_confirm − ω²_d⁺)·e'_i    (both clipped to [−1, 1])

with σ² the within-task variance (one trial, both sides) and ω̂² the between-task variance of
the paired deltas as measured (:func:`honesteval.stats.paired_components`): the unbiased
estimate, not floored at 0, with its sampling SE. Why one ω² per draw: with 100 tasks × 3
screen trials the confirmation's delta variance ω² + σ²/K_confirm is known only to about
±40 %, and a plug-in MDE is then miscalibrated: from the floored estimate a gain equal to the
MDE was promoted 0.895 ± 0.020 of the time at j = 10 (the floor biases ω̂² up where the true
ω² is 0), from the unfloored one about 0.72 (the power falls faster below 80 % than it rises
above). So the power is averaged over what the variance could be given the measurement (the
"expected power" or assurance of a design, O'Hagan, Stevens & Campbell 2005, "Assurance in
clinical trial design", Pharm. Stat. 4(3)): the screen deltas' variance V̂ = ω̂² + σ²/K_screen
is drawn from its Jeffreys posterior V̂·df/χ²_df, with the effective degrees of freedom
df = 2V̂²/SE² + 1 that match the measured SE (Satterthwaite 1946, Biometrics Bull. 2(6)), and
the trial noise is taken off again. ``bench/confirm_power.py`` checks that a true gain equal
to the printed MDE is promoted 80 % ± 5 % of the time at j = 1 and j = 10. A draw whose total
variance is negative has no noise (its deltas all equal θ_i).

The default confirmation runs in rounds (``GateDesign.rounds``, :mod:`._eprocess`): it is
simulated trial by trial, each paired trial of task i drawn from the three-point law on
{−1, 0, 1} with mean θ_i and variance σ² (exactly the law of a binary reward's paired delta;
for other rewards the widest one with those two moments), round after round with the real
stopping rule (:func:`._eprocess.promoted_paths`: promotion at the first crossing, futility,
the budget).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy.special import chdtri, ndtr

from honesteval.models import GateConfig, SplitResult, cluster_key

from ._confirmation import confirmation_log_e, e_value_bar
from ._eprocess import promoted_paths
from ._online import new_online_state, next_level
from ._power import VarianceComponents, _within, between_variance, paired_components, task_means
from ._quantiles import t_quantile
from ._screen_stop import ScreenStopping, screen_stopping, staged_rule, staged_verdicts

__all__ = [
    "POWER_DRAWS",
    "GateDesign",
    "observation_components",
    "planning_mde",
    "promotion_mde",
    "promotion_power",
    "screen_pass_rate",
    "small_val_warning",
]

POWER_DRAWS = 800  # simulated gate calls per power evaluation (MC SE of an 80 % power: 1.4 %)
MAX_CELLS = 100_000  # draws × observations per evaluation, to keep a gate call ~1 s
POWER_SEED = 80
MAX_TRIAL_CELLS = 3_000_000  # draws × rounds × tasks of a confirmation in rounds
MIN_TRIAL_DRAWS = 50  # the fewest simulated confirmations in rounds (plan's largest designs)
#: Orderings averaged in the simulated e-values: fewer than the decision's 32, which moves the
#: power by less than its MC error (the bets saturate, or n is large enough that the order of
#: the first few bets hardly matters); bench/confirm_power.py checks the printed MDE against the
#: real test.
POWER_PERMUTATIONS = 4


@functools.lru_cache(maxsize=2)  # an MDE's bisection reuses one n; plan's search over n does not
def _noise(n_obs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(z, e, e', u): the common random numbers of every power evaluation with n_obs."""
    draws = max(200, min(POWER_DRAWS, MAX_CELLS // max(n_obs, 1)))
    rng = np.random.default_rng(POWER_SEED + n_obs)
    z, e, e2 = rng.standard_normal((3, draws, n_obs))
    u = rng.standard_normal((draws, 1))
    return z, e, e2, u


@dataclass(frozen=True)
class GateDesign:
    """What the two-stage gate's power depends on: the variances of the observations (ω²
    between, unfloored, with its SE ``omega2_se``; σ² within per trial, both sides), how
    many, the screen's trials and bar (in SEs; None: no screen), the confirmation's trials
    and level."""

    omega2: float
    sigma2: float
    n_obs: int
    screen_trials: float | None
    confirm_trials: float
    screen_bar: float | None
    level: float
    omega2_se: float = 0.0
    #: a staged screen (rounds of one trial a task, stopped early by this rule): simulated
    #: round by round, so the MDE is that of the gate that runs
    screen_stopping: ScreenStopping | None = None
    #: the default confirmation: rounds of one fresh paired trial a task, at most
    #: ``confirm_trials``, decided by the trial-level e-process (:mod:`._eprocess`); False:
    #: the task-level e-value over per-task means of ``confirm_trials`` (``confirm_holdout``)
    rounds: bool = False


def _omega2_draws(design: GateDesign, u: np.ndarray) -> np.ndarray:
    """ω² as it could be, one per draw: the measured deltas' variance V = ω̂² + σ²/K (K the
    trials it was measured with) drawn from its scaled inverse χ² (V·df/χ²_df, the Jeffreys
    posterior of a normal variance), df = 2V²/SE² + 1 matching the measured SE (Satterthwaite
    1946), the trial noise σ²/K taken off again; ``u`` picks the χ² quantile Φ(u), so the
    draws are common random numbers."""
    if design.omega2_se <= 0:
        return np.full_like(u, design.omega2)
    trials = design.screen_trials or design.confirm_trials
    measured = design.omega2 + design.sigma2 / trials
    df = 2.0 * measured**2 / design.omega2_se**2 + 1.0
    variance: np.ndarray = measured * df / chdtri(df, ndtr(-u))  # the Φ(u) quantile
    return variance - design.sigma2 / trials


def promotion_power(effect: float, design: GateDesign) -> float:
    """P(promoted) for a true mean gain ``effect``: screen pass (if any) and E ≥ 1/alpha_j.

    >>> d = GateDesign(0.02, 0.4, 50, screen_trials=3, confirm_trials=9, screen_bar=1.0,
    ...                level=0.01)
    >>> 0.5 < promotion_power(0.15, d) <= 1.0
    True
    """
    if design.n_obs < 2:
        return 0.0
    draws = _Draws.of(effect, design)
    passed = draws.screen_passed(design)
    if design.rounds:
        trials = _trial_deltas(draws.theta, design.sigma2, int(design.confirm_trials))
        promoted, _ = promoted_paths(trials, design.level)
        return float(np.mean(passed[: promoted.size] & promoted))
    confirm = np.clip(draws.theta + draws.noise_sd(design.confirm_trials) * draws.e2, -1.0, 1.0)
    log_e = confirmation_log_e(confirm, design.level, permutations=POWER_PERMUTATIONS)
    return float(np.mean(passed & (log_e >= e_value_bar(design.level))))


def screen_pass_rate(effect: float, design: GateDesign) -> float:
    """P(the screen passes) for a true mean gain ``effect``, on the draws of
    :func:`promotion_power`: a bound on the gate's power whatever the confirmation's budget
    (a promotion needs a pass), so ``plan`` need not search budgets when it is below the
    power asked for.

    >>> d = GateDesign(0.02, 0.4, 50, screen_trials=3, confirm_trials=9, screen_bar=1.0,
    ...                level=0.01)
    >>> promotion_power(0.15, d) <= screen_pass_rate(0.15, d)
    True
    """
    if design.n_obs < 2:
        return 0.0
    return float(np.mean(_Draws.of(effect, design).screen_passed(design)))


@dataclass(frozen=True)
class _Draws:
    """One power evaluation's simulated world: per draw ω² as it could be (draws, 1), the
    true per-observation gains θ, and the noise of the screen (e) and of a task-level
    confirmation (e2)."""

    omega2: np.ndarray
    between: np.ndarray
    theta: np.ndarray
    e: np.ndarray
    e2: np.ndarray
    sigma2: float

    @classmethod
    def of(cls, effect: float, design: GateDesign) -> _Draws:
        z, e, e2, u = _noise(design.n_obs)
        omega2 = _omega2_draws(design, u)
        between = np.maximum(omega2, 0.0)
        return cls(omega2, between, effect + np.sqrt(between) * z, e, e2, design.sigma2)

    def noise_sd(self, trials: float) -> np.ndarray:
        """The SD of an observation's noise around θ with ``trials`` trials."""
        var = self.omega2 + self.sigma2 / trials - self.between
        sd: np.ndarray = np.sqrt(np.maximum(var, 0.0))
        return sd

    def screen_passed(self, design: GateDesign) -> np.ndarray:
        """Which draws' screens pass (all of them without a screen)."""
        rounds = 0 if design.screen_trials is None else int(design.screen_trials)
        rule = staged_rule(design.screen_stopping, rounds)
        if design.screen_bar is not None and rule is not None:
            return _staged_pass(self.theta, self.sigma2, rounds, design.screen_bar, rule)
        if design.screen_bar is not None and design.screen_trials is not None:
            screen = np.clip(self.theta + self.noise_sd(design.screen_trials) * self.e, -1, 1)
            se = screen.std(axis=-1, ddof=1) / math.sqrt(design.n_obs)
            passed: np.ndarray = screen.mean(axis=-1) > design.screen_bar * se
            return passed
        return np.ones(self.theta.shape[0], dtype=bool)


@functools.lru_cache(maxsize=2)
def _trial_uniforms(draws: int, rounds: int, n_obs: int) -> np.ndarray:
    """The common random numbers of the confirmation's trials (draws, rounds, tasks)."""
    rng = np.random.default_rng(POWER_SEED + 104_729 * rounds + n_obs)
    return rng.random((draws, rounds, n_obs))


def _trial_deltas(theta: np.ndarray, sigma2: float, rounds: int) -> np.ndarray:
    """One paired delta a task a round: the three-point law on {−1, 0, 1} with the task's mean
    θ (clipped to [−1, 1]) and the trial variance σ² (as far as the support allows: the
    second moment θ² + σ² kept within [|θ|, 1]); a binary reward's paired delta is exactly
    such a law."""
    draws, n = theta.shape
    draws = max(MIN_TRIAL_DRAWS, min(draws, MAX_TRIAL_CELLS // max(n * rounds, 1)))
    mean = np.clip(theta[:draws], -1.0, 1.0)[:, None, :]
    second = np.clip(mean * mean + sigma2, np.abs(mean), 1.0)
    up, down = (second + mean) / 2, (second - mean) / 2
    u = _trial_uniforms(draws, rounds, n)
    out: np.ndarray = np.where(u < up, 1.0, np.where(u < up + down, -1.0, 0.0))
    return out


def _staged_pass(
    theta: np.ndarray, sigma2: float, rounds: int, bar: float, rule: ScreenStopping
) -> np.ndarray:
    """Which simulated staged screens pass: round k adds one trial's noise a task, and the
    real rule decides on the rounds' z (:func:`._screen_stop.staged_verdicts`)."""
    draws, n = theta.shape
    rng = np.random.default_rng(POWER_SEED + 7919 * rounds + n)
    noise = np.cumsum(rng.standard_normal((rounds, draws, n)), axis=0)
    k = np.arange(1, rounds + 1)[:, None, None]
    partial = np.clip(theta + math.sqrt(sigma2) * noise / k, -1.0, 1.0)
    passed, _ = staged_verdicts(paired_z(partial), bar, rule)
    return passed


def paired_z(deltas: np.ndarray) -> np.ndarray:
    """The paired screen's z = Δ/SE over the last axis (per-task deltas), 0 where SE is 0."""
    n = deltas.shape[-1]
    se = deltas.std(axis=-1, ddof=1) / math.sqrt(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        z: np.ndarray = np.where(se > 0, deltas.mean(axis=-1) / se, 0.0)
    return z


@functools.lru_cache(maxsize=256)
def promotion_mde(design: GateDesign, power: float = 0.8, tolerance: float = 5e-4) -> float | None:
    """The smallest mean gain promoted with probability ``power``; None when no gain up to 1
    (the reward range) is: too few observations for this level (see :mod:`._confirmation`)."""
    if promotion_power(1.0, design) < power:
        return None
    low, high = 0.0, 1.0
    while high - low > tolerance:
        mid = 0.5 * (low + high)
        if promotion_power(mid, design) >= power:
            high = mid
        else:
            low = mid
    return high


def observation_components(a: SplitResult, b: SplitResult) -> VarianceComponents:
    """ω² and σ² of the confirmation's *observations* of b − a: per task, or with clusters
    (2+ clusters among the paired tasks) per cluster mean, so n_tasks counts clusters and the
    design effect is in the variances: a cluster of m tasks averages σ²/m of trial noise, and
    ω² is what the cluster means vary by beyond that (with its unfloored estimate and SE, as
    :func:`honesteval.stats.paired_components`).
    """
    plain = paired_components(a, b)
    clusters = {t.id: t.cluster for r in (a, b) for t in r.per_task if t.cluster is not None}
    ma, mb = task_means(a), task_means(b)
    ids = sorted(ma.keys() & mb.keys())
    keys = [cluster_key(i, clusters.get(i)) for i in ids]
    if not clusters or len(set(keys)) < 2:
        return plain
    groups: dict[str, list[float]] = {}
    for key, i in zip(keys, ids, strict=True):
        groups.setdefault(key, []).append(mb[i] - ma[i])
    means = np.array([np.mean(g) for g in groups.values()])
    inverse_size = float(np.mean([1.0 / len(g) for g in groups.values()]))
    sigma2 = (_within(a) + _within(b)) * inverse_size
    omega2, se = between_variance(means, sigma2 / plain.n_trials)
    return VarianceComponents(
        max(0.0, omega2),
        sigma2,
        len(groups),
        plain.n_trials,
        f"{plain.source}, per cluster ({len(groups)} clusters of {len(ids)} tasks)",
        omega2,
        se,
    )


#: Before any measurement: binary rewards at a pass rate of 1/2 (the largest trial variance of
#: a [0, 1] reward's paired delta short of a perfectly anti-correlated pair), one gain on
#: every task.
PLANNING_SIGMA2 = 0.5
#: The gains users most want found; ``check`` warns when the default cannot promote them.
SMALL_GAIN = 0.3


def planning_mde(
    n_tasks: int,
    screen_trials: int,
    budget: int,
    level: float,
    screen_bar: float,
    stopping: ScreenStopping | None,
) -> float | None:
    """The gain the default two-stage gate promotes with 80 % probability before anything
    was measured (:data:`PLANNING_SIGMA2`, no between-task spread): the screen, then the
    confirmation in rounds at ``level`` with ``budget`` rounds. None: no gain up to 1.

    >>> round(planning_mde(12, 10, 30, 0.0109, 1.0, None), 2) < 0.3
    True
    """
    design = GateDesign(
        omega2=0.0,
        sigma2=PLANNING_SIGMA2,
        n_obs=n_tasks,
        screen_trials=screen_trials,
        confirm_trials=budget,
        screen_bar=screen_bar,
        level=level,
        screen_stopping=stopping,
        rounds=True,
    )
    return promotion_mde(design)


def small_val_warning(n_tasks: int, screen_trials: int, cfg: GateConfig) -> str | None:
    """The warning ``check`` and a project's first gate give when the default gate, at its
    first confirmation's level, cannot promote a gain below :data:`SMALL_GAIN` with 80 %
    probability within its budget (:func:`planning_mde`); None when it can, or single stage.
    """
    if not cfg.confirm or n_tasks < 2 or cfg.confirm_holdout is not None:
        return None
    level = next_level(new_online_state(cfg.online_rule, cfg.search_alpha))
    budget = cfg.confirm_budget(screen_trials)
    bar = cfg.k_se if cfg.alpha is None else t_quantile(1.0 - cfg.alpha, n_tasks - 1)
    mde = planning_mde(n_tasks, screen_trials, budget, level, bar, screen_stopping(cfg))
    if mde is not None and mde < SMALL_GAIN:
        return None
    found = "no gain up to 1" if mde is None else f"a gain of {mde:.2f} a task"
    return (
        f"{n_tasks} val tasks × {screen_trials} trials: the default gate (screen, then at most "
        f"{budget} confirmation rounds at alpha_1 = {level:.3g}) promotes {found} with 80% "
        f"probability (binary rewards at a pass rate of 1/2), so gains below {SMALL_GAIN} "
        "will rarely be promoted: add val tasks, raise gate.confirm_trials, or see "
        "`honesteval plan --effect 0.2`"
    )
