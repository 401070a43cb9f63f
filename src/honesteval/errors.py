"""Exceptions.

Two families, kept apart on purpose:

* :class:`HonestevalError` and its subclasses are *the user's* mistakes (a bad project file,
  an unknown candidate, a sealed split). The CLI prints them as one line and exits with 2.
* :class:`InfraError` and its subclasses are *infrastructure* faults raised by a target or an
  adapter. A trial that ends in one after its retries is ``infra_error``: missing data, never a
  zero.

Anything else a target raises (any exception, even ``SystemExit``) is the candidate's own
failure: the trial is ``failed``, scored at ``failure_reward`` and counted (SPEC §2, revised).
:class:`CandidateFailure` is how an adapter says so explicitly (a command that exits non-zero).

:class:`TargetTimeout` belongs to neither family: the target ran past ``timeout_s``, and the
project's ``timeout_is`` says whose time that was (``failure``, the default: the candidate's, a
``failed`` trial, never retried; ``missing``: the infrastructure's, retried like an
``InfraError``). A service that does not answer in time (:class:`ServiceTimeout`: an HTTP
connect or read timeout) is always infrastructure.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import ValidationError

    from honesteval.models import Paid


class HonestevalError(Exception):
    """A problem with what the user asked for; reported as one line, exit code 2."""


class ConfigError(HonestevalError):
    """The project file, a candidate or a parameter is invalid."""


class StateError(HonestevalError):
    """The project's state (``.honesteval/``) does not allow what was asked: nothing stored
    yet to work from, or stored state that contradicts the request. Not a configuration
    mistake: fixing the project file would not help."""


class StateFileError(StateError):
    """A file in ``.honesteval/`` is corrupt or of the wrong shape. Never silently reset: a
    lost best.json would make the next challenger the baseline, a lost seal.json would reopen
    finalize, a lost splits.json would move train tasks into the sealed test split."""


class EvaluatorTampered(StateError):
    """An evaluator file (a step, a judge's prompt or rubric) still differs from the last
    clean snapshot after a run saw a candidate change it. No evaluation runs until the files
    are restored, or the user deletes the record to accept them."""


class LedgerBrokenError(StateError):
    """The search ledger (``decisions.jsonl`` with its head, and best.json) was torn inside,
    edited, rolled back, lost, or disagrees with best.json. No gate runs until an explicit,
    recorded ``honesteval ledger repair``."""


class SealedSplitError(HonestevalError):
    """Only ``finalize`` may score the sealed ``test`` split."""


class TestSealedError(HonestevalError):
    """``finalize`` already scored the test split once; the seal is burnt."""

    __test__ = False  # not a pytest test class, whatever its name says


class GateSplitError(HonestevalError):
    """The gate only ever reads ``val`` results."""


class NotGateable(HonestevalError):
    """A subset run or an empty split cannot be gated."""


class InfraError(Exception):
    """An infrastructure fault: the target never produced a gradeable run. Retried.

    ``paid``: what the failed call paid all the same (:class:`honesteval.models.Paid`),
    when the target knows (a batched call whose own sample errored); a budget counts it.
    """

    paid: Paid | None = None


class RateLimited(InfraError):
    """The target was rate limited. ``retry_after`` (seconds) is honoured when given."""

    def __init__(self, message: str = "rate limited", *, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class ServiceTimeout(InfraError):
    """A service an adapter calls (an HTTP endpoint) did not answer within its timeout."""


class TargetTimeout(Exception):
    """The target ran past ``timeout_s`` (honesteval stopped waiting, or killed it).

    The candidate's failure by default; an ``InfraError`` under ``timeout_is: missing``.
    """


class CandidateFailure(Exception):
    """The candidate itself failed (its own exception, a non-zero exit): scored, never retried."""


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """`` (did you mean 'trials'?)`` for a word one typo away from a known one, else "".

    >>> did_you_mean("runn", ["run", "score"])
    " (did you mean 'run'?)"
    """
    close = difflib.get_close_matches(word, list(known), n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


def invalid_setting(exc: ValidationError, prefix: str = "") -> ConfigError:
    """A pydantic error on settings a user gave, as one line: the first field and why.

    >>> from pydantic import BaseModel, Field
    >>> class Settings(BaseModel):
    ...     trials: int = Field(ge=1)
    >>> try:
    ...     Settings(trials=0)
    ... except Exception as exc:
    ...     print(invalid_setting(exc, "gate "))
    gate trials: Input should be greater than or equal to 1 (got 0)
    """
    first = exc.errors()[0]
    key = ".".join(str(p) for p in first["loc"])
    return ConfigError(f"{prefix}{key}: {first['msg']} (got {first.get('input')!r})")
