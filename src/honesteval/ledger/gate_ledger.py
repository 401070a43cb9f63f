"""The gate's ledger: the current best, the decisions log, the test seal, and the search-level
error control (the confirmations and their online levels). The statistics it records (the
decision, the baseline, the drift check) live in :mod:`honesteval.stats`.

Plain Python: the ``gate``, ``reevaluate-best`` and ``finalize`` flows call these; so do tests
and ``bench/search_sim.py``. Every read-modify-write of ``best.json`` / ``decisions.jsonl`` /
``seal.json`` happens under the project lock, so two gate runs at once cannot corrupt them, and
a promotion is a compare-and-swap: a decision made against a best that changed meanwhile
promotes nothing and spends no alpha.

Two stages (the default): the gate as it always was is the *screen*; a screen pass is
*confirmed* by re-running the current best and the candidate on fresh seeds, decided at the
level alpha_j the online rule (LORD++ or the FWER fallback, :mod:`honesteval.stats._online`)
assigns to the j-th confirmation. The level is computed under the lock from the ledger (the
``online`` state of the last decision in ``decisions.jsonl``), so it depends on the past only,
survives a crash (a confirmation that never got recorded spent nothing) and two concurrent
gates get consecutive j. A promoted candidate's reference result is its confirmation run, not
the screen that selected it (winner's curse).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from honesteval.errors import ConfigError, TestSealedError
from honesteval.evaluation.plan import EvaluationPlan, plan_evaluation
from honesteval.models import (
    BestRecord,
    GateConfig,
    GateDecision,
    OnlineState,
    Seal,
    SplitResult,
    utc_now,
)
from honesteval.project.loader import Project
from honesteval.stats import (
    advance,
    confirm_decide,
    new_online_state,
    next_level,
    observation_components,
    promotion_mde,
    t_quantile,
    wealth_left,
)
from honesteval.store.state_dir import Store

#: The confirmation runs this many times the screen's trials per task unless configured.
CONFIRM_TRIALS_FACTOR = 3
#: Confirmation seeds start here (screens and nightly re-runs use other ranges).
CONFIRM_SEED_BASE = 10**9
NO_GUARANTEE = "single stage (--no-confirm): no search-level guarantee holds for this promotion"


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
    """The current best, or None before the first promotion."""
    return Store(project.state_dir).read_best()


def check_best_unchanged(project: Project, best: BestRecord) -> None:
    """The current best is compared as it was promoted; a folder edited since is refused."""
    now = project.candidate(best.name).fingerprint
    if now != best.fingerprint:
        raise ConfigError(
            f"current best {best.name!r} changed on disk since it was promoted (fingerprint "
            f"{best.fingerprint[:12]} -> {now[:12]}); restore it, or promote the new version "
            "under another name"
        )


def _screened(decisions: Sequence[GateDecision], best: BestRecord) -> int:
    """Decisions already made against this best since its promotion."""
    return sum(
        1
        for d in decisions
        if d.current == best.name
        and d.current_fingerprint == best.fingerprint
        and d.timestamp >= best.promoted_at
    )


@dataclass(frozen=True)
class Confirmation:
    """The second stage's evidence: both sides re-run on fresh seeds (``base_seed``)."""

    current: SplitResult
    candidate: SplitResult
    cfg: GateConfig


def online_state(decisions: Sequence[GateDecision], cfg: GateConfig) -> OnlineState:
    """The ledger: the online state of the last decision that carries one.

    The rule and alpha are fixed by the first confirmation; later config changes do not
    apply to a running search (changing alpha mid-search would void the guarantee).
    """
    for d in reversed(decisions):
        if d.online is not None:
            return d.online
    return new_online_state(cfg.online_rule, cfg.search_alpha)


def confirm_trials(cfg: GateConfig, screen_trials: int) -> int:
    return cfg.confirm_trials or CONFIRM_TRIALS_FACTOR * screen_trials


def confirm_seed(screen: SplitResult, best: BestRecord, state: OnlineState, n_trials: int) -> int:
    """A base seed for the confirmation's ``n_trials`` seeds, disjoint from the screen's.

    Derived (so a confirmation that crashed resumes its own trials) from both fingerprints
    and the number of confirmations so far: every recorded confirmation moves j on, so the
    next one against the same pair (or the same best promoted again) gets fresh seeds.
    """
    key = f"{best.fingerprint}|{screen.fingerprint}|{state.tests}"
    seed = CONFIRM_SEED_BASE + int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big")
    if seed < screen.base_seed + screen.n_trials and screen.base_seed < seed + n_trials:
        seed = screen.base_seed + screen.n_trials
    return seed


