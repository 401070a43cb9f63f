"""A command's spend cap: no trial starts once it would take the spend past the budget.

Plain Python, shared by both runners: the local thread pool asks :meth:`SpendGuard.admit`
as each trial starts, the Prefect dispatch asks :meth:`SpendGuard.reserve` before it submits
a task run. The spend so far is what the trials this command ran reported (``cost`` in
dollars, ``tokens``), plus what the command was given as already spent (a search's earlier
gates, from the ledger). The next trial is expected to cost the mean of the trials measured
so far (this command's, and the stored ones it reuses); trials still running count at that
mean. While no trial has reported what a capped quantity costs, trials start one at a time.

It is not an interruption: trials already running finish and are stored; the trials that
never started have no record (missing data, never a zero), and a rerun with a larger budget
runs only them.
"""

from __future__ import annotations

import math
import sys
import threading
from collections.abc import Iterable
from dataclasses import dataclass

from honesteval.errors import ConfigError
from honesteval.evaluation.tally import EvaluationTally
from honesteval.models import Budget, BudgetStop, SplitResult, TrialRecord
from honesteval.project.loader import Project

#: Slack for float sums: 5 trials at $0.01 fit a $0.05 budget although 0.01·5 may not be 0.05.
_EPS = 1e-9


def budget_of(project: Project, given: Budget | None) -> Budget | None:
    """The command's budget: the request's fields over the project's ``budget:`` (None:
    nothing capped).

    >>> from types import SimpleNamespace as NS
    >>> proj = NS(config=NS(budget=Budget(usd=2.0, tokens=9000)))
    >>> budget_of(proj, Budget(usd=0.5))  # type: ignore[arg-type]
    Budget(usd=0.5, tokens=9000)
    >>> budget_of(NS(config=NS(budget=None)), None) is None  # type: ignore[arg-type]
    True
    """
    base = project.config.budget
    values = {} if base is None else base.model_dump(exclude_none=True)
    if given is not None:
        values.update(given.model_dump(exclude_none=True))
    budget = Budget(**values)
    return budget if budget.caps() else None


def unpriced_line(project: Project, given: Budget | None) -> str | None:
    """What to say before anything runs when a USD cap cannot bind because the target
    cannot price its model (``kind: inspect`` on a model Inspect has no price for: mockllm,
    a local model): :class:`ConfigError` (exit 2) without a token cap, else the line saying
    that the token cap binds alone. None: nothing to say."""
    from honesteval.evaluation.plan import adapter_for

    budget = budget_of(project, given)
    if budget is None or budget.usd is None:
        return None
    target = getattr(adapter_for(project, project.scoring), "target", None)
    unpriced = getattr(target, "unpriced", None)
    why = None if unpriced is None else unpriced()
    if why is None:
        return None
    if budget.tokens is None:
        raise ConfigError(
            f"a USD budget cannot bind: {why}; give a token budget (--budget-tokens) "
            "or the model's price"
        )
    return f"the USD budget cannot bind ({why}): the token budget alone caps the spend"


def guard_for(
    project: Project,
    given: Budget | None,
    *,
    spent_usd: float = 0.0,
    spent_tokens: int = 0,
    search_spent: tuple[float, int] | None = None,
) -> SpendGuard | None:
    """The guard of a command's budget (:func:`budget_of`; None: nothing capped), of which
    ``spent_*`` is gone already. A gate gives ``search_spent``, what the search's earlier
    gates spent (the ledger's): then, for each quantity, the project's ``search_budget``
    binds where less of it is left than of the command's.

    >>> from types import SimpleNamespace as NS
    >>> proj = NS(config=NS(budget=Budget(usd=1.0), search_budget=Budget(usd=5.0)))
    >>> g = guard_for(proj, None, search_spent=(4.5, 0))  # type: ignore[arg-type]
    >>> g.budget, g.spent_usd, g.search  # type: ignore[union-attr]
    (Budget(usd=5.0, tokens=None), 4.5, True)
    """
    budget = budget_of(project, given)
    search = project.config.search_budget if search_spent is not None else None
    caps: dict[str, float | int] = {}
    spent: dict[str, float] = {"usd": spent_usd, "tokens": spent_tokens}
    bound = False
    for key, before in zip(("usd", "tokens"), search_spent or (0.0, 0), strict=True):
        mine = None if budget is None else getattr(budget, key)
        whole = None if search is None else getattr(search, key)
        if whole is not None and (mine is None or whole - before < mine):
            caps[key], spent[key], bound = whole, before, True
        elif mine is not None:
            caps[key] = mine
    if not caps:
        return None
    tokens = caps.get("tokens")
    capped = Budget(usd=caps.get("usd"), tokens=None if tokens is None else int(tokens))
    guard = SpendGuard(capped, spent_usd=spent["usd"], spent_tokens=int(spent["tokens"]))
    guard.search = bound
    return guard


