"""The gate's steps, whoever runs the trials: plan (:func:`prepare_gate`), screen, decide,
confirm, record (SPEC §4); finalize.

The ``gate`` flow and the in-process API call :func:`run_gate` with their own way of running
evaluations (Prefect task runs, or a thread pool); the rules are here once.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from honesteval.errors import ConfigError
from honesteval.evaluation import progress
from honesteval.evaluation.plan import EvaluationPlan, plan_evaluation
from honesteval.gating.config import gate_config_for
from honesteval.gating.ledger import (
    Confirmation,
    best_from_ledger,
    check_best_unchanged,
    check_not_sealed,
    confirmation_lock_key,
    ledger_mark,
    planned_screen_trials,
    read_best,
    record_decision,
    reserve_confirmation,
    search_ledger,
    staged,
    unreachable_confirmation,
    write_seal,
)
from honesteval.gating.power import screen_power
from honesteval.gating.spend import budget_decision, spent_since
from honesteval.models import (
    COUNTED_STATUSES,
    BestRecord,
    GateConfig,
    GateDecision,
    GateRequest,
    SplitResult,
    TrialRecord,
    utc_now,
)
from honesteval.project.loader import Project
from honesteval.stats import (
    baseline_decision,
    decide,
    headlined,
    round_decision,
    rounds_decide,
    screen_stopping,
    small_val_warning,
    staged_rule,
)
from honesteval.store.state_dir import Store

#: Run these evaluations' trials (all in one runner) and return their stored results in order.
RunPlans = Callable[[Sequence[EvaluationPlan]], list[SplitResult]]
#: Run one evaluation's trials and return its stored result.
RunPlan = Callable[[EvaluationPlan], SplitResult]
#: Decide the screen: (current, candidate, cfg) -> decision.
Decide = Callable[[SplitResult, SplitResult, GateConfig], GateDecision]
#: The confirmation of a job -> [current, candidate] (:func:`run_confirmation_job` with the
#: caller's way of running evaluations).
Confirm = Callable[["ConfirmJob"], list[SplitResult]]
#: The sentence said before a confirmation runs: (screen decision, n_tasks, n_trials (the
#: budget in rounds, unless held out), base_seed, level, held out) -> text
#: (:func:`honesteval.views.text.confirmation_notice`; the views sit above the ledger, so the
#: caller hands it in).
Notice = Callable[[GateDecision, int, int, int, float, bool], str]


#: Run round k of a screen: both sides with k trials a task (the first k seeds), [current,
#: candidate]; stored trials of earlier rounds are reused.
RunRound = Callable[[int], list[SplitResult]]


def screen_in_rounds(
    run_round: RunRound, decide_screen: Decide, cfg: GateConfig, rounds: int
) -> tuple[GateDecision, list[SplitResult]]:
    """The screen: one evaluation of ``rounds`` trials a task, or, staged
    (``gate.screen_futility`` / ``screen_efficacy``), round after round of one more trial a
    task until the rule stops it (:func:`honesteval.stats.round_decision`). Round k runs the
    seeds of trials 0..k−1 and reuses the ones stored, so a re-run of an interrupted staged
    screen pays no trial twice and reaches the same decision.
    """
    rule = staged_rule(screen_stopping(cfg), rounds)
    if rule is None:
        results = run_round(rounds)
        return decide_screen(results[0], results[1], cfg), results
    for done in range(1, rounds + 1):
        results = run_round(done)
        decision = decide_screen(results[0], results[1], cfg)
        if any(r.budget is not None for r in results):
            return decision, results  # the budget stopped this round: no later one starts
        decision, stop = round_decision(decision, done, rounds, rule, results[1].n_tasks)
        if stop:
            return decision, results
    raise AssertionError("the last round always stops")  # pragma: no cover


@dataclass(frozen=True)
class GateRun:
    """What a gate call did: its recorded decision and the results it was last made on."""

    decision: GateDecision
    results: list[SplitResult]
    cfg: GateConfig


def run_gate(
    gate_plan: GatePlan,
    *,
    run_plans: RunPlans,
    confirmation_notice: Notice,
    run_confirmation: Confirm | None = None,
    decide_screen: Decide = decide,
) -> GateRun:
    """Run the gate :func:`prepare_gate` planned: its candidate against the current best on
    val, and record the decision.

    The current best and the candidate run on the same seeds (the screen); a screen pass is
    confirmed on fresh seeds (``run_confirmation``; default: ``run_plans`` on the
    confirmation's plans), reserved in the ledger before it runs and announced with
    ``confirmation_notice``, unless the gate config says ``confirm: false``. The first gate of
    a project promotes a baseline. The request's overrides set gate-config values for this gate.
    Every decision carries what the trials this call ran reported (``spent_usd``,
    ``spent_tokens``): the ledger keeps a search's spend.
    """
    project, cfg, best = gate_plan.project, gate_plan.cfg, gate_plan.best
    cand_plan, candidate = gate_plan.screen, gate_plan.request.candidate
    started = utc_now()
    since = ledger_mark(project)
    screen = _Screen(project, cfg)
    decision, results = screen.run(best, cand_plan, run_plans, decide_screen)
    cand_result = results[-1]  # the screen's: what the decision was made on
    screen_results = results

    def with_spend(d: GateDecision, *confirmation: SplitResult) -> GateDecision:
        """``d`` with this call's spend: the screen's trials it ran, and every trial of the
        confirmation (its fresh seeds ran for it alone, also in a call the budget stopped)."""
        usd, tokens = spent_since(project, [(screen_results, started), (confirmation, "")])
        return d.model_copy(update={"spent_usd": usd, "spent_tokens": tokens})

    stopped = budget_decision(project, decision, results)
    if stopped is not None:  # part of the screen never ran: nothing to decide on
        decision = record_decision(project, with_spend(stopped), cand_result, best)
        return GateRun(decision, results, cfg)
    if best is None:  # the first gate: say now when val is too small for small gains
        warning = small_val_warning(len(cand_plan.tasks), cand_plan.n_trials, cfg)
        if warning is not None:
            progress.announce(f"warning: {warning}")
    if best is None or not (cfg.confirm and decision.accept):
        decision = record_decision(project, with_spend(decision), cand_result, best)
        return GateRun(decision, results, cfg)
    # From the reservation to the decision under the pair's lock: a second gate of the
    # same pair waits, then shares this confirmation instead of spending another level.
    with Store(project.state_dir).confirming(confirmation_lock_key(best, cand_result)):
        planned = planned_screen_trials(decision, cand_result)
        held = Store(project.state_dir).read_holdout() is not None  # gate.confirm_holdout
        out_of_reach = (
            None
            if held
            else unreachable_confirmation(project, decision, cfg, len(cand_plan.tasks), planned)
        )
        reserved = (
            None
            if out_of_reach is not None
            else reserve_confirmation(project, best, cand_result, cfg, since, planned)
        )
        if reserved is None:
            decision = with_spend(out_of_reach or decision)
            decision = record_decision(project, decision, cand_result, best)
        elif reserved.finished is not None:
            decision = reserved.finished
        else:
            # said before it runs: what the confirmation costs, and why it runs at all
            r = reserved.record
            progress.announce(
                confirmation_notice(
                    decision, len(cand_plan.tasks), reserved.budget, r.base_seed, r.level, held
                )
            )
            confirm = run_confirmation or _confirmation_on(project, run_plans)
            job = ConfirmJob(best.name, candidate, reserved.budget, r.base_seed, held, cfg, r.level)
            results = confirm(job)
            stopped = budget_decision(project, decision, results)
            if stopped is not None:
                # Not decided: the reservation stays open at its level, and a rerun with a
                # larger budget continues this confirmation where it stopped.
                return GateRun(headlined(with_spend(stopped, *results)), results, cfg)
            evidence = Confirmation(results[0], results[1], cfg, None if held else reserved.budget)
            decision = with_spend(decision, *results)
            decision = record_decision(project, decision, cand_result, best, evidence, reserved)
    return GateRun(decision, results, cfg)


@dataclass(frozen=True)
class ConfirmJob:
    """A reserved confirmation to run: both sides on the reserved seeds, the held-out part of
    val at ``n_trials`` trials a task, or else in rounds of one trial a task, at most
    ``n_trials``, decided at ``level`` with ``cfg``."""

    current: str
    candidate: str
    n_trials: int
    base_seed: int
    holdout: bool
    cfg: GateConfig
    level: float


def run_confirmation_job(
    project: Project, job: ConfirmJob, run_plans: RunPlans
) -> list[SplitResult]:
    """Run ``job`` with ``run_plans``: the held-out part in one evaluation, else the rounds.

    Round k runs both sides on the first k reserved seeds (one fresh paired trial a task
    more; the stored rounds are reused, so a killed confirmation resumes where it stopped and
    pays no trial twice) until the trial-level e-process decides
    (:func:`honesteval.stats.rounds_decide`) or the budget ends. Each round says the evidence
    so far. Returns the last evaluation's [current, candidate].
    """

    def run_round(k: int) -> list[SplitResult]:
        plans = [
            plan_evaluation(
                project,
                name,
                "val",
                n_trials=k,
                base_seed=job.base_seed,
                holdout=job.holdout,
                seeding="per_task",  # a round's tasks independent (see honesteval.models.seeds)
            )
            for name in (job.current, job.candidate)
        ]
        return run_plans(plans)

    if job.holdout:
        return run_round(job.n_trials)
    for k in range(1, job.n_trials + 1):
        results = run_round(k)
        if any(r.budget is not None for r in results):
            return results  # the budget stopped this round: the gate decides nothing
        d = rounds_decide(results[0], results[1], job.cfg, job.level, job.n_trials)
        progress.announce(f"confirmation round {k}/{job.n_trials}: {d.reason}")
        if d.confirm_stop is not None:
            return results
    raise AssertionError("the last round always stops")  # pragma: no cover


@dataclass(frozen=True)
class _Screen:
    """The first stage: the candidate alone for a project's first gate (its baseline), else
    the current best and the candidate on the same seeds, decided and its power measured."""

    project: Project
    cfg: GateConfig

    def run(
        self,
        best: BestRecord | None,
        cand_plan: EvaluationPlan,
        run_plans: RunPlans,
        decide_screen: Decide,
    ) -> tuple[GateDecision, list[SplitResult]]:
        if best is None:
            results = run_plans([cand_plan])
            return baseline_decision(results[0], self.cfg), results
        project, cfg = self.project, self.cfg
        unstaged = staged_rule(screen_stopping(cfg), cand_plan.n_trials) is None

        def run_round(k: int) -> list[SplitResult]:
            # Both evaluations in one runner (one Dask cluster), `decide` downstream of both.
            # Each round is planned when it starts, so it reuses the rounds before it; an
            # unstaged screen's candidate plan is the one prepare_gate made.
            seed = cand_plan.base_seed  # round k: the first k of the screen's seeds
            plans = [
                plan_evaluation(project, best.name, "val", n_trials=k, base_seed=seed),
                cand_plan
                if unstaged
                else plan_evaluation(
                    project, cand_plan.candidate, "val", n_trials=k, base_seed=seed
                ),
            ]
            return run_plans(plans)

        screen, results = screen_in_rounds(run_round, decide_screen, cfg, cand_plan.n_trials)
        current, new = results
        return screen_power(project, staged(screen, cfg), current, new, cfg), results


def _confirmation_on(project: Project, run_plans: RunPlans) -> Confirm:
    """The default confirmation: :func:`run_confirmation_job` with ``run_plans``."""

    def confirm(job: ConfirmJob) -> list[SplitResult]:
        return run_confirmation_job(project, job, run_plans)

    return confirm


def run_finalize(
    project: Project,
    candidate: str | None,
    *,
    run_plan: RunPlan,
    n_trials: int | None = None,
    plan: EvaluationPlan | None = None,
) -> SplitResult:
    """Score the sealed test split once, then record the seal.

    The seal is written only after the result: a run that crashes before scoring does not
    burn it. A second finalize, or one started while another runs, raises TestSealedError.
    ``plan``: the test split's, made already by the caller (the seal is checked again under
    the lock before it runs).
    """
    with Store(project.state_dir).finalizing():
        check_not_sealed(project)
        if plan is None:
            plan = plan_evaluation(project, candidate, "test", n_trials=n_trials, allow_sealed=True)
        result = run_plan(plan)
        write_seal(project, result)
    return result


@dataclass(frozen=True)
class GatePlan:
    """A gate planned, before it spends anything (:func:`prepare_gate`): what the notice says
    and what :func:`run_gate` runs, the one planning pass of a gate."""

    project: Project
    request: GateRequest
    cfg: GateConfig
    #: the current best (None: the project's first gate, which promotes a baseline)
    best: BestRecord | None
    #: the candidate's screen evaluation (unstaged, the one the screen runs)
    screen: EvaluationPlan


def prepare_gate(project: Project, request: GateRequest) -> GatePlan:
    """Every check a gate run needs before it spends anything, and its plan."""
    candidate = request.candidate
    cfg = gate_config_for(project, request.overrides)
    best_from_ledger(project)
    search_ledger(project).check()
    freeze_holdout(project, cfg)
    best = read_best(project)
    plan = plan_evaluation(
        project, candidate, "val", n_trials=request.trials, base_seed=request.base_seed
    )
    if best is not None:
        if best.name == candidate and best.fingerprint == plan.settings.candidate.fingerprint:
            raise ConfigError(f"{candidate!r} is already the current best")
        check_best_unchanged(project, best)
    return GatePlan(project, request, cfg, best, plan)


def best_screen_trials(
    project: Project, best: BestRecord, plan: EvaluationPlan
) -> tuple[list[TrialRecord], int]:
    """The current best's stored counted trials on the screen's (task, seed) pairs, and how
    many of those pairs it still has to run."""
    stored = Store(project.state_dir).read_trials("val", best.name, best.fingerprint)
    wanted = [(t.id, plan.seed(t.id, k)) for t in plan.tasks for k in range(plan.n_trials)]
    kept = [r for key in wanted if (r := stored.get(key)) and r.status in COUNTED_STATUSES]
    return kept, len(wanted) - len(kept)


def screen_is_imported_only(plan: EvaluationPlan, best_reused: Sequence[TrialRecord]) -> bool:
    """Every stored trial the screen about to run reuses, on both sides, was imported
    (``honesteval import``): run outside honesteval, with no seed contract. Its confirmation
    then needs fresh trials, run by the project's adapter. ``best_reused``: the current best's
    trials the screen reuses (:func:`best_screen_trials`)."""
    reused = [*plan.reused.values(), *best_reused]
    return bool(plan.reused) and bool(best_reused) and all(r.imported for r in reused)


def freeze_holdout(project: Project, cfg: GateConfig) -> list[str] | None:
    """The held-out val tasks of the confirmations: frozen once, at the first gate with
    ``gate.confirm_holdout`` set, in splits.json beside the frozen split (which never moves).

    Refused once val was scored (stored val results or ledger lines): the search has then
    seen every val task, and no part of it is held out any more.
    """
    store = Store(project.state_dir)
    held = store.read_holdout()
    if held is not None or cfg.confirm_holdout is None:
        return held
    seen = search_ledger(project).lines or any(
        r["split"] == "val" for r in store.read_result_summaries()
    )
    if seen:
        raise ConfigError(
            "gate.confirm_holdout: val was already scored in this project, so no part of it "
            "is unseen; a held-out part is frozen before the first val run (remove the key, or "
            "use it in a project whose val was never scored)"
        )
    val = project.frozen_split()["val"]
    n = round(cfg.confirm_holdout * len(val))
    if n < 2 or len(val) - n < 2:
        raise ConfigError(
            f"gate.confirm_holdout {cfg.confirm_holdout:g}: {n} of {len(val)} val tasks; the "
            "held-out part and the screened part need at least 2 tasks each"
        )
    rng = random.Random(f"{project.config.splits.seed}|confirm_holdout")
    return store.freeze_holdout(sorted(rng.sample(val, n), key=val.index))