def confirmation_seeds(
    project: Project, best: BestRecord, screen_candidate: SplitResult, cfg: GateConfig
) -> tuple[int, int]:
    """(n_trials, base_seed) of the second stage: both sides on val, on fresh seeds.

    Stored trials are then reused only at these seeds, i.e. only when this very confirmation
    crashed before it was recorded (a resume); never the screen's.
    """
    state = online_state(Store(project.state_dir).read_decisions(), cfg)
    n = confirm_trials(cfg, screen_candidate.n_trials)
    return n, confirm_seed(screen_candidate, best, state, n)


def staged(screen: GateDecision, cfg: GateConfig) -> GateDecision:
    """Label a screen decision: the screen of two stages, or the single stage (no guarantee)."""
    if cfg.confirm:
        return screen.model_copy(update={"stage": "screen"})
    return screen.model_copy(
        update={"stage": "single", "reason": f"{screen.reason} [{NO_GUARANTEE}]"}
    )


def confirm_decision(
    screen: GateDecision, evidence: Confirmation, state: OnlineState
) -> GateDecision:
    """Decide the confirmation at alpha_j = next_level(state): the betting e-value against
    1/alpha_j (:func:`honesteval.stats.confirm_decide`), its promoted gain conditional on the
    promotion. The power figures are the screen's (the gate's power, computed before it ran).

    Every confirmation that reaches a decision spends its level, INDECISIVE ones included
    (the data decided they were indecisive; a free retry would be a free look).
    """
    level = next_level(state)
    d = confirm_decide(evidence.current, evidence.candidate, evidence.cfg, level)
    after = advance(state, level, d.accept)
    j = after.tests
    head = "CONFIRMED" if d.accept else "NOT CONFIRMED"
    return d.model_copy(
        update={
            "stage": "confirm",
            "level": level,
            "online": after,
            "wealth_left": wealth_left(after),
            "screen_delta": screen.delta,
            "screen_reason": screen.reason,
            "confirm_base_seed": evidence.candidate.base_seed,
            "mde": screen.mde,
            "mde_level": screen.mde_level,
            "mde_later": screen.mde_later,
            "mde_later_level": screen.mde_later_level,
            "reason": f"{head} on fresh seeds at alpha_{j} = {level:.3g} "
            f"({after.rule}): {d.reason} | screen: {screen.reason}",
        }
    )


#: How far ahead the decay of alpha_j is shown: the level this many confirmations on.
LATER = 9


def _screen_bar(cfg: GateConfig, n_tasks: int) -> float:
    """The screen's bar in SEs, as ``decide`` draws it: k_se, or the one-sided t quantile at
    ``alpha`` with n − 1 df; 0 for the modes without an SE bar (strict, threshold ≈ 0)."""
    if cfg.mode not in ("paired", "significant"):
        return 0.0
    return cfg.k_se if cfg.alpha is None else t_quantile(1.0 - cfg.alpha, max(n_tasks - 1, 1))


def screen_power(
    project: Project,
    screen: GateDecision,
    current: SplitResult,
    candidate: SplitResult,
    cfg: GateConfig,
) -> GateDecision:
    """:func:`gate_power` at the level the ledger would assign next."""
    state = online_state(Store(project.state_dir).read_decisions(), cfg)
    return gate_power(screen, current, candidate, cfg, state)