@dataclass
class _Measure:
    """One capped quantity: its cap, what this command spent, and the trials measured."""

    cap: float
    spent: float = 0.0
    total: float = 0.0
    n: int = 0

    def add(self, value: float | None, spent: float | None, *, paid: bool, measured: bool) -> None:
        """A trial's own ``value``, in the mean unless ``measured`` already, and what running
        it cost (``spent``: a batched call's opener pays the call), spent when ``paid``."""
        if value is not None and not measured:
            self.total += value
            self.n += 1
        if paid and spent is not None:
            self.spent += spent

    def room(self, in_flight: int) -> int | None:
        """How many more trials fit (None: no trial measured yet, the cost is unknown)."""
        if self.spent >= self.cap * (1 - _EPS):
            return 0
        if self.n == 0:
            return None
        mean = self.total / self.n
        if mean <= 0:
            return sys.maxsize  # free trials: never the limit
        return max(0, math.floor((self.cap - self.spent) / mean + _EPS) - in_flight)


class SpendGuard:
    """The spend of one command against its budget; thread-safe.

    ``spent_usd`` / ``spent_tokens``: what was spent before this command (a search's earlier
    gates). ``prior``: stored trials whose cost tells what a trial costs (not spent now).

    >>> from honesteval.models import TrialRecord
    >>> guard = SpendGuard(Budget(usd=0.055))
    >>> guard.reserve(10)  # nothing measured yet: one trial alone
    1
    >>> guard.reserve(1)  # wait for it
    0
    >>> rec = TrialRecord(task_id="a", trial=0, seed=0, candidate="c", fingerprint="f",
    ...                   split="val", status="ok", reward=1.0, cost=0.01, started_at="")
    >>> guard.settle([rec])
    >>> guard.reserve(10)  # $0.045 left at $0.01 a trial
    4
    >>> guard.settle([rec] * 4)
    >>> guard.reserve(1) is None, guard.reached, round(guard.spent_usd or 0, 4)
    (True, True, 0.05)
    """

    def __init__(
        self,
        budget: Budget,
        *,
        spent_usd: float = 0.0,
        spent_tokens: int = 0,
        prior: Iterable[TrialRecord] = (),
    ):
        self.budget = budget
        self._usd = None if budget.usd is None else _Measure(budget.usd, spent=spent_usd)
        tokens = budget.tokens
        self._tokens = None if tokens is None else _Measure(tokens, spent=spent_tokens)
        self._in_flight = 0
        self._turn = 0  # the next trial :meth:`admit` lets start, in plan order
        self._closed = False
        self._stopping = False
        #: the search's budget binds (``search_budget``), not the command's
        self.search = False
        self._measured: set[tuple[str, str, str, str, int]] = set()
        self._changed = threading.Condition()
        self.measure(prior)

    def _measures(self) -> list[_Measure]:
        return [m for m in (self._usd, self._tokens) if m is not None]

    @property
    def reached(self) -> bool:
        """The budget stopped a trial from starting."""
        return self._closed

    @property
    def spent_usd(self) -> float | None:
        return None if self._usd is None else self._usd.spent

    @property
    def spent_tokens(self) -> int | None:
        return None if self._tokens is None else int(self._tokens.spent)

    def measure(self, records: Iterable[TrialRecord]) -> None:
        """Stored trials that tell what a trial costs (nothing is spent on them now)."""
        with self._changed:
            for r in records:
                self._add(r, paid=False)

    def _add(self, r: TrialRecord, *, paid: bool) -> None:
        # each trial measured once: a gate's later rounds reuse the trials of earlier ones
        key = (r.split, r.candidate, r.fingerprint, r.task_id, r.seed)
        seen = key in self._measured
        self._measured.add(key)
        spent = r.spent
        if self._usd is not None:
            self._usd.add(r.cost, spent.cost, paid=paid, measured=seen)
        if self._tokens is not None:
            self._tokens.add(r.tokens, spent.tokens, paid=paid, measured=seen)

    def reserve(self, n: int) -> int | None:
        """How many of the next ``n`` trials may start now (they count as running until
        :meth:`settle`): 0 means wait for a running one to settle; None: the budget is
        reached and no trial starts any more."""
        with self._changed:
            if self._closed or self._stopping:
                return None
            fits = n
            for m in self._measures():
                room = m.room(self._in_flight)
                fits = min(fits, (0 if self._in_flight else 1) if room is None else room)
            if fits == 0 and self._in_flight == 0:
                self._closed = True
                return None
            self._in_flight += fits
            return fits

    def admit(self, turn: int) -> bool:
        """The trial planned ``turn``-th (0, 1, 2, … in plan order) may start (True, counted
        as running), waiting for its turn and while the ones running settle; False: the
        budget is reached.

        Turns keep the plan's order whichever thread asks first: a fast trial's thread
        coming back for the next one must not take the room of an earlier trial still
        waiting, or the trials that fit would not be the first planned (whole tasks first).
        """
        with self._changed:
            while True:
                if self._closed or self._stopping:
                    return False
                if turn == self._turn:
                    fits = self.reserve(1)
                    if fits != 0:
                        self._turn += 1
                        self._changed.notify_all()
                        return fits is not None
                self._changed.wait()

    def settle(self, records: Iterable[TrialRecord]) -> None:
        """Trials reserved earlier ended: what they reported is spent."""
        with self._changed:
            for r in records:
                self._in_flight -= 1
                self._add(r, paid=True)
            self._changed.notify_all()

    def release(self, n: int = 1) -> None:
        """Reserved trials that ended without a record (the run is stopping)."""
        with self._changed:
            self._in_flight -= n
            self._changed.notify_all()

    def stop(self) -> None:
        """The run is over or stopping (Ctrl-C, a full disk): no trial starts any more, and
        a trial waiting in :meth:`admit` gives up (not the budget's doing)."""
        with self._changed:
            self._stopping = True
            self._changed.notify_all()

    def mark(self, tallies: Iterable[EvaluationTally]) -> None:
        """Once the budget is reached, say so in every evaluation it kept trials from."""
        if not self._closed:
            return
        stop = BudgetStop(
            budget=self.budget,
            spent_usd=self.spent_usd,
            spent_tokens=self.spent_tokens,
            search=self.search,
        )
        for tally in tallies:
            if tally.n_not_started:
                tally.budget = stop


