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
assigns to the j-th confirmation. The confirmation is *reserved* in the ledger (its j, level
and seeds) before it runs, and its decision finishes the reservation: the level depends on the
past only and is spent once reserved (a killed confirmation is no free look; the next gate of
the same pair finishes it on the same seeds); two gates of one pair at once share one
confirmation; gates of other pairs get consecutive j. The ledger is replayed and checked on
every read (:mod:`honesteval.gating.search`): a broken one stops the gate. A promoted
candidate's reference result is its confirmation run, not the screen that selected it
(winner's curse).
"""

from __future__ import annotations

import hashlib
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from honesteval.errors import ConfigError, LedgerBrokenError, StateError, TestSealedError
from honesteval.evaluation.plan import finish_evaluation, plan_evaluation
from honesteval.gating.config import confirm_trials
from honesteval.gating.search import Ledger, Reservation, best_identity, credit, read_ledger
from honesteval.models import (
    BestRecord,
    ContinuationRecord,
    GateConfig,
    GateDecision,
    OnlineState,
    RepairRecord,
    ReservationRecord,
    Seal,
    SplitResult,
    utc_now,
)
from honesteval.project.loader import Project
from honesteval.stats import (
    advance,
    confirm_decide,
    headlined,
    new_online_state,
    next_level,
    reason_details,
    rounds_decide,
    unreachable,
    wealth_left,
)
from honesteval.store.state_dir import Store

#: Confirmation seeds start here (screens and nightly re-runs use other ranges).
CONFIRM_SEED_BASE = 10**9


NO_GUARANTEE = "single stage (--no-confirm): no search-level guarantee holds for this promotion"


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
    """The second stage's evidence: both sides re-run on fresh seeds (``base_seed``); with a
    ``budget``, the rounds of the default confirmation run so far (one trial a task each) of
    that many; None: the held-out part of val, decided by the task-level test."""

    current: SplitResult
    candidate: SplitResult
    cfg: GateConfig
    budget: int | None = None


def search_ledger(project: Project) -> Ledger:
    """The ledger replayed (see :mod:`honesteval.gating.search`); a search with no line yet
    starts at the project's rule and alpha. Later config changes do not apply to a running
    search (changing alpha mid-search would void the guarantee)."""
    cfg = project.gate_config
    return read_ledger(
        Store(project.state_dir), new_online_state(cfg.online_rule, cfg.search_alpha)
    )


def unreachable_confirmation(
    project: Project, screen: GateDecision, cfg: GateConfig, n_tasks: int, screen_trials: int
) -> GateDecision | None:
    """The screen pass as an INDECISIVE decision when no gain could be confirmed: even
    Δ = +1 on every trial of the budget stays below 1/alpha_j at the level the next
    confirmation would get. Said before any trial is paid for or any level reserved."""
    level = next_level(search_ledger(project).state)
    why = unreachable(n_tasks, confirm_trials(cfg, screen_trials), level)
    if why is None:
        return None
    reason = f"INDECISIVE: the screen passed, but {why} [screen: {screen.reason}]"
    return screen.model_copy(update={"accept": False, "indecisive": True, "reason": reason})


def confirm_seed(
    screen: SplitResult,
    best: BestRecord,
    state: OnlineState,
    n_trials: int,
    screen_trials: int | None = None,
) -> int:
    """A base seed for the confirmation's ``n_trials`` seeds, disjoint from the screen's.

    Derived (so a confirmation that crashed resumes its own trials) from both fingerprints
    and the number of confirmations so far: every recorded confirmation moves j on, so the
    next one against the same pair (or the same best promoted again) gets fresh seeds.
    """
    key = f"{best.fingerprint}|{screen.fingerprint}|{state.tests}"
    seed = CONFIRM_SEED_BASE + int.from_bytes(hashlib.sha256(key.encode()).digest()[:4], "big")
    planned = max(screen.n_trials, screen_trials or 0)  # a staged screen's unrun seeds too
    if seed < screen.base_seed + planned and screen.base_seed < seed + n_trials:
        seed = screen.base_seed + planned
    return seed


def _pair(best: BestRecord, screen: SplitResult) -> tuple[str, str, str, str]:
    return (best.name, best.fingerprint, screen.candidate, screen.fingerprint)


def confirmation_lock_key(best: BestRecord, screen: SplitResult) -> str:
    """The name of the lock two gates of one pair share (see :meth:`Store.confirming`)."""
    return hashlib.sha256("|".join(_pair(best, screen)).encode()).hexdigest()[:24]


def reserve_confirmation(
    project: Project,
    best: BestRecord,
    screen: SplitResult,
    cfg: GateConfig,
    since: int,
    screen_trials: int | None = None,
) -> Reservation | None:
    """Reserve the second stage in the ledger before it runs (hold the pair's
    :meth:`Store.confirming` lock from here until :func:`record_decision`).

    Returns the reservation to run (its seeds, trials and level), or None when the current
    best changed since the gate began (the decision is then stale and nothing is reserved).
    An open reservation of the same pair (a confirmation killed before its decision, or one
    a concurrent gate is running) is returned as it is: same j, same level, same seeds, its
    stored trials reused. The pair's last confirmation, finished INDECISIVE because its
    budget ran out, is continued when this gate's budget is larger (a continuation line).
    One of the pair finished after line ``since`` (this gate's start)
    was a concurrent gate's: it comes back with ``finished`` set, to be shared. A pair whose
    confirmations all finished before this gate began gets a new j on fresh seeds.
    ``screen_trials``: the screen's trials a task as planned (a staged screen that passed
    early ran fewer); the confirmation's default trials are 3× that.
    """
    store = Store(project.state_dir)
    with store.locked():
        led = search_ledger(project)
        led.check()
        now = read_best(project)
        if now is None or _best_key(now) != _best_key(best):
            return None
        mine = [r for r in led.reservations.values() if r.pair() == _pair(best, screen)]
        for r in mine:
            if r.finished_line is None or r.finished_line > since:
                return r
        n = confirm_trials(cfg, screen_trials or screen.n_trials)
        latest = max(mine, key=lambda r: r.record.j, default=None)
        if latest is not None and latest.continuable() and n > latest.budget:
            return _continue(store, led, latest, n)
        before = led.state
        level = next_level(before)
        record = ReservationRecord(
            j=before.tests + 1,
            level=level,
            base_seed=confirm_seed(screen, best, before, n, screen_trials),
            n_trials=n,
            current=best.name,
            current_fingerprint=best.fingerprint,
            candidate=screen.candidate,
            candidate_fingerprint=screen.fingerprint,
            online=advance(before, level, False),
        )
        store.append_ledger({"kind": "reservation", **record.model_dump(mode="json")})
        return Reservation(record, led.next_line(), before)


def _continue(store: Store, led: Ledger, reservation: Reservation, budget: int) -> Reservation:
    """Reopen an INDECISIVE confirmation with a larger budget: a continuation line (the
    same j, level and seeds; nothing spent), then its stored rounds are reused."""
    r = reservation.record
    record = ContinuationRecord(
        j=r.j,
        n_trials=budget,
        current=r.current,
        current_fingerprint=r.current_fingerprint,
        candidate=r.candidate,
        candidate_fingerprint=r.candidate_fingerprint,
        online=led.state,
    )
    store.append_ledger({"kind": "continuation", **record.model_dump(mode="json")})
    reservation.reopen(budget)
    return reservation


def ledger_mark(project: Project) -> int:
    """The ledger's length now: reservations after it were made by gates running meanwhile."""
    return search_ledger(project).lines


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
    """Decide the confirmation at alpha_j = next_level(state): the trial-level e-process of
    its rounds against 1/alpha_j (:func:`honesteval.stats.rounds_decide`), or for the held-out
    part of val the task-level betting e-value (:func:`honesteval.stats.confirm_decide`) and
    its promoted gain conditional on the promotion. The power figures are the screen's (the
    gate's power, computed before it ran).

    Every confirmation that reaches a decision spends its level, INDECISIVE ones included
    (the data decided they were indecisive; a free retry would be a free look).
    """
    level = next_level(state)
    if evidence.budget is None:
        d = confirm_decide(evidence.current, evidence.candidate, evidence.cfg, level)
    else:
        d = rounds_decide(
            evidence.current, evidence.candidate, evidence.cfg, level, evidence.budget
        )
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
            **{key: getattr(screen, key) for key in SCREEN_ROUND_FIELDS},
            "reason": f"{head} on fresh seeds at alpha_{j} = {level:.3g} "
            f"({after.rule}): {d.reason} | screen: {screen.reason}",
        }
    )


