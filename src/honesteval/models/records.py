"""The lines and files of the ledger (``decisions.jsonl``, ``best.json``, ``seal.json``,
``drift_checks.jsonl``), as written to ``.honesteval/``."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, StrictStr

from honesteval.models.base import _Frozen, utc_now
from honesteval.models.results import DriftReport, GateDecision, OnlineState, SplitResult


class DecisionRecord(GateDecision):
    """One line of ``decisions.jsonl``: a :class:`GateDecision` as recorded. Fields this
    version does not know (written by a later one) are kept, so the report still shows them;
    every field added since the first version has a default, so old lines read too."""

    model_config = ConfigDict(frozen=True, extra="allow")


class _ConfirmationLine(_Frozen):
    """What every ledger line about a confirmation names: its j, the pair (current best and
    candidate, both by fingerprint), when, and the online state after the line."""

    j: int = Field(ge=1)
    current: str
    current_fingerprint: str
    candidate: str
    candidate_fingerprint: str
    timestamp: str = Field(default_factory=utc_now)
    online: OnlineState


class ReservationRecord(_ConfirmationLine):
    """A ledger line written before a confirmation runs: its j, level alpha_j and seeds.

    The level is spent from here on, whatever happens to the run (killed, stale, abandoned);
    the gate of the same pair (current best, candidate, both by fingerprint) that comes next
    finishes it on the same seeds, at the same level. ``online``: the state after reserving
    (j counted, its level spent).
    """

    level: float = Field(gt=0, lt=1)
    base_seed: int
    n_trials: int = Field(ge=1)


class ContinuationRecord(_ConfirmationLine):
    """A ledger line reopening confirmation j, whose budget ran out in between (INDECISIVE),
    with a larger budget ``n_trials``: the same level, seeds and e-process go on (optional
    continuation keeps a test supermartingale's level), so no level is spent twice;
    ``online`` is unchanged."""

    n_trials: int = Field(ge=1)


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


class DriftRecord(DriftReport):
    """One line of ``drift_checks.jsonl``: a :class:`DriftReport` as recorded (fields of a
    later version kept, like :class:`DecisionRecord`)."""

    model_config = ConfigDict(frozen=True, extra="allow")
