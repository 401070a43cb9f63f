"""In-process progress listeners: the CLI shows progress while a flow runs in its process.

The Prefect progress artifact is the durable view (throttled to one update per 0.5 s); this
is the live one for a terminal or a log. Each evaluation in flight is one :class:`Snapshot`,
keyed by its label (``<candidate> on <split>``): the flow registers it (:func:`begin`) and
reports finished task runs (:func:`settle`); a batch of trials also reports each trial as its
target returns (:func:`trial_ran`) and as it is graded (:func:`trial_graded`), so the count
moves per trial, not per batch. A report that finds no registered evaluation comes from a
process that does not run the flow (a Dask worker): it goes to the relay, if one is set
(:func:`relay_to`: the orchestration sends it to the flow's process), else it is dropped; the
flow's own :func:`settle` still counts the trials when their task run ends.
Announcements (:func:`announce`) are sentences for the user: what is about to run, and why.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Protocol

from honesteval.adapters import say_unconfined_with
from honesteval.models import MISSING_STATUSES


@dataclass
class Snapshot:
    """One evaluation's progress: trials whose target has returned out of ``total``, and
    the statuses of the graded ones."""

    label: str
    total: int
    done: int = 0
    reused: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    started: float = field(default_factory=time.monotonic)
    #: when this run's first trial finished: the rate behind the ETA is measured from there
    #: (with two evaluations in flight, one may wait for the other's trials to start)
    first_at: float | None = None

    @property
    def complete(self) -> bool:
        """Every trial has run and is graded."""
        return self.done >= self.total and sum(self.statuses.values()) >= self.total

    def copy(self) -> Snapshot:
        return replace(self, statuses=Counter(self.statuses))

    def count(self, *statuses: str) -> int:
        return sum(self.statuses[s] for s in statuses)

    @property
    def missing(self) -> int:
        return self.count(*MISSING_STATUSES)

    def eta_s(self, now: float | None = None) -> float | None:
        """Seconds left at the rate of this run's trials so far (reused ones took no time)."""
        left = self.total - self.done
        if left <= 0:
            return 0.0
        if self.first_at is None or self.ran < 2:
            return None
        return (((now or time.monotonic()) - self.first_at) / (self.ran - 1)) * left

    @property
    def ran(self) -> int:
        """Trials this run has run so far (not reused from disk)."""
        return self.done - self.reused

    def counts_text(self) -> str:
        text = f"{self.count('ok')} ok, {self.count('failed')} failed, {self.missing} missing"
        awaiting = self.done - sum(self.statuses.values())
        return f"{text}, {awaiting} awaiting a score" if awaiting > 0 else text

    def line(self, now: float | None = None) -> str:
        """E.g. ``baseline on val: 45/120 trials (38 ok, 2 failed, 0 missing), 0:12 elapsed,
        ETA 0:20``."""
        now = now or time.monotonic()
        eta = self.eta_s(now)
        return (
            f"{self.label}: {self.done}/{self.total} trials ({self.counts_text()}), "
            f"{clock(now - self.started)} elapsed, ETA {'?' if eta is None else clock(eta)}"
        )


def clock(seconds: float) -> str:
    """``0:07``, ``4:05``, ``1:02:03``"""
    whole = round(seconds)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


class Listener(Protocol):
    """What a listener hears; both methods may be called from any thread."""

    def progress(self, snapshot: Snapshot) -> None: ...

    def announce(self, text: str) -> None: ...


_listeners: list[Listener] = []
_live: dict[str, Snapshot] = {}
_lock = threading.RLock()

#: Where a report goes that no evaluation in this process registered: ``(kind, label,
#: status)``, kind ``ran`` (:func:`trial_ran`) or ``graded`` (:func:`trial_graded`).
Relay = Callable[[str, str, "str | None"], None]
_relay: list[Relay] = []


def relay_to(relay: Relay) -> None:
    """Send this process's reports of evaluations it does not run to ``relay``."""
    _relay[:] = [relay]


def _relayed(kind: str, label: str, status: str | None) -> None:
    for relay in _relay:
        relay(kind, label, status)