#: What a staged screen records about its rounds; a confirmation's decision carries them on.
SCREEN_ROUND_FIELDS = (
    "screen_round",
    "screen_rounds",
    "screen_trials",
    "screen_trials_planned",
    "screen_stop",
    "screen_cp",
)


def planned_screen_trials(screen: GateDecision, result: SplitResult) -> int:
    """The screen's trials a task as planned: a staged screen stopped early ran fewer, but
    the confirmation's default trials (3× the screen's) and the power follow the plan."""
    return screen.screen_rounds or result.n_trials


def _best_key(best: BestRecord | None) -> tuple[str, str, str] | None:
    return None if best is None else (best.name, best.fingerprint, best.promoted_at)


def record_decision(
    project: Project,
    decision: GateDecision,
    candidate_result: SplitResult,
    expected_best: BestRecord | None,
    confirmation: Confirmation | None = None,
    reservation: Reservation | None = None,
) -> GateDecision:
    """Append the decision and promote on accept, atomically, under the project lock.

    With ``confirmation`` (a screen pass re-run on fresh seeds under ``reservation``), the
    final decision is taken here at the reserved level, finishing the reservation, and the
    promoted reference result is the confirmation's. A reservation whose best changed while
    it ran is finished as stale: its level stays spent. Every decision carries the online
    state after it. ``screened`` counts this decision and every earlier one against the same
    current best since it was promoted.
    """
    _record_decision_iv(confirmation, reservation)
    store = Store(project.state_dir)
    with store.locked():
        led = search_ledger(project)
        led.check()
        best = read_best(project)
        same = _best_key(best) == _best_key(expected_best)
        update: dict[str, Any] = {"timestamp": utc_now()}
        if reservation is not None:
            finished = _finished_elsewhere(led, reservation)
            if finished is not None:
                return finished  # a concurrent gate of the same pair finished it
            update |= _confirm_stage_fields(store, reservation)
        state, reference = led.state, candidate_result
        if same and confirmation is not None and reservation is not None:
            decision = confirm_decision(decision, confirmation, reservation.before)
            if decision.accept:
                state = credit(state, reservation.record.j)
            reference = confirmation.candidate
        update |= {
            "online": state,
            "wealth_left": wealth_left(state),
            "reference_base_seed": reference.base_seed,
            "reference_trials": reference.n_trials,
            "reference_seeding": reference.seeding,
        }
        if not same:
            update |= _stale_fields(best, decision, reservation)
        if best is not None and not decision.baseline:
            update["screened"] = _screened(led.decisions, best) + 1
        final = decision.model_copy(update=update)
        if final.accept:
            final = final.model_copy(update={"promoted": True})
        final = headlined(final)
        _append_and_promote(store, final, reference)
    return final


