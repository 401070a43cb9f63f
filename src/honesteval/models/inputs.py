"""What a project gives honesteval: its tasks, candidates, what a target and a scorer return,
the input of the statistics, the gate's settings."""

from __future__ import annotations

from typing import Any

from pydantic import (
    Field,
    SerializerFunctionWrapHandler,
    StrictStr,
    field_validator,
    model_serializer,
)

from honesteval.models.base import (
    GateMode,
    NoRegression,
    OnlineRule,
    StrictModel,
    TrialStatus,
    _cluster_name,
    _Frozen,
)


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


class Paid(_Frozen):
    """What running a trial paid when that is not its own ``cost`` and ``tokens``: a target
    that runs many trials in one call (Inspect's ``eval()``) charges the whole call to the
    trial that made it, and nothing to the trials it hands the call's other outputs to.

    >>> Paid(cost=0.5, tokens=10).plus(Paid(cost=None, tokens=2))
    Paid(cost=0.5, tokens=12)
    """

    cost: float | None = None
    tokens: int | None = None

    def plus(self, other: Paid | None) -> Paid:
        """Both amounts paid (a quantity neither reported stays None)."""
        if other is None:
            return self
        cost = [c for c in (self.cost, other.cost) if c is not None]
        tokens = [t for t in (self.tokens, other.tokens) if t is not None]
        return Paid(cost=sum(cost) if cost else None, tokens=sum(tokens) if tokens else None)


class Rollout(_Frozen):
    """What one trial of the target produced."""

    output: Any = None
    tokens: int | None = None
    cost: float | None = None
    #: What producing it paid when that is not ``cost``/``tokens`` (:class:`Paid`).
    paid: Paid | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: What the adapter changed on the output's way in (bytes that were not UTF-8): the
    #: trial's record keeps these in its ``notes``.
    notes: list[str] = Field(default_factory=list)


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


class TaskTrials(_Frozen):
    """The input of :func:`honesteval.stats.aggregate` for one task: its trials in order."""

    id: str
    cluster: str | None = None
    statuses: list[TrialStatus]
    rewards: list[float | None]
    feedback: str | None = None

    _cluster = field_validator("cluster")(_cluster_name)


class Budget(StrictModel):
    """A spend cap: no trial starts once it would take the spend past ``usd`` (dollars, as
    targets and scorers report ``cost``) or ``tokens``; None: no cap on that.

    >>> Budget(usd=0.5).usd, Budget(usd=0.5).tokens
    (0.5, None)
    """

    usd: float | None = Field(default=None, gt=0)
    tokens: int | None = Field(default=None, gt=0)

    def caps(self) -> bool:
        """Whether it caps anything."""
        return self.usd is not None or self.tokens is not None


#: The confirmation runs at most this many times the screen's trials a task unless configured.
CONFIRM_TRIALS_FACTOR = 3
#: The most trials a task an evaluation runs, so the largest budget (``confirm_trials``) a
#: confirmation in rounds may be given: a gain no budget up to it confirms is rejected.
MAX_TRIALS = 10_000


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
    confirm_trials: int | None = Field(default=None, ge=1, le=MAX_TRIALS)  # None: 3 × screen
    # A held-out part of val (this share of it, frozen once in splits.json before val is
    # first scored) that screens never score and confirmations score alone: "better" then
    # means better on tasks the search never saw. None: confirmations re-run every val task.
    confirm_holdout: float | None = Field(default=None, gt=0, lt=1)
    search_alpha: float = Field(default=0.05, gt=0, lt=0.5)
    online_rule: OnlineRule = "lord++"
    # The screen of two stages in rounds of one trial a task, stopped early (stats
    # ScreenStopping): for futility when the conditional power under the trend is below
    # screen_futility, for efficacy when it passes with probability >= screen_efficacy even
    # with no further gain. None: that stop is off (both None: one unstaged screen). The
    # futility default 0.05 keeps a real gain alive at the sizes users have (12 val tasks ×
    # 10 trials, +0.2: promoted 0.84 of the time by simulation against 0.66 at 0.5, while a
    # candidate no better still stops after 3.9 of 10 rounds on average, not 9.8 unstaged);
    # bench/search_sim.py --compare-stopping measures it over whole searches. Per call it
    # costs power at a real gain (bench/screen_per_call.py, binary, the printed MDE): 12 × 10
    # promotes 0.835 staged vs 0.954 unstaged (−0.119; −0.049 even at futility 0.001), 7 × 3
    # 0.930 vs 0.942; set both None where one call's power matters more than its trials.
    screen_futility: float | None = Field(default=0.05, gt=0, lt=1)
    screen_efficacy: float | None = Field(default=0.9, gt=0, lt=1)

    def confirm_budget(self, screen_trials: int) -> int:
        """The confirmation's budget: at most this many rounds (trials a task),
        ``confirm_trials`` or :data:`CONFIRM_TRIALS_FACTOR` × the screen's trials."""
        return self.confirm_trials or CONFIRM_TRIALS_FACTOR * screen_trials

    @field_validator("no_regression", mode="before")
    @classmethod
    def _yaml_off(cls, value: Any) -> Any:
        return "off" if value is False else value
