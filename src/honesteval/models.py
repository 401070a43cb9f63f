"""The data honesteval passes around and writes to disk (pydantic 2, frozen)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    StrictStr,
    field_validator,
    model_serializer,
)

TrialStatus = Literal["ok", "failed", "infra_error", "scorer_error"]
# Statuses whose reward counts in the mean: "ok" (the scorer's reward) and "failed" (a
# candidate failure, scored at the project's failure_reward). The rest are missing data.
COUNTED_STATUSES: frozenset[str] = frozenset({"ok", "failed"})
MISSING_STATUSES: frozenset[str] = frozenset({"infra_error", "scorer_error"})
SplitName = Literal["train", "val", "test"]
#: Whose time a target's ``timeout_s`` is (the project's ``timeout_is``).
TimeoutIs = Literal["failure", "missing"]
# Every reward lies in [0, 1] (SPEC §2): intervals stay inside it, and the gate's worst case
# imputes its ends for missing tasks.
REWARD_RANGE = (0.0, 1.0)
StderrMethod = Literal["task", "clustered", "combined"]


EMPTY_CLUSTER = "an empty cluster name is not a cluster: omit 'cluster' for a task of its own"


def cluster_key(task_id: str, cluster: str | None) -> str:
    """The independent unit a task is drawn in: its cluster, or, without one, the task alone.

    The one rule for "a task without a cluster" (``aggregate``'s clustered SE and interval and
    the gate's paired SE both use it). The prefixes keep a task id from clashing with a
    cluster name. An empty name is refused: it would silently merge unrelated tasks.

    >>> cluster_key("t1", None), cluster_key("t1", "algebra")
    ('t:t1', 'c:algebra')
    """
    if cluster is None:
        return f"t:{task_id}"
    if not cluster:
        raise ValueError(EMPTY_CLUSTER)
    return f"c:{cluster}"


def _cluster_name(cluster: str | None) -> str | None:
    if cluster == "":
        raise ValueError(EMPTY_CLUSTER)
    return cluster


def utc_now() -> str:
    """An ISO-8601 UTC timestamp with microseconds (sortable as text)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Task(_Frozen):
    """One item of the benchmark."""

    id: StrictStr
    input: Any = None
    target: Any = None
    cluster: StrictStr | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    _cluster = field_validator("cluster")(_cluster_name)


class Candidate(_Frozen):
    """A named version of the thing under evaluation: a directory or a file."""

    name: str
    path: str
    fingerprint: str


class Rollout(_Frozen):
    """What one trial of the target produced."""

    output: Any = None
    tokens: int | None = None
    cost: float | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Score(_Frozen):
    """What the scorer made of a rollout. ``errored=True`` means "could not grade" (the trial
    is a ``scorer_error``, missing data); ``failed=True`` means the candidate broke a rule of
    its evaluation that it was able to break, e.g. edited the judge's rubric (the trial is
    ``failed``, scored at ``failure_reward`` and counted, like a target that raised)."""

    reward: float | None = None
    feedback: str | None = None
    errored: bool = False
    failed: bool = False
    reason: str | None = None
    tokens: int | None = None
    cost: float | None = None
    details: dict[str, Any] = Field(default_factory=dict)

    @model_serializer(mode="wrap")
    def _without_unset_failure(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Stored trial records keep the bytes they had before ``failed`` existed (the format is
        # pinned by tests/unit/test_golden_fingerprints.py); a reader takes its absence as False.
        dumped: dict[str, Any] = handler(self)
        if not self.failed:
            dumped.pop("failed", None)
        return dumped


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

    @model_serializer(mode="wrap")
    def _without_unset_timeout(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A trial that did not run out of time keeps the bytes records had before
        # ``timeout_s`` existed (tests/unit/test_golden_fingerprints.py); absent reads as None.
        dumped: dict[str, Any] = handler(self)
        if self.timeout_s is None:
            dumped.pop("timeout_s", None)
        return dumped


class TaskTrials(_Frozen):
    """The input of :func:`honesteval.stats.aggregate` for one task: its trials in order."""

    id: str
    cluster: str | None = None
    statuses: list[TrialStatus]
    rewards: list[float | None]
    feedback: str | None = None

    _cluster = field_validator("cluster")(_cluster_name)


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


class SplitResult(_Frozen):
    """One candidate on one split: the reward with its coverage and its standard error."""

    candidate: str = ""
    fingerprint: str = ""
    split: SplitName = "val"
    base_seed: int = 0
    n_trials: int = 0
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
    ci95_t: tuple[float, float] | None = None  # Student t interval (df n − 1, or C − 1)
    n_clusters: int | None = None
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
    #: trials whose target this run called
    trials_ran: int = 0
    tokens: int | None = None
    cost: float | None = None
    step_seconds: dict[str, float] | None = None
    #: fingerprint of the scorer of this evaluation (see ``honesteval rescore``)
    scorer: str | None = None


OnlineRule = Literal["lord++", "fallback", "e-lond"]


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


GateStage = Literal["single", "screen", "confirm"]
ScreenStop = Literal["futility", "efficacy"]
GateMode = Literal["paired", "significant", "threshold", "strict"]
NoRegression = Literal["report", "passed", "any", "off"]


class GateConfig(_Frozen):
    """How the gate decides (SPEC §4). ``alpha``, when set, replaces ``k_se`` as the bar.

    ``no_regression``: ``report`` (default) lists the tasks the best passed and the candidate
    now fails in every decision without vetoing; ``passed`` and ``any`` veto an accept;
    ``off`` lists nothing. YAML's unquoted ``off`` (read as ``false``) means ``off``.
    """

    mode: GateMode = "paired"
    k_se: float = Field(default=1.0, gt=0)
    alpha: float | None = Field(default=None, gt=0, lt=0.5)
    threshold: float = 0.0
    min_coverage: float = Field(default=0.6, ge=0, le=1)
    no_regression: NoRegression = "report"
    pass_threshold: float = Field(default=1.0, ge=0, le=1)
    # Search-level error control (two stages): a screen pass is confirmed on fresh seeds at
    # the level alpha_j the online rule assigns; confirm=False keeps the single-stage gate.
    confirm: bool = True
    confirm_trials: int | None = Field(default=None, ge=1)  # None: 3 × the screen's trials
    # A held-out part of val (this share of it, frozen once in splits.json before val is
    # first scored) that screens never score and confirmations score alone: "better" then
    # means better on tasks the search never saw. None: confirmations re-run every val task.
    confirm_holdout: float | None = Field(default=None, gt=0, lt=1)
    search_alpha: float = Field(default=0.05, gt=0, lt=0.5)
    online_rule: OnlineRule = "lord++"
    # The screen of two stages in rounds of one trial a task, stopped early (stats
    # ScreenStopping): for futility when the conditional power under the trend is below
    # screen_futility, for efficacy when it passes with probability >= screen_efficacy even
    # with no further gain. None: that stop is off (both None: one unstaged screen).
    screen_futility: float | None = Field(default=None, gt=0, lt=1)
    screen_efficacy: float | None = Field(default=None, gt=0, lt=1)

    @field_validator("no_regression", mode="before")
    @classmethod
    def _yaml_off(cls, value: Any) -> Any:
        return "off" if value is False else value


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
    # The confirmation's betting e-value (promote iff e_value >= 1/level); the gain's
    # selection-adjusted (conditional, median-unbiased) estimate that gain_ci95 surrounds.
    e_value: float | None = None
    gain_estimate: float | None = None
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


class DecisionRecord(GateDecision):
    """One line of ``decisions.jsonl``: a :class:`GateDecision` as recorded. Fields this
    version does not know (written by a later one) are kept, so the report still shows them;
    every field added since the first version has a default, so old lines read too."""

    model_config = ConfigDict(frozen=True, extra="allow")


class ReservationRecord(_Frozen):
    """A ledger line written before a confirmation runs: its j, level alpha_j and seeds.

    The level is spent from here on, whatever happens to the run (killed, stale, abandoned);
    the gate of the same pair (current best, candidate, both by fingerprint) that comes next
    finishes it on the same seeds, at the same level.
    """

    j: int = Field(ge=1)
    level: float = Field(gt=0, lt=1)
    base_seed: int
    n_trials: int = Field(ge=1)
    current: str
    current_fingerprint: str
    candidate: str
    candidate_fingerprint: str
    timestamp: str = Field(default_factory=utc_now)
    online: OnlineState  # the state after reserving (j counted, its level spent)


class BestIdentity(_Frozen):
    """Which best.json a ledger line vouches for."""

    name: str
    fingerprint: str
    promoted_at: str


class RepairRecord(_Frozen):
    """A ledger line written by ``honesteval ledger repair``: what was found broken, why the
    user accepted it, and the state the search goes on from (never more generous than the
    ledger before the break)."""

    reason: str
    breaks: list[str]
    action: Literal["accept-break", "finish-promotion"]
    online: OnlineState
    best: BestIdentity | None
    timestamp: str = Field(default_factory=utc_now)


class Seal(_Frozen):
    """seal.json: the test split was scored once, for ``candidate``; finalize is spent."""

    candidate: StrictStr
    sealed_at: StrictStr
    fingerprint: str = ""
    reward: float | None = None
    stderr: float | None = None
    coverage: float | None = None
    n_tasks: int | None = None


class BestRecord(_Frozen):
    """best.json: the current best and the val result it was promoted on."""

    name: str
    fingerprint: str
    promoted_at: str
    reason: str
    result: SplitResult


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


class DriftRecord(DriftReport):
    """One line of ``drift_checks.jsonl``: a :class:`DriftReport` as recorded (fields of a
    later version kept, like :class:`DecisionRecord`)."""

    model_config = ConfigDict(frozen=True, extra="allow")