def label_of(candidate: str, split: str) -> str:
    """The key (and the words) of one evaluation's progress: ``careful on val``."""
    return f"{candidate} on {split}"


def _emit(snapshot: Snapshot) -> None:
    for listener in list(_listeners):
        listener.progress(snapshot)


def begin(label: str, total: int, reused_statuses: Iterable[str] = ()) -> None:
    """An evaluation starts: ``total`` trials, some already on disk (their statuses)."""
    reused = Counter(reused_statuses)
    n = sum(reused.values())
    with _lock:
        snapshot = _live[label] = Snapshot(label, total, done=n, reused=n, statuses=reused)
        _emit(snapshot.copy())  # under the lock: listeners see counts in order


def trial_ran(label: str, final_status: str | None = None) -> None:
    """One trial's target returned (in a batch); ``final_status`` when it needs no score
    (an ``infra_error``), else it is graded later (:func:`trial_graded`)."""
    with _lock:
        snapshot = _live.get(label)
        if snapshot is None:
            _relayed("ran", label, final_status)
            return
        if snapshot.done >= snapshot.total:
            return
        snapshot.done += 1
        if snapshot.first_at is None:
            snapshot.first_at = time.monotonic()
        if final_status is not None:
            snapshot.statuses[final_status] += 1
        _emit(snapshot.copy())  # under the lock: listeners see counts in order


def trial_graded(label: str, status: str) -> None:
    """One trial of a batch has its final status."""
    with _lock:
        snapshot = _live.get(label)
        if snapshot is None:
            _relayed("graded", label, status)
            return
        snapshot.statuses[status] += 1
        _emit(snapshot.copy())  # under the lock: listeners see counts in order


def settle(label: str, done: int, statuses: Counter[str]) -> None:
    """The flow's own count (finished task runs), which per-trial reports may be ahead of
    (a batch's trials report as they go), never behind."""
    with _lock:
        snapshot = _live.get(label)
        if snapshot is None:
            return
        if done > snapshot.done and snapshot.first_at is None:
            snapshot.first_at = time.monotonic()
        snapshot.done = max(snapshot.done, done)
        for status, n in statuses.items():
            snapshot.statuses[status] = max(snapshot.statuses[status], n)
        _emit(snapshot.copy())  # under the lock: listeners see counts in order


def end(label: str) -> None:
    with _lock:
        _live.pop(label, None)


def announce(text: str) -> None:
    for listener in list(_listeners):
        listener.announce(text)


say_unconfined_with(announce)  # the sandbox's line "trials run unconfined" reaches the listeners


@contextmanager
def listening(listener: Listener) -> Iterator[None]:
    _listeners.append(listener)
    try:
        yield
    finally:
        _listeners.remove(listener)


class ProgressLines:
    """For a log or a pipe: one line per evaluation in flight every ``every_s`` seconds
    (done/total, ok/failed/missing, elapsed, ETA), the last count of each when it ends, and
    announcements as they come. Nothing for a run shorter than ``every_s``."""

    def __init__(self, write: Callable[[str], None], every_s: float = 5.0):
        self.write = write
        self.every_s = every_s
        self._latest: dict[str, Snapshot] = {}
        self._printed: set[str] = set()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, name="progress-lines", daemon=True)

    def progress(self, snapshot: Snapshot) -> None:
        with self._lock:
            self._latest[snapshot.label] = snapshot
            finished = snapshot.complete and snapshot.label in self._printed
        if finished:  # a run that was long enough to report gets its final count
            with self._lock:
                self._printed.discard(snapshot.label)
                del self._latest[snapshot.label]
            self.write(snapshot.line())

    def announce(self, text: str) -> None:
        self.write(text)

    def tick(self) -> None:
        """One line per evaluation still in flight (the thread calls this every ``every_s``)."""
        with self._lock:
            running = [s for s in self._latest.values() if not s.complete]
            self._printed.update(s.label for s in running)
        for snapshot in running:
            self.write(snapshot.line())

    def _tick(self) -> None:
        while not self._stop.wait(self.every_s):
            self.tick()

    def __enter__(self) -> ProgressLines:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
