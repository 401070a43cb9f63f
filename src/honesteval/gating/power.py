"""The gate's power: the MDE a gate decision reports (:func:`gate_power`) and ``honesteval
plan``'s sample sizes from the variances the stored results measured.

Under two stages (the default) the gate that decides is the screen *and* the confirmation
at the next alpha_j with ``confirm_trials`` (in rounds, or the held-out part's task-level
test): ``plan`` solves for the tasks (or
clusters) and the confirmation's trials that promote the effect with 80 % probability, by the
same simulation as the gate's MDE line (:func:`honesteval.stats.promotion_power`). Single stage
(``confirm: false``) keeps Miller's Eq. 9-10 for the screen, with the t quantile where the gate
uses one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from honesteval.errors import ConfigError, StateError
from honesteval.gating.config import confirm_trials
from honesteval.gating.ledger import planned_screen_trials, read_best, search_ledger
from honesteval.gating.spend import confirmation_trials_at_most, measured_trial_cost
from honesteval.models import GateConfig, GateDecision, OnlineState, SplitResult, cluster_key
from honesteval.project.loader import Project, load_project
from honesteval.stats import (
    GateDesign,
    ScreenStopping,
    VarianceComponents,
    minimum_detectable_effect,
    next_level,
    observation_components,
    paired_components,
    promotion_mde,
    promotion_power,
    required_tasks,
    required_trials,
    screen_pass_rate,
    screen_stopping,
    t_quantile,
    variance_components,
)
from honesteval.store.state_dir import Store


def _components(
    best: SplitResult | None, results: list[SplitResult], per_task: bool
) -> VarianceComponents:
    """The variances of the paired Δ as the gate sees them: measured, when the best and
    another candidate share val tasks (per task, or with ``per_task`` False per cluster mean
    as the held-out test sees them); else from one result, as a pair of it and a candidate
    one gain better on every task would show them (:func:`paired_like`)."""
    usable = [r for r in results if r.split == "val" and not r.subset and r.n_scored >= 2]
    if best is not None:
        others = [r for r in usable if r.fingerprint != best.fingerprint]
        for other in reversed(others):
            try:
                return (paired_components if per_task else observation_components)(best, other)
            except ValueError:
                continue
    base = best if best is not None else (usable[-1] if usable else None)
    if base is None:
        raise StateError("no stored val result with 2+ scored tasks: evaluate a candidate first")
    return paired_like(variance_components(base))


def paired_like(one: VarianceComponents) -> VarianceComponents:
    """One candidate's components turned into a paired Δ's: each task's difficulty is on both
    sides of a pair and cancels, so the between-task part is the spread of the gain, 0 for one
    gain on every task (not the candidate's own ω², which the pair never sees); the trial
    noise of both sides stays, 2σ² (independent trials: a correlation between the sides at a
    shared seed only makes pairs tighter)."""
    return VarianceComponents(
        0.0,
        2 * one.sigma2,
        one.n_tasks,
        one.n_trials,
        f"{one.source} (paired: task difficulty cancels, one gain on every task; trial noise "
        "of both sides)",
        0.0,
        0.0,
    )


#: Searches stop here: more tasks or trials than this are reported as "none suffices".
MAX_TASKS = 20_000
MAX_TRIALS = 10_000
#: The same for the confirmation in rounds, whose simulation holds every trial of a design.
MAX_ROUND_TASKS = 2_000
MAX_ROUNDS = 1_000


def _smallest(works: Callable[[int], bool], low: int, high: int) -> int | None:
    """The smallest integer in [low, high] for which ``works`` (monotone) holds, or None.

    Doubling from ``low`` first, so the costly evaluations (a power simulation grows with n)
    stay below twice the answer; then bisection."""
    step = low
    while not works(step):
        if step >= high:
            return None
        low, step = step + 1, min(2 * step, high)
    high = step
    while low < high:
        mid = (low + high) // 2
        if works(mid):
            high = mid
        else:
            low = mid + 1
    return low


def plan_sample_size(project: str | Path, effect: float) -> dict[str, Any]:
    if not effect > 0:
        raise ConfigError(f"--effect must be > 0, got {effect}")
    proj = load_project(project)
    cfg = proj.gate_config
    best = read_best(proj)
    rounds = cfg.confirm_holdout is None  # the default confirmation runs in rounds
    stored = Store(proj.state_dir).read_results()
    comp = _components(None if best is None else best.result, stored, per_task=rounds)
    val = proj.tasks("val")
    n_val = len(val)
    # the held-out test's observations: tasks, or clusters when tasks carry them (the design
    # effect is then in the per-cluster variances, see observation_components); the
    # confirmation in rounds sees every task's trials (the tasks are fixed)
    clusters = {cluster_key(t.id, t.cluster) for t in val}
    clustered = any(t.cluster is not None for t in val) and not rounds
    n_obs = len(clusters) if clustered else n_val
    k = proj.config.trials
    veto = None if best is None else veto_survival(best.result, cfg, k)
    common: dict[str, Any] = {
        "no_regression": cfg.no_regression,
        "veto_survival": veto,
        "effect": effect,
        "power": 0.8,
        "omega2": comp.omega2,
        "sigma2": comp.sigma2,
        "measured_on": comp.source,
        "val_tasks": n_val,
        "trials": k,
        "two_stages": cfg.confirm,
    }
    cost = measured_trial_cost(proj)
    screen_trials = n_val * k  # a new candidate's: the best's trials are stored
    confirmation_trials = (
        confirmation_trials_at_most(n_val, confirm_trials(cfg, k)) if cfg.confirm else 0
    )
    common["expected_cost"] = {
        "usd_per_trial": cost.usd,
        "tokens_per_trial": cost.tokens,
        "measured_trials": cost.n_measured,
        "screen_trials": screen_trials,
        "screen_usd": None if cost.usd is None else cost.usd * screen_trials,
        "confirmation_trials": confirmation_trials,
        "confirmation_usd": None if cost.usd is None else cost.usd * confirmation_trials,
        "screen": cost.of(screen_trials),
        "confirmation": cost.of(confirmation_trials) if cfg.confirm else None,
    }
    if not cfg.confirm:
        z_alpha = _screen_bar(cfg, n_val)  # the gate's bar: k_se, or its t quantile
        kw = dict(z_alpha=z_alpha)
        return common | {
            "z_alpha": z_alpha,
            "tasks_needed": required_tasks(effect, comp.omega2, comp.sigma2, k, **kw),
            "trials_needed": required_trials(effect, comp.omega2, comp.sigma2, n_val, **kw),
            "mde_current": minimum_detectable_effect(comp.omega2, comp.sigma2, n_val, k, **kw),
        }
    state = search_ledger(proj).state
    level = next_level(state)
    later = next_level(state.model_copy(update={"tests": state.tests + LATER}))
    k_confirm = confirm_trials(cfg, k)

    def design(n: int, confirm_k: float, at: float = level) -> GateDesign:
        bar = _screen_bar(cfg, n)  # the screen as the gate runs it: staged by default
        stopping = screen_stopping(cfg)
        return measured_design(comp, n, float(k), confirm_k, bar, at, stopping, rounds)

    simulated = design(n_obs, float(k_confirm))

    def power(n: int, confirm_k: float) -> float:
        return promotion_power(effect, design(n, confirm_k))

    max_tasks, max_trials = (MAX_ROUND_TASKS, MAX_ROUNDS) if rounds else (MAX_TASKS, MAX_TRIALS)
    # No confirmation budget promotes more often than the screen passes: when the screen of
    # the val set alone passes less than 80 % of the time, no budget needs searching (it was
    # most of plan's time at 7 tasks, up to max_trials confirmation rounds simulated).
    screen_can = screen_pass_rate(effect, simulated) >= 0.8

    return common | {
        "z_alpha": _screen_bar(cfg, n_obs),
        "omega2_simulated": simulated.omega2,
        "omega2_se": simulated.omega2_se,
        "sigma2_simulated": simulated.sigma2,
        "level": level,
        "level_later": later,
        "rounds": rounds,
        "confirm_trials": k_confirm,
        "observations": n_obs,
        "tasks_needed": _smallest(lambda n: power(n, float(k_confirm)) >= 0.8, 2, max_tasks),
        "trials_needed": _smallest(lambda c: power(n_obs, float(c)) >= 0.8, 1, max_trials)
        if screen_can
        else None,
        "mde_current": promotion_mde(design(n_obs, float(k_confirm))),
        "mde_later": promotion_mde(design(n_obs, float(k_confirm), later)),
    }


def veto_survival(best: SplitResult, cfg: GateConfig, n_trials: int) -> float | None:
    """With a vetoing ``no_regression`` on, the chance that no task the best passed regresses.

    A candidate as good as the best on a task it passed repeats each trial's pass with the
    best's per-trial rate there, estimated (Laplace) as (passes + 1) / (trials + 2): never 1,
    since a handful of passes cannot prove a task is never failed. The task stays passed only
    if all ``n_trials`` trials pass. The gate's power is at most 80 % times this.
    None when the veto is off (``report`` or ``off``): it costs no power.
    """
    if cfg.no_regression not in ("passed", "any"):
        return None
    survival = 1.0
    for t in best.per_task:
        if t.mean is None or t.mean < cfg.pass_threshold:
            continue
        counted = [r for r in t.rewards if r is not None]
        passes = sum(r >= cfg.pass_threshold for r in counted)
        survival *= ((passes + 1) / (len(counted) + 2)) ** n_trials
    return survival


def _mde(value: float | None) -> str:
    return "no gain up to 1 (too few tasks for this level)" if value is None else f"{value:.4f}"


def plan_lines(r: dict[str, Any]) -> list[str]:
    trials = (
        f"{r['trials_needed']} trials per task"
        if r["trials_needed"] is not None
        else "no number of trials suffices (the between-task variance alone hides it): add tasks"
    )
    lines = [
        f"variances measured on {r['measured_on']}: between tasks ω² = {r['omega2']:.5f}, "
        f"within a task σ² = {r['sigma2']:.5f}",
    ]
    if r["two_stages"]:
        units = "tasks" if r["observations"] == r["val_tasks"] else "clusters"
        tasks = (
            f"{r['tasks_needed']} {units}"
            if r["tasks_needed"] is not None
            else f"no number of {units} up to {MAX_ROUND_TASKS if r['rounds'] else MAX_TASKS}"
        )
        confirm = (
            f"{r['trials_needed']} confirmation trials per task"
            if r["trials_needed"] is not None
            else "no number of confirmation trials suffices: add tasks"
        )
        test = (
            f"the confirmation in rounds at alpha_j = {r['level']:.3g} (at most "
            f"{r['confirm_trials']} rounds of one fresh paired trial a task, stopped when it "
            "decides)"
            if r["rounds"]
            else f"the betting confirmation at alpha_j = {r['level']:.3g} with "
            f"{r['confirm_trials']} trials"
        )
        lines += [
            f"the gate that decides: the screen (bar {r['z_alpha']:.3g}×SE, {r['trials']} trials)"
            f" and {test}; power 80% by simulation, averaged over the "
            f"measured ω² {r['omega2_simulated']:+.5f} ± {r['omega2_se']:.5f} (unfloored ± SE)",
            f"to promote Δ = {r['effect']:g} with 80% power: {tasks} at {r['trials']} + "
            f"{r['confirm_trials']} trials per task",
            f"with the {r['observations']} val {units}: {confirm}",
            f"the current val set promotes Δ ≥ {_mde(r['mde_current'])} at alpha_j = "
            f"{r['level']:.3g}; Δ ≥ {_mde(r['mde_later'])} at {r['level_later']:.3g}, nine "
            "confirmations on if none promotes (alpha_j decays)",
        ]
    else:
        lines += [
            f"single stage: bar {r['z_alpha']:.3g} (the gate's), power 80%",
            f"to detect Δ = {r['effect']:g}: {r['tasks_needed']} tasks at {r['trials']} trials "
            f"per task (Miller 2024, Eq. 9)",
            f"with the {r['val_tasks']} val tasks: {trials} (Eq. 10)",
            f"the current val set ({r['val_tasks']} tasks × {r['trials']} trials) detects "
            f"Δ ≥ {r['mde_current']:.4f}",
        ]
    spend = r["expected_cost"]
    lines.append(
        f"expected cost of a screen: {spend['screen']}"
        + (
            f"; of a confirmation, at most: {spend['confirmation']} (fresh trials, both sides)"
            if spend["confirmation"] is not None
            else ""
        )
    )
    return lines + (
        []
        if r["veto_survival"] is None
        else [
            f"no_regression: {r['no_regression']} vetoes: a candidate as good as the best "
            f"keeps every task the best passed with probability {r['veto_survival']:.3g}, so "
            f"the power is at most {0.8 * r['veto_survival']:.1%}, not 80% "
            "(no_regression: report lists regressions without the veto)"
        ]
    )


#: How far ahead the decay of alpha_j is shown: the level this many confirmations on.
LATER = 9


def _screen_bar(cfg: GateConfig, n_tasks: int) -> float:
    """The screen's bar in SEs, as ``decide`` draws it: k_se, or the one-sided t quantile at
    ``alpha`` with n − 1 df; 0 for the modes without an SE bar (strict, threshold ≈ 0)."""
    if cfg.mode not in ("paired", "significant"):
        return 0.0
    return cfg.k_se if cfg.alpha is None else t_quantile(1.0 - cfg.alpha, max(n_tasks - 1, 1))


def measured_design(
    comp: VarianceComponents,
    n_obs: int,
    screen_trials: float,
    confirm_k: float,
    screen_bar: float,
    level: float,
    stopping: ScreenStopping | None = None,
    rounds: bool = True,
) -> GateDesign:
    """The gate's design on measured variances: ω² unfloored with its SE (the power averages
    over the measurement, see :mod:`honesteval.stats._gate_power`), rounded so that equal
    measurements share the cached MDE."""
    omega2 = comp.omega2 if comp.omega2_unfloored is None else comp.omega2_unfloored
    return GateDesign(
        omega2=round(omega2, 8),
        sigma2=round(comp.sigma2, 8),
        n_obs=n_obs,
        screen_trials=screen_trials,
        confirm_trials=confirm_k,
        screen_bar=screen_bar,
        level=level,
        omega2_se=round(comp.omega2_se, 8),
        screen_stopping=stopping,
        rounds=rounds,
    )


def screen_power(
    project: Project,
    screen: GateDecision,
    current: SplitResult,
    candidate: SplitResult,
    cfg: GateConfig,
) -> GateDecision:
    """:func:`gate_power` at the level the ledger would assign next, of the confirmation this
    project runs (in rounds, or the held-out part's task-level test)."""
    held = Store(project.state_dir).read_holdout() is not None
    return gate_power(screen, current, candidate, cfg, search_ledger(project).state, not held)


def gate_power(
    screen: GateDecision,
    current: SplitResult,
    candidate: SplitResult,
    cfg: GateConfig,
    state: OnlineState,
    rounds: bool = True,
) -> GateDecision:
    """The screen decision with the power of the gate that decides: the MDE (80 % promotion
    power) of the screen and a confirmation at the next alpha_j with ``confirm_trials``, and
    the same LATER confirmations on if none promotes meanwhile (how alpha_j decays).

    Measured on the screen's paired variances; unchanged when single stage (the screen's t
    MDE is then the gate's) or when they cannot be measured (fewer than 2 paired tasks).
    A staged screen's power is simulated round by round with its planned trials; one that
    stopped after one trial a task measured no within-task variance, so it has no MDE.
    """
    if not cfg.confirm or screen.baseline:
        return screen
    planned = planned_screen_trials(screen, candidate)
    if candidate.n_trials < 2 <= planned:
        return screen.model_copy(update={"mde": None, "mde_level": None})
    # the trial-level test's observations are the tasks' trials (the tasks are fixed, so
    # clusters do not enter); the held-out test's are tasks or cluster means
    components = paired_components if rounds else observation_components
    try:
        comp = components(current, candidate)
    except ValueError:
        return screen
    level = next_level(state)
    later = next_level(state.model_copy(update={"tests": state.tests + LATER}))

    def design(at: float) -> GateDesign:
        return measured_design(
            comp,
            comp.n_tasks,
            float(planned),
            float(confirm_trials(cfg, planned)),
            _screen_bar(cfg, comp.n_tasks),
            at,
            screen_stopping(cfg),
            rounds,
        )

    return screen.model_copy(
        update={
            "mde": promotion_mde(design(level)),
            "mde_level": level,
            "mde_later": promotion_mde(design(later)),
            "mde_later_level": later,
        }
    )
