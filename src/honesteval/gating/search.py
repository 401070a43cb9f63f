"""The search ledger: ``decisions.jsonl`` read as the record that carries the guarantee.

Every confirmation spends a level alpha_j of the search's alpha-wealth (see
:mod:`honesteval.stats._online`). The ledger makes that spending final:

* **Reserved before it runs.** A confirmation first appends a *reservation* line (its j, its
  level, its seeds, the pair of fingerprints); the decision line that finishes it comes after
  the run. A killed confirmation is therefore spent; the next gate of the same pair finishes
  the reservation on the same seeds at the same level (its stored trials are reused); a
  candidate edited by one byte is another pair and gets the next j, not a free look at j.
* **Replayed, not trusted.** The online state is recomputed from the lines (rule and alpha
  from the first line that carries one); a line whose recorded level or state does not
  follow from the lines before it is a break. A hand-edited ``online`` (alpha 0.05 -> 0.45)
  changes nothing but the verdict: *broken*.
* **Chained.** Every line carries ``prev``, the SHA-256 of every byte of the file before it
  (the first line's ``prev`` is the hash of no bytes), and ``decisions.head.json`` holds the
  length and hash of the whole file as its last writer left it: an edited, inserted or removed
  line, a rollback to an older copy, a missing or emptied log are all visible.
* **A torn line is only a crash's tail**: the last line, when it lacks its newline (even if
  its bytes parse: the write that carried it never finished, so it is no record). A line that
  is not JSON anywhere else is a break. The next append cuts the fragment and keeps it
  verbatim in its ``torn_tail``; ``ledger verify`` says it is there.
* **best.json follows the log.** The log is written first; a crash or a full disk between
  the promoted decision and best.json leaves the log ahead. The log wins: the next gate (or
  ``honesteval ledger repair``) rebuilds best.json from the stored trials of the promoted
  result (the decision records the reference's seeds), recorded as a repair line.

Old logs (written before the chain) are read: lines without ``prev`` before the first hashed
line are the legacy part (a torn line there is skipped, as those versions did); the first
hashed line's ``prev`` covers every byte of it, so from the upgrade on, the legacy part is
frozen too.

Lines written while two gates of other pairs overlap may finish out of order (reservation 3,
reservation 4, decision 4, decision 3): each level is computed from the promotions known when
it is reserved, which is never more than the rule allows (asynchronous online testing with
conservative levels; Zrnic, Ramdas & Jordan 2021).

References
----------
Zrnic, T., Ramdas, A., & Jordan, M. I. (2021). Asynchronous online testing of multiple
hypotheses. Journal of Machine Learning Research 22(33), 1-39.
Crosby, S. A., & Wallach, D. S. (2009). Efficient data structures for tamper-evident logging.
USENIX Security.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from honesteval.errors import LedgerBrokenError
from honesteval.models import (
    BestIdentity,
    BestRecord,
    ContinuationRecord,
    DecisionRecord,
    OnlineState,
    RepairRecord,
    ReservationRecord,
)
from honesteval.stats import advance, new_online_state, next_level
from honesteval.store.state_dir import (
    LEDGER_FIELDS,
    LEDGER_HEAD_NAME,
    LEDGER_NAME,
    LedgerHead,
    LedgerLine,
    Store,
)

REPAIR_HINT = 'honesteval ledger repair --accept-break "why"'


@dataclass(frozen=True)
class Break:
    """Where the ledger stops being trustworthy: from ``line`` on (None: the file as a whole)."""

    line: int | None
    message: str
    #: "best-behind": the log promoted, best.json was not written (a crash between the two);
    #: ``honesteval ledger repair`` can finish it. Any other break needs ``--accept-break``.
    kind: str = "broken"


@dataclass
class Reservation:
    """A confirmation reserved in the ledger; ``finished`` is its decision once recorded."""

    record: ReservationRecord
    line: int
    before: OnlineState  # the state it was reserved from: its level is next_level(before)
    finished: DecisionRecord | None = None
    finished_line: int | None = None
    #: the rounds it may run: the reserved n_trials, or a continuation's larger budget
    budget: int = 0

    def __post_init__(self) -> None:
        self.budget = self.budget or self.record.n_trials

    def pair(self) -> tuple[str, str, str, str]:
        r = self.record
        return (r.current, r.current_fingerprint, r.candidate, r.candidate_fingerprint)

    def continuable(self) -> bool:
        """Finished INDECISIVE because its budget ran out, or fell short, in between: a
        larger budget may continue the same e-process (:class:`ContinuationRecord`)."""
        d = self.finished
        return d is not None and d.indecisive and d.confirm_stop in ("exhausted", "short")

    def reopen(self, budget: int) -> None:
        """Continued: open again, with the larger budget."""
        self.finished, self.finished_line, self.budget = None, None, budget


@dataclass
class Ledger:
    """The ledger as replayed: the state the next confirmation starts from, or the breaks."""

    lines: int = 0
    state: OnlineState = field(default_factory=new_online_state)
    decisions: list[DecisionRecord] = field(default_factory=list)
    reservations: dict[int, Reservation] = field(default_factory=dict)
    breaks: list[Break] = field(default_factory=list)
    #: the best the ledger vouches for (its last promotion, or its last repair's)
    best: BestIdentity | None = None
    best_line: int | None = None
    #: the best before the last promotion (best.json there means a crash between the writes)
    previous_best: BestIdentity | None = None
    #: the state before each line (a repair goes on from the state before the first break)
    before: dict[int, OnlineState] = field(default_factory=dict)
    #: how many confirmations the untrusted part may hold (the highest j the lines after a
    #: break name, or the lines the head says were removed): a repair counts them as spent
    tests_floor: int = 0
    #: a crash's torn tail, when the file ends with one
    torn_tail: int | None = None
    repairs: int = 0

    @property
    def ok(self) -> bool:
        return not self.breaks

    def message(self) -> str:
        """The first break, in one line, with what to do."""
        first = self.breaks[0]
        more = f" (and {len(self.breaks) - 1} more)" if len(self.breaks) > 1 else ""
        return (
            f"the search ledger {LEDGER_NAME} is broken: {first.message}{more}; honesteval "
            f"will not reset it: no gate runs until `{REPAIR_HINT}` records a repair "
            "(`honesteval status` shows the break)"
        )

    def check(self) -> None:
        """Raise :class:`LedgerBrokenError` (one line, exit 2) when the ledger is broken."""
        if self.breaks:
            raise LedgerBrokenError(self.message())

    def open_reservations(self) -> list[Reservation]:
        return [r for r in self.reservations.values() if r.finished is None]

    def trusted_state(self) -> OnlineState:
        """The state before the first line a break names: what a repair may build on."""
        first = min((b.line for b in self.breaks if b.line is not None), default=None)
        return self.state if first is None else self.before.get(first, self.state)

    def next_line(self) -> int:
        """The number the next appended line gets (a crash's torn tail is cut first)."""
        return self.lines + (self.torn_tail is None)


def _states_equal(a: OnlineState, b: OnlineState) -> bool:
    """Equal up to the float rounding of a sum (levels are recomputed, not read back)."""
    return (
        (a.rule, a.alpha, a.tests, sorted(a.promotions)) == (b.rule, b.alpha, b.tests, b.promotions)
        and math.isclose(a.spent, b.spent, rel_tol=1e-9, abs_tol=1e-15)
        and (
            (a.last_level is None) == (b.last_level is None)
            and math.isclose(a.last_level or 0.0, b.last_level or 0.0, rel_tol=1e-9)
        )
    )


def credit(state: OnlineState, j: int) -> OnlineState:
    """The state after confirmation j (already reserved, its level spent) promoted."""
    return state.model_copy(update={"promotions": sorted({*state.promotions, j})})


class _Replay:
    """One pass over the ledger's lines (see the module docstring for the rules)."""

    def __init__(self, default: OnlineState):
        self.ledger = Ledger(state=default)
        self.default = default
        self.started = False  # the rule and alpha were taken from a line
        self.hashed = False  # a line with ``prev`` was seen: the chained part began
        self.chained: int | None = None  # the last line whose ``prev`` matched
        self.max_mentioned = 0

    # -- the pass -------------------------------------------------------------------------
    def run(self, lines: list[LedgerLine]) -> Ledger:
        led = self.ledger
        led.lines = len(lines)
        for line in lines:
            led.before[line.number] = led.state
            if not line.terminated:  # the last line only: a write that never finished
                self.ledger.torn_tail = line.number
                continue
            try:
                obj = json.loads(line.text.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                self.torn(line)
                continue
            if not isinstance(obj, dict):
                n = line.number
                self.broken(n, f"line {n} has the wrong shape (not a JSON object)")
                continue
            self.one(line, obj)
        led.tests_floor = self.max_mentioned
        return led

    def torn(self, line: LedgerLine) -> None:
        """A whole line that is not JSON: in the legacy part (before the first hashed line)
        skipped, as those versions did; after it a break."""
        n = line.number
        if self.hashed:
            self.broken(
                n,
                f"line {n} is not a JSON record (a torn line that is not the "
                "crash's last line, or an edit)",
            )

    def broken(self, line: int | None, message: str) -> None:
        self.ledger.breaks.append(Break(line, message))

    def one(self, line: LedgerLine, obj: dict[str, Any]) -> None:
        n = line.number
        kind = obj.get("kind", "decision")
        if "prev" in obj:
            self.hashed = True
            if obj["prev"] != line.before:
                # The bytes before the last chained line are vouched for by its prev: the
                # change is in that line or after it (in the legacy part, anywhere in it).
                suspect = self.chained or 1
                self.broken(
                    suspect,
                    f"line {n} does not chain onto the bytes before it (line {suspect} or one "
                    "after it was edited, inserted or removed)",
                )
                self.mention(obj)
                return
            self.chained = n
        elif self.hashed:
            self.broken(n, f"line {n} carries no hash after hashed lines (inserted or edited)")
            self.mention(obj)
            return
        if kind == "repair":
            self.repair(n, obj)
            return
        if self.ledger.breaks:
            self.mention(obj)  # after a break nothing counts until a repair
            return
        record = {k: v for k, v in obj.items() if k not in LEDGER_FIELDS}
        try:
            if kind == "reservation":
                self.reservation(n, ReservationRecord.model_validate(record))
            elif kind == "decision":
                self.decision(n, DecisionRecord.model_validate(record))
            elif kind == "continuation":
                self.continuation(n, ContinuationRecord.model_validate(record))
            else:
                self.broken(n, f"line {n} is of an unknown kind {kind!r}")
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(top level)"
            self.broken(n, f"line {n} has the wrong shape ({where}: {first['msg']})")
            self.mention(obj)

    def mention(self, obj: dict[str, Any]) -> None:
        """An untrusted line: count the confirmation it names as spent (conservative)."""
        j = obj.get("j") if obj.get("kind") == "reservation" else obj.get("reservation")
        if isinstance(j, int):
            self.max_mentioned = max(self.max_mentioned, j)
        elif obj.get("stage") == "confirm":
            self.max_mentioned = max(self.max_mentioned, self.ledger.state.tests) + 1

    # -- the three kinds of line ----------------------------------------------------------
    def start(self, online: OnlineState | None) -> None:
        """The rule and alpha are fixed by the first line that carries an online state."""
        if not self.started and online is not None:
            self.ledger.state = new_online_state(online.rule, online.alpha)
            self.started = True

    def after(self, n: int, online: OnlineState | None) -> None:
        if online is not None and not _states_equal(online, self.ledger.state):
            self.broken(
                n,
                f"line {n}: the online state it records (alpha {online.alpha:g}, "
                f"{online.tests} confirmation(s), spent {online.spent:.4g}) does not "
                "follow from the lines before it (edited?)",
            )

    def reservation(self, n: int, r: ReservationRecord) -> None:
        led = self.ledger
        self.start(r.online)
        expected = next_level(led.state)
        if r.j != led.state.tests + 1 or not math.isclose(r.level, expected, rel_tol=1e-9):
            self.broken(
                n,
                f"line {n} reserves confirmation {r.j} at alpha {r.level:.3g}; the "
                f"ledger gives confirmation {led.state.tests + 1} at {expected:.3g}",
            )
            self.mention({"kind": "reservation", "j": r.j})
            return
        before = led.state
        led.state = advance(before, expected, False)
        led.reservations[r.j] = Reservation(r, n, before)
        self.after(n, r.online)

    def continuation(self, n: int, c: ContinuationRecord) -> None:
        """Reopen a confirmation whose budget ran out, with a larger budget: only one of the
        same pair, finished INDECISIVE at its budget; the state does not move."""
        res = self.ledger.reservations.get(c.j)
        same = res is not None and res.pair() == (
            c.current,
            c.current_fingerprint,
            c.candidate,
            c.candidate_fingerprint,
        )
        if res is None or not same or not res.continuable() or c.n_trials <= res.budget:
            self.broken(
                n,
                f"line {n} continues confirmation {c.j}, which is not a confirmation of that "
                "pair whose budget ran out below the new one",
            )
            self.mention({"kind": "reservation", "j": c.j})
            return
        res.reopen(c.n_trials)
        self.after(n, c.online)

    def decision(self, n: int, d: DecisionRecord) -> None:
        led = self.ledger
        self.start(d.online)
        if d.stage == "confirm" and d.reservation is not None:
            res = led.reservations.get(d.reservation)
            if res is None or res.finished is not None:
                what = "was never reserved" if res is None else "was already finished"
                self.broken(n, f"line {n} finishes confirmation {d.reservation}, which {what}")
                return
            same = (d.current, d.current_fingerprint, d.candidate, d.candidate_fingerprint)
            if same != res.pair() or not math.isclose(d.level or 0, res.record.level):
                self.broken(
                    n,
                    f"line {n} finishes confirmation {d.reservation} with another "
                    "pair or level than it reserved",
                )
                return
            res.finished, res.finished_line = d, n
            if d.promoted:
                led.state = credit(led.state, d.reservation)
        elif d.stage == "confirm":  # written before reservations: decided at next_level
            expected = next_level(led.state)
            if d.level is None or not math.isclose(d.level, expected, rel_tol=1e-9):
                self.broken(
                    n,
                    f"line {n} records alpha_j = {d.level}; the ledger gives "
                    f"{expected:.3g} (edited?)",
                )
                return
            led.state = advance(led.state, expected, d.promoted)
        self.after(n, d.online)
        led.decisions.append(d)
        if d.promoted:
            led.previous_best = led.best
            led.best = BestIdentity(
                name=d.candidate, fingerprint=d.candidate_fingerprint, promoted_at=d.timestamp
            )
            led.best_line = n

    def repair(self, n: int, obj: dict[str, Any]) -> None:
        """A repair accepts every byte before it (its ``prev``) and sets the state."""
        led = self.ledger
        try:
            r = RepairRecord.model_validate(
                {k: v for k, v in obj.items() if k not in LEDGER_FIELDS}
            )
        except ValidationError:
            self.broken(n, f"line {n} is a repair of the wrong shape")
            return
        led.breaks.clear()
        led.reservations.clear()  # an open reservation before a repair stays spent
        led.state = r.online
        led.best = r.best
        led.best_line = None  # vouched for by a repair, not a decision line
        led.repairs += 1
        self.started = True
        self.max_mentioned = 0


def best_identity(best: BestRecord | None) -> BestIdentity | None:
    if best is None:
        return None
    return BestIdentity(name=best.name, fingerprint=best.fingerprint, promoted_at=best.promoted_at)


def _check_head(led: Ledger, lines: list[LedgerLine] | None, head: LedgerHead | None) -> None:
    if head is None:
        return
    if lines is None or not lines:
        led.breaks.append(
            Break(
                None,
                f"{LEDGER_NAME} is missing or empty but "
                f"{LEDGER_HEAD_NAME} records {head.lines} line(s)",
            )
        )
        led.tests_floor = max(led.tests_floor, head.lines)
        return
    data = b"".join(x.text + b"\n" * x.terminated for x in lines)
    if len(data) < head.bytes or hashlib.sha256(data[: head.bytes]).hexdigest() != head.sha256:
        last = lines[-1].number if lines[-1].terminated else lines[-1].number - 1
        led.breaks.append(
            Break(
                last,
                f"{LEDGER_NAME} is not the file its last writer left "
                f"({head.lines} line(s), {head.bytes} bytes): its last line "
                "was edited or lines were removed (rolled back?)",
            )
        )
        removed = max(0, head.lines - last)
        led.tests_floor = max(led.tests_floor, led.state.tests + removed)


def _check_best(led: Ledger, best: BestRecord | None) -> None:
    """best.json must be the ledger's last promotion. One step behind (the promotion before
    it, or none) is a crash between the two writes, which a repair finishes (the log wins)."""
    now = best_identity(best)
    if now == led.best:
        return
    if led.best is None:
        assert now is not None
        message = (
            f"best.json names {now.name!r} but the ledger records no promotion of it "
            f"({LEDGER_NAME} missing, emptied or rolled back?)"
        )
        led.breaks.append(Break(None, message))
        return
    found = "best.json is missing" if now is None else f"best.json names {now.name!r}"
    where = f"line {led.best_line} promoted" if led.best_line else "the last repair vouches for"
    message = f"{where} {led.best.name!r} but {found}" + (
        f" (promoted {now.promoted_at})" if now is not None else ""
    )
    if led.best_line is not None and now == led.previous_best:
        message += (
            " (a crash or a full disk between the two writes): the next gate, or "
            "`honesteval ledger repair`, rebuilds best.json from the ledger"
        )
        led.breaks.append(Break(led.best_line, message, "best-behind"))
    else:
        led.breaks.append(Break(led.best_line, message))


def read_ledger(store: Store, default: OnlineState) -> Ledger:
    """Replay ``decisions.jsonl``; ``default`` is the state of a search with no line yet
    (the project's rule and alpha). Never raises on a break: ``Ledger.breaks`` says it."""
    lines = store.read_ledger_lines()
    led = _Replay(default).run(lines or [])
    _check_head(led, lines, store.read_ledger_head())
    _check_best(led, store.read_best())
    return led