def _record_decision_iv(confirmation: Confirmation | None, reservation: Reservation | None) -> None:
    if (confirmation is None) != (reservation is None):
        raise ValueError("a confirmation is decided under its reservation, and only then")


def _finished_elsewhere(led: Ledger, reservation: Reservation) -> GateDecision | None:
    """The decision that already finished this reservation (None: still open); a reservation
    a ledger repair closed while the confirmation ran is an error."""
    j = reservation.record.j
    mine = led.reservations.get(j)
    if mine is None:
        raise StateError(
            f"confirmation {j}'s reservation was closed by a ledger repair while it "
            "ran: nothing recorded; gate again"
        )
    return mine.finished


def _confirm_stage_fields(store: Store, reservation: Reservation) -> dict[str, Any]:
    """What a confirmation's decision records about its stage: its j, its level, and whether it
    scored the held-out part of val."""
    return {
        "reservation": reservation.record.j,
        "stage": "confirm",
        "level": reservation.record.level,
        "holdout": store.read_holdout() is not None,
    }


def _stale_fields(
    best: BestRecord | None, decision: GateDecision, reservation: Reservation | None
) -> dict[str, Any]:
    """A gate whose current best changed while it ran rejects, whatever it measured."""
    now = "none" if best is None else repr(best.name)
    spent = (
        "no alpha spent"
        if reservation is None
        else f"the level reserved for confirmation {reservation.record.j} stays spent"
    )
    return {
        "accept": False,
        "reason": f"REJECT (stale): the current best changed to {now} while this gate "
        f"ran; nothing promoted, {spent}, gate again [{decision.reason}]",
    }


