"""The gate's bookkeeping: the current best, the decisions log, the test seal, drift.

Plain Python: the ``gate``, ``reevaluate-best`` and ``finalize`` flows call these; so do tests.
Every read-modify-write of ``best.json`` / ``decisions.jsonl`` / ``seal.json`` happens under the
project lock, so two gate runs at once cannot corrupt them, and a promotion is a
compare-and-swap: a decision made against a best that changed meanwhile promotes nothing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from honesteval.errors import ConfigError, TestSealedError
from honesteval.evaluation import EvaluationPlan, plan_evaluation
from honesteval.models import (
    BestRecord,
    DriftReport,
    GateConfig,
    GateDecision,
    SplitResult,
    utc_now,
)
from honesteval.project import Project
from honesteval.stats import compare_to_bar, paired_deltas, t_quantile
from honesteval.store import Store


def gate_config_for(project: Project, **overrides: Any) -> GateConfig:
    """The project's gate config with CLI/flow overrides (None means "keep")."""
    values = project.gate_config.model_dump()
    values.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return GateConfig(**values)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"gate {key}: {first['msg']} (got {first.get('input')!r})") from None


def prepare_gate(
    project: Project,
    candidate: str,
    *,
    n_trials: int | None = None,
    base_seed: int | None = None,
    **overrides: Any,
) -> tuple[GateConfig, BestRecord | None, EvaluationPlan]:
    """Every check a gate run needs before it spends anything (the CLI runs it too)."""
    cfg = gate_config_for(project, **overrides)
    best = read_best(project)
    plan = plan_evaluation(project, candidate, "val", n_trials=n_trials, base_seed=base_seed)
    if best is not None:
        if best.name == candidate and best.fingerprint == plan.settings.candidate.fingerprint:
            raise ConfigError(f"{candidate!r} is already the current best")
        check_best_unchanged(project, best)
    return cfg, best, plan


def read_best(project: Project) -> BestRecord | None:
    data = Store(project.state_dir).read_best()
    return None if data is None else BestRecord.model_validate(data)


def check_best_unchanged(project: Project, best: BestRecord) -> None:
    """The current best is compared as it was promoted; a folder edited since is refused."""
    now = project.candidate(best.name).fingerprint
    if now != best.fingerprint:
        raise ConfigError(
            f"current best {best.name!r} changed on disk since it was promoted (fingerprint "
            f"{best.fingerprint[:12]} -> {now[:12]}); restore it, or promote the new version "
            "under another name"
        )


def baseline_decision(result: SplitResult, cfg: GateConfig) -> GateDecision:
    """No current best yet: the first candidate gated becomes the baseline (if coverage allows)."""
    common = dict(
        mode=cfg.mode,
        candidate=result.candidate,
        candidate_fingerprint=result.fingerprint,
        candidate_coverage=result.coverage,
        candidate_reward=result.reward,
        baseline=True,
    )
    # Nothing scored is indecisive whatever min_coverage says (even 0): there is no reward.
    if result.reward is None or result.coverage < cfg.min_coverage:
        return GateDecision(
            accept=False,
            indecisive=True,
            reason=(
                f"INDECISIVE: no current best yet, and the candidate's coverage "
                f"{result.coverage:.2f} ({result.n_scored}/{result.n_tasks} tasks scored) is "
                f"below {cfg.min_coverage:.2f} or nothing was scored; nothing promoted"
            ),
            **common,
        )
    se = "n/a" if result.stderr is None else f"{result.stderr:.4f}"
    partial = (
        ""
        if result.coverage >= 1.0
        else f"; promoted below full coverage: {result.n_scored}/{result.n_tasks} tasks "
        "scored, the rest never verified"
    )
    return GateDecision(
        accept=True,
        reason=(
            f"BASELINE: no current best yet; {result.candidate!r} becomes the baseline "
            f"(val reward {result.reward:.4f} ± {se}){partial}"
        ),
        **common,
    )


def _screened(decisions: list[dict[str, Any]], best: BestRecord) -> int:
    """Decisions already made against this best since its promotion."""
    return sum(
        1
        for d in decisions
        if d.get("current") == best.name
        and d.get("current_fingerprint") == best.fingerprint
        and d.get("timestamp", "") >= best.promoted_at
    )


