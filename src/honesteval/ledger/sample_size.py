"""``honesteval plan``: sample sizes from the variances the stored results measured."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from honesteval.errors import ConfigError, StateError
from honesteval.ledger.gate_ledger import read_best
from honesteval.models import GateConfig, SplitResult
from honesteval.project.loader import load_project
from honesteval.stats import (
    VarianceComponents,
    bar_z,
    minimum_detectable_effect,
    paired_components,
    required_tasks,
    required_trials,
    variance_components,
)
from honesteval.store.state_dir import Store


def _components(best: SplitResult | None, results: list[SplitResult]) -> VarianceComponents:
    """Paired components when the best and another candidate share val tasks; else those of
    one result, doubled for a difference of two independent candidates (conservative: a
    positive correlation between candidates only makes paired differences tighter)."""
    usable = [r for r in results if r.split == "val" and not r.subset and r.n_scored >= 2]
    if best is not None:
        others = [r for r in usable if r.fingerprint != best.fingerprint]
        for other in reversed(others):
            try:
                return paired_components(best, other)
            except ValueError:
                continue
    base = best if best is not None else (usable[-1] if usable else None)
    if base is None:
        raise StateError("no stored val result with 2+ scored tasks: evaluate a candidate first")
    one = variance_components(base)
    return VarianceComponents(
        2 * one.omega2,
        2 * one.sigma2,
        one.n_tasks,
        one.n_trials,
        f"{one.source}, doubled for an unpaired difference",
    )


def plan_sample_size(project: str | Path, effect: float) -> dict[str, Any]:
    if not effect > 0:
        raise ConfigError(f"--effect must be > 0, got {effect}")
    proj = load_project(project)
    cfg = proj.gate_config
    best = read_best(proj)
    comp = _components(None if best is None else best.result, Store(proj.state_dir).read_results())
    z_alpha = bar_z(cfg)
    n_val = len(proj.tasks("val"))
    k = proj.config.trials
    kw = dict(z_alpha=z_alpha)
    veto = None if best is None else veto_survival(best.result, cfg, k)
    return {
        "no_regression": cfg.no_regression,
        "veto_survival": veto,
        "effect": effect,
        "power": 0.8,
        "z_alpha": z_alpha,
        "omega2": comp.omega2,
        "sigma2": comp.sigma2,
        "measured_on": comp.source,
        "val_tasks": n_val,
        "trials": k,
        "tasks_needed": required_tasks(effect, comp.omega2, comp.sigma2, k, **kw),
        "trials_needed": required_trials(effect, comp.omega2, comp.sigma2, n_val, **kw),
        "mde_current": minimum_detectable_effect(comp.omega2, comp.sigma2, n_val, k, **kw),
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


def plan_lines(r: dict[str, Any]) -> list[str]:
    trials = (
        f"{r['trials_needed']} trials per task"
        if r["trials_needed"] is not None
        else "no number of trials suffices (the between-task variance alone hides it): add tasks"
    )
    return [
        f"variances measured on {r['measured_on']}: between tasks ω² = {r['omega2']:.5f}, "
        f"within a task σ² = {r['sigma2']:.5f}",
        f"bar z = {r['z_alpha']:.3g} (the gate's), power 80%",
        f"to detect Δ = {r['effect']:g}: {r['tasks_needed']} tasks at {r['trials']} trials "
        f"per task (Miller 2024, Eq. 9)",
        f"with the {r['val_tasks']} val tasks: {trials} (Eq. 10)",
        f"the current val set ({r['val_tasks']} tasks × {r['trials']} trials) detects "
        f"Δ ≥ {r['mde_current']:.4f}",
    ] + (
        []
        if r["veto_survival"] is None
        else [
            f"no_regression: {r['no_regression']} vetoes: a candidate as good as the best "
            f"keeps every task the best passed with probability {r['veto_survival']:.3g}, so "
            f"the power is at most {0.8 * r['veto_survival']:.1%}, not 80% "
            "(no_regression: report lists regressions without the veto)"
        ]
    )