def gate_power(
    screen: GateDecision,
    current: SplitResult,
    candidate: SplitResult,
    cfg: GateConfig,
    state: OnlineState,
) -> GateDecision:
    """The screen decision with the power of the gate that decides: the MDE (80 % promotion
    power) of the screen and a confirmation at the next alpha_j with ``confirm_trials``, and
    the same LATER confirmations on if none promotes meanwhile (how alpha_j decays).

    Measured on the screen's paired variances; unchanged when single stage (the screen's t
    MDE is then the gate's) or when they cannot be measured (fewer than 2 paired tasks).
    """
    if not cfg.confirm or screen.baseline:
        return screen
    try:
        comp = observation_components(current, candidate)
    except ValueError:
        return screen
    level = next_level(state)
    later = next_level(state.model_copy(update={"tests": state.tests + LATER}))
    omega2 = comp.omega2 if comp.omega2_moment is None else comp.omega2_moment
    kw = dict(
        omega2=round(omega2, 8),
        sigma2=round(comp.sigma2, 8),
        n_obs=comp.n_tasks,
        screen_trials=float(candidate.n_trials),
        confirm_trials=float(confirm_trials(cfg, candidate.n_trials)),
        screen_bar=_screen_bar(cfg, comp.n_tasks),
    )
    return screen.model_copy(
        update={
            "mde": promotion_mde(level=level, **kw),
            "mde_level": level,
            "mde_later": promotion_mde(level=later, **kw),
            "mde_later_level": later,
        }
    )


def record_decision(
    project: Project,
    decision: GateDecision,
    candidate_result: SplitResult,
    expected_best: BestRecord | None,
    confirmation: Confirmation | None = None,
) -> GateDecision:
    """Append the decision and promote on accept, atomically, under the project lock.

    With ``confirmation`` (a screen pass re-run on fresh seeds), the final decision is taken
    here, at the level the ledger assigns now, and the promoted reference result is the
    confirmation's. Every decision carries the online state after it. ``screened`` counts
    this decision and every earlier one against the same current best since it was promoted.
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
        decisions = store.read_decisions()
        state = online_state(decisions, project.gate_config)
        reference = candidate_result
        if same and confirmation is not None:
            decision = confirm_decision(decision, confirmation, state)
            state = decision.online or state
            reference = confirmation.candidate
        update: dict[str, Any] = {
            "timestamp": utc_now(),
            "online": state,
            "wealth_left": wealth_left(state),
        }
        if not same:
            now = "none" if best is None else repr(best.name)
            update |= {
                "accept": False,
                "reason": f"REJECT (stale): the current best changed to {now} while this gate "
                f"ran; nothing promoted, no alpha spent, gate again [{decision.reason}]",
            }
        if best is not None and not decision.baseline:
            update["screened"] = _screened(decisions, best) + 1
        final = decision.model_copy(update=update)
        if final.accept:
            final = final.model_copy(update={"promoted": True})
        # The log first: a crash between the two leaves a recorded decision and the old best,
        # never a promotion nobody can account for.
        store.append_decision(final)
        if final.accept:
            store.write_best(
                BestRecord(
                    name=reference.candidate,
                    fingerprint=reference.fingerprint,
                    promoted_at=final.timestamp,
                    reason=final.reason,
                    result=reference,
                )
            )
    return final


def drift_reference(project: Project, best: BestRecord) -> SplitResult | None:
    """What tonight's drift check compares with; None: tonight's run becomes the reference.

    A baseline was selected by nothing: its stored run is the reference. Any other promotion
    passed a test, so its stored run is biased upwards: the reference is the first re-run
    recorded after the promotion (a ``reference`` drift check), found among the stored results
    by its fingerprint and seed. None until that run exists.
    """
    if best.reason.startswith("BASELINE"):
        return best.result
    store = Store(project.state_dir)
    first = next(
        (
            d
            for d in store.read_drift_checks()
            if d.status == "reference"
            and d.fingerprint == best.fingerprint
            and d.timestamp >= best.promoted_at
        ),
        None,
    )
    if first is None:
        return None
    for r in reversed(store.read_results()):
        if (
            r.fingerprint == best.fingerprint
            and r.split == "val"
            and not r.subset
            and r.base_seed == first.new_base_seed
        ):
            return r
    return None


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
            f"the test split was already scored for {seal.candidate!r} at "
            f"{seal.sealed_at}: finalize runs once per project"
        )


def write_seal(project: Project, result: SplitResult) -> None:
    store = Store(project.state_dir)
    with store.locked():
        check_not_sealed(project)
        store.write_seal(
            Seal(
                candidate=result.candidate,
                fingerprint=result.fingerprint,
                sealed_at=utc_now(),
                reward=result.reward,
                stderr=result.stderr,
                coverage=result.coverage,
                n_tasks=result.n_tasks,
            )
        )