def record_decision(
    project: Project,
    decision: GateDecision,
    candidate_result: SplitResult,
    expected_best: BestRecord | None,
) -> GateDecision:
    """Append the decision and promote on accept, atomically, under the project lock.

    ``screened`` counts this decision and every earlier one against the same current best
    since it was promoted: each gate call is another draw from the noise.
    """
    store = Store(project.state_dir)
    with store.locked():
        best = read_best(project)
        same = (best is None and expected_best is None) or (
            best is not None
            and expected_best is not None
            and (best.name, best.fingerprint, best.promoted_at)
            == (expected_best.name, expected_best.fingerprint, expected_best.promoted_at)
        )
        update: dict[str, Any] = {"timestamp": utc_now()}
        if not same:
            now = "none" if best is None else repr(best.name)
            update |= {
                "accept": False,
                "reason": f"REJECT (stale): the current best changed to {now} while this gate "
                f"ran; nothing promoted, gate again [{decision.reason}]",
            }
        if best is not None and not decision.baseline:
            update["screened"] = _screened(store.read_decisions(), best) + 1
        final = decision.model_copy(update=update)
        if final.accept:
            final = final.model_copy(update={"promoted": True})
            store.write_best(
                BestRecord(
                    name=candidate_result.candidate,
                    fingerprint=candidate_result.fingerprint,
                    promoted_at=final.timestamp,
                    reason=final.reason,
                    result=candidate_result,
                ).model_dump(mode="json")
            )
        store.append_decision(final)
    return final


DRIFT_ALPHA = 0.05


def drift_report(stored: SplitResult, fresh: SplitResult, cfg: GateConfig) -> DriftReport:
    """Two-sided paired t-test on per-task means at α = 0.05: has the current best moved?

    Not the gate's one-sided k_se bar: at k_se = 1 a two-sided check would cry "drifted" on
    about a third of perfectly stable nights.
    """
    common = dict(
        candidate=stored.candidate,
        fingerprint=stored.fingerprint,
        stored_reward=stored.reward,
        new_reward=fresh.reward,
        stored_base_seed=stored.base_seed,
        new_base_seed=fresh.base_seed,
    )
    if fresh.coverage < cfg.min_coverage:
        return DriftReport(
            status="indecisive",
            message=f"indecisive: coverage {fresh.coverage:.2f} < {cfg.min_coverage:.2f}",
            **common,
        )
    pairs = paired_deltas(stored, fresh)
    if pairs.n < 2:
        return DriftReport(
            status="indecisive",
            n_paired=pairs.n,
            message="indecisive: fewer than 2 tasks scored in both runs",
            **common,
        )
    delta, variance = pairs.mean, pairs.variance_of_mean
    se = pairs.se
    multiplier = t_quantile(1 - DRIFT_ALPHA / 2, pairs.n - 1)
    bar = multiplier * se
    moved = compare_to_bar(abs(delta), variance, multiplier) == "above"
    text = (
        f"paired Δ = {float(delta):+.4f}, SE = {se:.4f}, two-sided bar "
        f"{multiplier:.3g}×SE = {bar:.4f} over {pairs.n} tasks"
    )
    return DriftReport(
        status="drifted" if moved else "stable",
        message=("current best has drifted: " if moved else "stable: ") + text,
        delta=float(delta),
        se=se,
        bar=bar,
        n_paired=pairs.n,
        **common,
    )


def fresh_seed(stored_base_seed: int, n_trials: int) -> int:
    """Fresh seeds for a nightly re-run: derived from today's UTC date, never the stored ones."""
    seed = int(datetime.now(UTC).strftime("%Y%m%d")) * 1000
    if stored_base_seed <= seed < stored_base_seed + n_trials or (
        seed <= stored_base_seed < seed + n_trials
    ):
        seed += 10 * n_trials
    return seed


def check_not_sealed(project: Project) -> None:
    seal = Store(project.state_dir).read_seal()
    if seal is not None:
        raise TestSealedError(
            f"the test split was already scored for {seal.get('candidate')!r} at "
            f"{seal.get('sealed_at')}: finalize runs once per project"
        )


def write_seal(project: Project, result: SplitResult) -> None:
    store = Store(project.state_dir)
    with store.locked():
        check_not_sealed(project)
        store.write_seal(
            {
                "candidate": result.candidate,
                "fingerprint": result.fingerprint,
                "sealed_at": utc_now(),
                "reward": result.reward,
                "stderr": result.stderr,
                "coverage": result.coverage,
                "n_tasks": result.n_tasks,
            }
        )