def _append_and_promote(store: Store, final: GateDecision, reference: SplitResult) -> None:
    # The log first: a crash between the two leaves the log ahead of best.json, which
    # the next gate refuses and `honesteval ledger repair` finishes (the log wins).
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


def _stored_confirmation_runs(store: Store) -> int:
    """How many confirmations left results on disk (their seeds start at
    :data:`CONFIRM_SEED_BASE`): a floor on the confirmations a lost ledger held."""
    return len({r.base_seed for r in store.read_results() if r.base_seed >= CONFIRM_SEED_BASE})


def _rebuild_best(project: Project, led: Ledger) -> BestRecord:
    """best.json as the ledger's last promotion made it, from the stored trials."""
    d = next(x for x in reversed(led.decisions) if x.promoted)
    if d.reference_base_seed is None or d.reference_trials is None:
        raise StateError(
            f"the promotion of {d.candidate!r} was recorded before the ledger kept the "
            "reference's seeds: best.json cannot be rebuilt; `honesteval ledger repair "
            '--accept-break "why"` keeps best.json as it is instead'
        )
    plan = plan_evaluation(
        project,
        d.candidate,
        "val",
        n_trials=d.reference_trials,
        base_seed=d.reference_base_seed,
        seeding=d.reference_seeding,
    )
    if plan.settings.candidate.fingerprint != d.candidate_fingerprint:
        raise StateError(
            f"{d.candidate!r} changed on disk since its promotion: best.json cannot be rebuilt "
            'from its trials; restore it, or `honesteval ledger repair --accept-break "why"`'
        )
    missing = len(plan.todo) + len(plan.to_score)
    if missing:
        raise StateError(
            f"{missing} trial(s) of the promoted result of {d.candidate!r} are not stored: "
            'best.json cannot be rebuilt; `honesteval ledger repair --accept-break "why"`'
        )
    result = finish_evaluation(plan, [])
    return BestRecord(
        name=d.candidate,
        fingerprint=d.candidate_fingerprint,
        promoted_at=d.timestamp,
        reason=d.reason,
        result=result,
    )


class BestRebuiltWarning(UserWarning):
    """best.json was behind the ledger (a crash or a full disk between the two writes) and
    was rebuilt from it."""


