"""What honesteval computes: one trial, one split's result, the gate's decision, a drift check,
and the search-level error control state a decision carries."""

from __future__ import annotations

import gc
from collections.abc import Iterable
from typing import Any, Literal

from pydantic import Field, PrivateAttr, SerializerFunctionWrapHandler, model_serializer

from honesteval.models.base import (
    ConfirmStop,
    GateMode,
    GateStage,
    OnlineRule,
    ScreenStop,
    SplitName,
    StderrMethod,
    TrialStatus,
    _Frozen,
    utc_now,
)
from honesteval.models.inputs import Budget
from honesteval.models.seeds import Seeding, trial_seed


class TrialRecord(_Frozen):
    """Everything about one trial, whatever its status; one JSON file on disk."""

    task_id: str
    candidate: str
    fingerprint: str
    split: SplitName
    trial: int
    seed: int
    status: TrialStatus
    reward: float | None = None
    feedback: str | None = None
    error: str | None = None
    errors: list[str] = Field(default_factory=list)
    attempts: int = 1
    started_at: str
    target_s: float = 0.0
    score_s: float = 0.0
    rollout: Any = None
    score: dict[str, Any] | None = None
    tokens: int | None = None
    cost: float | None = None
    notes: list[str] = Field(default_factory=list)  # e.g. "output … cut to the first 1 MB"
    context: str | None = None  # scoring fingerprint + task content; reuse needs a match
    #: Fingerprint of the scorer that graded this trial (None: not graded, or before rescore).
    scorer: str | None = None
    #: The ``timeout_s`` this trial's target ran past (None: it did not run out of time).
    timeout_s: float | None = None
    #: The log this trial was imported from (``honesteval import inspect``): it ran outside
    #: honesteval, so its seed is where its epoch is stored, not a seed the run was given.
    imported: str | None = None
    #: The output as the target returned it, in memory only (never stored, kept across
    #: ``model_copy`` and pickling to a Dask worker): the scorer grades it, not ``rollout``,
    #: which may be cut (``notes`` says so). Empty once the record is read back from disk.
    _returned: tuple[Any, ...] = PrivateAttr(default=())

    def with_returned(self, output: Any) -> TrialRecord:
        """This record, holding the output as returned for its scorer."""
        self._returned = (output,)
        return self

    @property
    def output_to_score(self) -> tuple[Any, ...]:
        """``(output,)`` as the target returned it, or as stored when what is stored is whole;
        ``()`` when only a cut copy is left (scoring it would grade the wrong output)."""
        if self._returned:
            return self._returned
        return () if output_was_cut(self.notes) else (self.rollout,)

    @model_serializer(mode="wrap")
    def _without_unset_fields(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A trial that did not run out of time, and one honesteval ran, keep the bytes records
        # had before ``timeout_s`` and ``imported`` existed
        # (tests/unit/test_golden_fingerprints.py); absent reads as None.
        dumped: dict[str, Any] = handler(self)
        for name in ("timeout_s", "imported"):
            if getattr(self, name) is None:
                dumped.pop(name, None)
        return dumped


#: How a record's note on a cut output starts (``evaluation.trial.storable_output``).
OUTPUT_CUT_NOTE = "output of "


def output_was_cut(notes: Iterable[str]) -> bool:
    """Whether these notes say the stored output is cut."""
    return any(n.startswith(OUTPUT_CUT_NOTE) and " cut to the first " in n for n in notes)


class TaskResult(_Frozen):
    """One task of a :class:`SplitResult`, scored or not.

    ``n_ok`` counts the trials whose reward counts (``ok`` and ``failed``); ``rewards`` holds
    the reward each counted trial contributed (``failure_reward`` for a failed one).
    """

    id: str
    cluster: str | None = None
    mean: float | None
    se: float | None
    n_ok: int
    statuses: list[TrialStatus]
    rewards: list[float | None]
    feedback: str | None = None

    @property
    def scored(self) -> bool:
        return self.n_ok > 0

    @classmethod
    def trusted(cls, rows: Iterable[dict[str, Any]]) -> list[TaskResult]:
        """Task results from values already validated, each row holding every field: the
        instances ``model_construct`` builds (same fields, same ``model_fields_set``) without
        its per-field alias and default handling, which was most of ``aggregate``'s cost at
        10,000 tasks. No validation: only for values that passed it (``aggregate``'s input).

        >>> [r] = TaskResult.trusted([dict(id="a", cluster=None, mean=1.0, se=0.0, n_ok=1,
        ...                                statuses=["ok"], rewards=[1.0], feedback=None)])
        >>> r == TaskResult(id="a", mean=1.0, se=0.0, n_ok=1, statuses=["ok"], rewards=[1.0])
        True
        """
        new, set_attribute = cls.__new__, object.__setattr__
        # Every row sets every field: one set serves them all (a third fewer objects). The
        # model is frozen, so pydantic never changes it in place (``model_copy`` copies it).
        fields_set = set(cls.model_fields)
        results = []
        # The cycle collector paused meanwhile: these objects form no cycle, and the passes
        # their allocation sets off walk the whole heap (~70 % of the time at 100,000 tasks).
        collecting = gc.isenabled()
        gc.disable()
        try:
            for values in rows:
                result = new(cls)
                set_attribute(result, "__dict__", values)
                set_attribute(result, "__pydantic_fields_set__", fields_set)
                set_attribute(result, "__pydantic_extra__", None)
                set_attribute(result, "__pydantic_private__", None)
                results.append(result)
        finally:
            if collecting:
                gc.enable()
        return results


class BudgetStop(_Frozen):
    """The spend cap stopped an evaluation: its trials that never started are missing data
    (no record, never a zero). ``spent_*``: what the command had spent when it stopped,
    earlier gates of a search included."""

    budget: Budget
    spent_usd: float | None = None
    spent_tokens: int | None = None
    #: the cap was the project's ``search_budget`` (spent: the search's, earlier gates too)
    search: bool = False


class SplitResult(_Frozen):
    """One candidate on one split: the reward with its coverage and its standard error."""

    candidate: str = ""
    fingerprint: str = ""
    split: SplitName = "val"
    base_seed: int = 0
    n_trials: int = 0
    #: how trial k of a task got its seed (:func:`~honesteval.models.seeds.trial_seed`):
    #: ``base_seed + k`` for every task, or per task (the gate's confirmations)
    seeding: Seeding = "shared"
    subset: bool = False
    reward: float | None
    stderr: float | None
    stderr_method: StderrMethod
    stderr_trials: float | None
    ci95: tuple[float, float] | None  # the reported interval: valid at any n, inside [0, 1]
    n_tasks: int
    n_scored: int
    coverage: float
    empty: bool
    trials_planned: int
    trials_ok: int
    trials_infra_error: int
    trials_scorer_error: int
    trials_failed: int = 0
    ci95_method: str | None = None  # how ``ci95`` was made
    ci95_t: tuple[float, float] | None = None  # Student t interval (df ``ci95_t_df``)
    #: the t interval's df: n − 1, or with clusters the CR2 SE's Bell–McCaffrey df
    ci95_t_df: float | None = None
    n_clusters: int | None = None
    #: with clusters, (Σn_c)²/Σn_c²: as many equal clusters carry as much information
    effective_clusters: float | None = None
    pass_hat_k: dict[int, float]
    #: Whenever coverage < 1: the reward over every task asked with the tasks missing whole at
    #: the reward range's low end, and at its high end (the true one lies between).
    reward_bounds: tuple[float, float] | None = None
    #: pass^k likewise, for each k some task lacks (no counted trial, or fewer than k).
    pass_hat_k_bounds: dict[int, tuple[float, float]] = Field(default_factory=dict)
    pass_at_k: dict[int, float]
    tasks_k: dict[int, int]
    per_task: list[TaskResult]
    warnings: list[str]
    pass_threshold: float = 1.0
    started_at: str | None = None
    finished_at: str | None = None
    wall_s: float | None = None
    #: trials taken as they were on disk (nothing ran for them)
    trials_reused: int = 0
    #: stored rollouts graded by this run (a run stopped before their score; ``rescore``):
    #: their targets did not run again
    trials_graded: int = 0
    #: target calls of this run, a trial called twice counted twice (``trials_repeated``)
    trials_ran: int = 0
    #: trials whose target this run called a second time: the Dask worker that began them was
    #: lost before their rollout was stored (what it stored is never called again)
    trials_repeated: int = 0
    tokens: int | None = None
    cost: float | None = None
    step_seconds: dict[str, float] | None = None
    #: fingerprint of the scorer of this evaluation (see ``honesteval rescore``)
    scorer: str | None = None
    #: planned trials that never started: the command's budget was reached (``budget``)
    trials_not_started: int = 0
    budget: BudgetStop | None = None

    def seeds(self, task_id: str) -> list[int]:
        """The seeds of ``task_id``'s trials 0..n_trials−1 in this result."""
        return [trial_seed(self.base_seed, task_id, k, self.seeding) for k in range(self.n_trials)]


class OnlineState(_Frozen):
    """The search-level error control after ``tests`` confirmations (the ledger's state).

    ``promotions`` holds the 1-based indices j of the confirmations that promoted (the
    procedure's rejection times); ``spent`` is Σ alpha_i over every confirmation so far, and
    ``last_level`` the alpha_j of the last one (the FWER fallback carries it on a promotion).
    """

    rule: OnlineRule = "lord++"
    alpha: float = Field(default=0.05, gt=0, lt=1)
    tests: int = Field(default=0, ge=0)
    promotions: list[int] = Field(default_factory=list)
    spent: float = Field(default=0.0, ge=0)
    last_level: float | None = None


class GateDecision(_Frozen):
    """What the gate decided, with every number it decided on (SPEC §4)."""

    accept: bool
    indecisive: bool = False
    reason: str
    mode: GateMode
    delta: float | None = None
    se: float | None = None
    bar: float | None = None
    bar_multiplier: float | None = None
    n_paired: int = 0
    regressions: list[str] = Field(default_factory=list)
    unverified: list[str] = Field(default_factory=list)
    rerun: list[str] = Field(default_factory=list)
    worst_case_delta: float | None = None
    mde: float | None = None
    current: str | None = None
    current_fingerprint: str | None = None
    candidate: str
    candidate_fingerprint: str
    current_coverage: float | None = None
    candidate_coverage: float | None = None
    current_reward: float | None = None
    candidate_reward: float | None = None
    #: trials each side's own code failed (its exceptions and timeouts, scored at
    #: ``failure_reward``), and the candidate's trials asked: the reason's first sentence
    #: names a candidate that crashed where the best did not
    current_failed: int | None = None
    candidate_failed: int | None = None
    candidate_trials: int | None = None
    baseline: bool = False
    promoted: bool = False
    screened: int | None = None
    timestamp: str = Field(default_factory=utc_now)
    # Two stages: which stage decided; for a confirmation, its level alpha_j, the online
    # state after it, the screen it confirmed and the selection-adjusted gain (its own Δ, CI).
    stage: GateStage | None = None
    level: float | None = None
    online: OnlineState | None = None
    wealth_left: float | None = None
    screen_delta: float | None = None
    screen_reason: str | None = None
    confirm_base_seed: int | None = None
    gain_ci95: tuple[float, float] | None = None
    #: the ledger's confirmation j this decision finishes (reserved before it ran)
    reservation: int | None = None
    #: the confirmation scored only the held-out part of val (``gate.confirm_holdout``)
    holdout: bool = False
    #: the seeds of the result that becomes the reference on a promotion: with the stored
    #: trials, ``honesteval ledger repair`` rebuilds best.json from them after a crash
    reference_base_seed: int | None = None
    reference_trials: int | None = None
    #: how the reference's trials got their seeds (a confirmation's: per task)
    reference_seeding: Seeding = "shared"
    # The confirmation's betting e-value and the threshold it had to reach (1/level: promote
    # iff e_value >= e_value_bar; a confirmation's ``bar`` is None, ``bar`` is always in Δ);
    # the gain's selection-adjusted (conditional, median-unbiased) estimate in gain_ci95.
    e_value: float | None = None
    e_value_bar: float | None = None
    gain_estimate: float | None = None
    #: the command's budget kept trials from starting: nothing was decided on part of them
    budget: BudgetStop | None = None
    #: what the trials this gate ran reported (None: none reported it); the ledger's sum over
    #: a search's decisions is the search's spend (``search_budget``)
    spent_usd: float | None = None
    spent_tokens: int | None = None
    # The two-stage gate's power: ``mde`` is promoted with 80 % probability by the screen and
    # a confirmation at ``mde_level`` (alpha_j); ``mde_later`` at ``mde_later_level``, the
    # level nine confirmations on if none of them promotes.
    mde_level: float | None = None
    mde_later: float | None = None
    mde_later_level: float | None = None
    # A staged screen (gate.screen_futility / screen_efficacy): the rounds it ran of the
    # rounds planned (one trial a task each), the candidate's trials it ran of those planned,
    # why it stopped early (None: it ran every round) and the conditional power that decided.
    screen_round: int | None = None
    screen_rounds: int | None = None
    screen_trials: int | None = None
    screen_trials_planned: int | None = None
    screen_stop: ScreenStop | None = None
    screen_cp: float | None = None
    # The default confirmation runs in rounds (one fresh paired trial a task each) until its
    # trial-level e-process decides: the rounds it ran of its budget (confirm_trials) and why
    # it stopped (stats.rounds_decide); None for the task-level (held-out) confirmation.
    confirm_rounds: int | None = None
    confirm_budget: int | None = None
    confirm_stop: ConfirmStop | None = None
    #: the rounds confirmation's 95 % interval for the mean paired Δ a trial on these val
    #: tasks, valid at its data-chosen stop (a betting confidence sequence, stats._gain_sequence);
    #: its raw Δ (``delta``) is biased upwards by the stop
    gain_cs95: tuple[float, float] | None = None


class DriftReport(_Frozen):
    """``reevaluate-best``: the current best re-run on val with fresh seeds, against its record."""

    # "reference": the first re-run after a promotion selected by a test, recorded as the
    # unselected reference later checks compare with (no test that night)
    status: Literal["stable", "drifted", "indecisive", "reference"]
    message: str
    candidate: str
    fingerprint: str
    stored_reward: float | None
    new_reward: float | None
    delta: float | None = None
    se: float | None = None
    bar: float | None = None
    n_paired: int = 0
    stored_base_seed: int
    new_base_seed: int
    timestamp: str = Field(default_factory=utc_now)
