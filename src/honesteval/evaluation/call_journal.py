"""Every target call of one evaluation run, on disk before the target is called.

The flow makes an evaluation's journal (:meth:`CallJournal.create`) before its first trial
and removes it when the run ends; each trial appends one line, ``[task id, seed, when]``,
just before its target is called, whichever process runs it (a Dask worker, a thread of the
CLI). So:

- The calls are counted from the calls themselves: ``trials_ran`` is the journal's lines,
  and a trial with two lines was called twice, a repeat, named per task in the result.
- Work Dask runs again after a lost worker (the batch it had in flight, or a finished
  batch whose result died with it) calls no target whose rollout this run stored: a trial
  already in the journal takes its record stored since its line (:meth:`TrialCalls.stored`),
  and its target is called again only when there is none: the call the lost worker had in
  flight, at most one per worker thread.
- A journal that is gone says the run has ended: a batch still running on a worker after
  its run stopped (Ctrl-C, no live worker) starts no further trial.

A journal lives in the project's state folder, which every worker shares (the project folder
must be at the same path on every worker). Each line is one ``write`` on an ``O_APPEND``
descriptor, so lines from several processes never interleave (as in the trial log).
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections import Counter
from pathlib import Path

from honesteval.evaluation.trial import TrialSettings, TrialSpec
from honesteval.models import TrialRecord
from honesteval.models.base import utc_now
from honesteval.store.state_dir import Store, stops_the_run

_FOLDER = "calls"
TrialKey = tuple[str, int]  # (task id, seed)


class RunEnded(Exception):
    """The evaluation's journal is gone: its run has ended, no further target is called."""


class CallJournal:
    """One evaluation run's journal, as the flow holds it: made before the first trial,
    read for the counts, removed when the run ends."""

    def __init__(self, path: Path):
        self.path = path

    @classmethod
    def create(cls, state_dir: Path) -> CallJournal:
        folder = state_dir / _FOLDER
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"{uuid.uuid4().hex}.jsonl"
        path.touch(mode=0o600, exist_ok=False)
        return cls(path)

    @property
    def name(self) -> str:
        """What the trials' settings carry (:attr:`TrialSettings.calls_journal`)."""
        return self.path.name

    def calls(self) -> Counter[TrialKey]:
        """Target calls per (task id, seed) so far."""
        return Counter(key for key, _ in _lines(self.path.read_bytes()))

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)


class TrialCalls:
    """A task run's view of its evaluation's journal (one trial, or a batch): what an
    earlier run of the same work began and stored (:meth:`stored`), and each call it makes
    (:meth:`begin`). ``with`` it: the descriptor is held for the task run. Trials run
    outside a flow's run (no journal in their settings) keep none: nothing is read or
    written."""

    def __init__(self, settings: TrialSettings):
        self.settings = settings
        self.store = Store.for_project(settings.project_root)
        name = settings.calls_journal
        self.path = None if name is None else self.store.root / _FOLDER / name
        self.began = {} if self.path is None else _began_in(self.path)
        self._stored: dict[TrialKey, TrialRecord] | None = None
        self._fd: int | None = None

    def stored(self, spec: TrialSpec) -> TrialRecord | None:
        """The trial's record stored since this run first called its target (a rollout,
        maybe awaiting its score), or None: the target was not called yet, or its call was
        lost with its worker before the record was stored."""
        began = self.began.get((spec.task.id, spec.seed))
        if began is None:
            return None
        if self._stored is None:  # work run again after a lost worker: read once
            cand = self.settings.candidate
            self._stored = self.store.read_trials(self.settings.split, cand.name, cand.fingerprint)
        record = self._stored.get((spec.task.id, spec.seed))
        return record if record is not None and record.started_at >= began else None

    def begin(self, spec: TrialSpec) -> None:
        """The line of a call about to be made; :class:`RunEnded` when the run is over."""
        if self.path is None:
            return
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
            except FileNotFoundError:
                raise RunEnded(str(self.path)) from None
        line = json.dumps([spec.task.id, spec.seed, utc_now()]) + "\n"
        with stops_the_run():  # a call not in the journal would go uncounted
            os.write(self._fd, line.encode())

    def __enter__(self) -> TrialCalls:
        return self

    def __exit__(self, *_exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _lines(data: bytes) -> list[tuple[TrialKey, str]]:
    out = []
    for line in data.splitlines():
        task_id, seed, when = json.loads(line)
        out.append(((task_id, seed), when))
    return out


class _Tail:
    """What this process has read of one journal: up to ``offset``, each trial's first call."""

    def __init__(self) -> None:
        self.offset = 0
        self.began: dict[TrialKey, str] = {}


_tails: dict[Path, _Tail] = {}
_tails_lock = threading.Lock()


def _began_in(path: Path) -> dict[TrialKey, str]:
    """(task id, seed) -> when its first call began, for every call in the journal now (a
    view that grows as later task runs read on).

    Each process reads a journal once, a task run reading only the lines written since the
    last one did: a run of 50,000 trials in batches costs each worker one read of it. What
    it read of journals now gone (their runs ended) is let go when it meets a new one."""
    with _tails_lock:
        tail = _tails.get(path)
        if tail is None:
            for gone in [p for p in _tails if not p.exists()]:
                del _tails[gone]
            tail = _tails[path] = _Tail()
        try:
            with path.open("rb") as fh:
                fh.seek(tail.offset)
                data = fh.read()
        except FileNotFoundError:
            data = b""
        whole = data[: data.rfind(b"\n") + 1]  # a line being written is read next time
        tail.offset += len(whole)
        for key, when in _lines(whole):
            tail.began.setdefault(key, when)
        return tail.began


__all__ = ["CallJournal", "RunEnded", "TrialCalls"]