def best_from_ledger(project: Project) -> None:
    """best.json follows the ledger, which wins: when it is one promotion behind (a crash or a
    full disk between the decision's line and best.json), it is rebuilt from the promoted
    result's stored trials and a repair line records it, without waiting for a manual
    ``ledger repair``. Any other break is left for :meth:`Ledger.check` to refuse."""
    if [b.kind for b in search_ledger(project).breaks] == ["best-behind"]:
        message = repair_ledger(project, None)  # re-reads the ledger under the lock
        line = f"best.json was behind the search ledger: {message}"
        warnings.warn(line, BestRebuiltWarning, stacklevel=2)


def repair_ledger(project: Project, accept_break: str | None) -> str:
    """``honesteval ledger repair``: record, as a ledger line, how a break is repaired.

    Without ``accept_break`` only a crash between a promotion and best.json is repaired: the
    log wins, best.json is rebuilt from the stored trials of the promoted result. With it
    (the user's reason, recorded), best.json stays as it is and the search goes on from the
    state before the first break, counting every confirmation the rest of the log, its head
    or the stored results show as spent, and crediting no promotion after the break: never
    more alpha than an intact ledger would hold. Nothing is deleted; the broken lines stay.
    """
    store = Store(project.state_dir)
    with store.locked():
        led = search_ledger(project)
        if led.ok:
            return "the search ledger is intact: nothing to repair"
        if accept_break is None:
            return _finish_promotion(project, store, led)
        if not accept_break.strip():
            raise ConfigError("--accept-break needs a reason (it is recorded in the ledger)")
        return _accept_break(project, store, led, accept_break.strip())


def _finish_promotion(project: Project, store: Store, led: Ledger) -> str:
    """The one break repaired without a reason: a crash between a promotion's ledger line and
    best.json. The log wins: best.json is rebuilt from the promoted result's stored trials."""
    if [b.kind for b in led.breaks] != ["best-behind"]:
        raise LedgerBrokenError(
            f"{led.message()}; only an explicit `--accept-break REASON` repairs this"
        )
    best = _rebuild_best(project, led)
    record = RepairRecord(
        reason=f"finish the promotion of {best.name!r} the ledger recorded at line "
        f"{led.best_line} (a crash before best.json was written)",
        breaks=[b.message for b in led.breaks],
        action="finish-promotion",
        online=led.state,
        best=best_identity(best),
    )
    store.write_best(best)
    store.append_ledger({"kind": "repair", **record.model_dump(mode="json")})
    return f"finished the promotion of {best.name} recorded at line {led.best_line}"


def _accept_break(project: Project, store: Store, led: Ledger, reason: str) -> str:
    """Go on from the state before the first break, every confirmation seen since counted as
    spent and no promotion after the break credited; best.json stays as it is."""
    broken = [b.message for b in led.breaks]
    state = led.trusted_state()
    floor = max(led.state.tests, led.tests_floor, _stored_confirmation_runs(store))
    while state.tests < floor:
        state = advance(state, next_level(state), False)
    kept_best = read_best(project)
    record = RepairRecord(
        reason=reason,
        breaks=broken,
        action="accept-break",
        online=state,
        best=best_identity(kept_best),
    )
    store.append_ledger({"kind": "repair", **record.model_dump(mode="json")})
    kept = (
        "no current best"
        if kept_best is None
        else f"best.json ({kept_best.name}) stays the current best"
    )
    return (
        f"repair recorded in the ledger ({len(broken)} break(s) accepted: {broken[0]}); {kept}; "
        f"the search goes on at confirmation #{state.tests + 1} (alpha_j = "
        f"{next_level(state):.3g}) with {len(state.promotions)} promotion(s) credited"
    )


def drift_reference(project: Project, best: BestRecord) -> SplitResult | None:
    """What tonight's drift check compares with; None: tonight's run becomes the reference.

    A baseline was selected by nothing: its stored run is the reference. Any other promotion
    passed a test, so its stored run is biased upwards: the reference is the first re-run
    recorded after the promotion (a ``reference`` drift check), found among the stored results
    by its fingerprint and seed. None until that run exists.
    """
    if any(r.startswith("BASELINE") for r in (best.reason, reason_details(best.reason))):
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
