"""What a batch of trials has begun, on disk, so that a batch run again after a lost worker
(Dask reschedules the task of a dead worker on a live one) calls no target twice whose
rollout is stored, and says each one it did have to call again.

A batch keeps a journal in the project's state folder, named for its task run: before each
target call, one line with the trial's label. The journal exists only while the batch runs;
a batch that finds one was run before: it takes every trial stored since (by the candidate
version's trial log) as it is, and a trial named in the journal without a stored rollout is
called again, counted in ``trials_ran`` and noted (:data:`REPEATED_NOTE`). The journal lives
beside the trials, on the file system the workers share (the project folder must be at the
same path on every worker).
"""

from __future__ import annotations

import os

from honesteval.evaluation.trial import TrialSettings, TrialSpec
from honesteval.models import TrialRecord
from honesteval.store.state_dir import Store

#: The note of a trial whose target was called again: a batch that began it was lost (its
#: worker died) before its rollout was stored.
REPEATED_NOTE = "ran again: the worker that began it was lost before its rollout was stored"
_FOLDER = "batches"


class BatchJournal:
    """One batch's journal: :meth:`stored` says what an earlier run of it stored,
    :meth:`begin` marks a trial before its target is called, :meth:`close` (or leaving its
    ``with``) removes it."""

    def __init__(self, settings: TrialSettings, key: str):
        store = Store.for_project(settings.project_root)
        folder = store.root / _FOLDER
        folder.mkdir(parents=True, exist_ok=True)
        self.path = folder / f"{_safe(key)}.log"
        self.began: set[str] = set()
        self.earlier: dict[tuple[str, int], TrialRecord] = {}
        if self.path.exists():  # this batch ran before, on a worker now lost
            self.began = set(self.path.read_text(encoding="utf-8").split())
            candidate = settings.candidate
            self.earlier = store.read_trials(settings.split, candidate.name, candidate.fingerprint)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def stored(self, spec: TrialSpec) -> TrialRecord | None:
        """The trial as an earlier run of this batch stored it (a rollout, maybe awaiting its
        score), or None."""
        if spec.label not in self.began:
            return None
        return self.earlier.get((spec.task.id, spec.seed))

    def begin(self, spec: TrialSpec) -> bool:
        """Mark the trial begun; True when an earlier run of the batch began it too."""
        os.write(self._fd, f"{spec.label}\n".encode())
        return spec.label in self.began

    def close(self) -> None:
        os.close(self._fd)
        self.path.unlink(missing_ok=True)

    def __enter__(self) -> BatchJournal:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def repeated(record: TrialRecord) -> TrialRecord:
    """The record of a trial whose target this batch called again, saying so."""
    return record.model_copy(update={"notes": [*record.notes, REPEATED_NOTE]})


def _safe(key: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in key)[:200] or "batch"


def is_repeat(record: TrialRecord) -> bool:
    return REPEATED_NOTE in record.notes


__all__ = ["REPEATED_NOTE", "BatchJournal", "is_repeat", "repeated"]