def dollars(x: float) -> str:
    """An amount in dollars: cents above $10, three significant digits below.

    >>> dollars(1234.5), dollars(0.055), dollars(0.04999999999)
    ('$1,234.50', '$0.055', '$0.05')
    """
    return f"${x:,.2f}" if x >= 10 else f"${x:.3g}"


def spent_text(stop: BudgetStop) -> str:
    """What a command spent against its budget.

    >>> spent_text(BudgetStop(budget=Budget(usd=0.055, tokens=900), spent_usd=0.05,
    ...                       spent_tokens=500))
    'spent $0.05 of $0.055, 500 of 900 tokens'
    """
    parts = []
    if stop.budget.usd is not None:
        parts.append(f"{dollars(stop.spent_usd or 0)} of {dollars(stop.budget.usd)}")
    if stop.budget.tokens is not None:
        parts.append(f"{stop.spent_tokens or 0:,} of {stop.budget.tokens:,} tokens")
    return "spent " + ", ".join(parts) + (", the search's budget" if stop.search else "")


def budget_line(r: SplitResult) -> str:
    """An evaluation the budget stopped, in one line: the trials it has of those planned."""
    assert r.budget is not None
    kept = r.trials_planned - r.trials_not_started
    return (
        f"budget reached: {kept} of {r.trials_planned} trials of {r.candidate} on {r.split} "
        f"({spent_text(r.budget)}); the {r.trials_not_started} not started are missing data: "
        "a rerun with a larger budget runs only them"
    )
