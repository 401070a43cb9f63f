"""Trial records of one (split, candidate, fingerprint): an append-only JSON-lines log.

``trials/<split>/<candidate>/<fingerprint[:12]>/trials.jsonl`` holds one JSON record per line;
for a (task, seed) the **last valid line wins** (a rollout stored before its score, then the
graded record; a ``--fresh`` rerun appends a newer one). Why a log and not one file per trial:
at 10,000 trials one file and two fsyncs each were the main cost of a run (bench/overhead.py,
issue 15) and 10,000 inodes; a log is one file, and a batch pays one fsync.

Guarantees, and where each is handled:

- **Whole lines.** Each record is one ``write`` on an ``O_APPEND`` descriptor, so concurrent
  writers (threads, Dask worker processes) never interleave inside a line on a local
  filesystem. Each line *starts* with a newline: a fragment left by a crash mid-write (or a
  full disk) is always closed by the next writer and is skipped on read, never glued to a
  record.
- **Durable before it counts.** :func:`write` fsyncs at once, except inside
  :func:`deferred_sync`, where the log is fsynced once when the block ends (a batch task run
  returns its records only after that). A process killed mid-batch loses nothing it wrote
  (the page cache survives the process); only a power cut can lose an un-synced batch, whose
  trials then simply rerun.
- **Records trusted over positions.** A line counts only for the trial its own fields name,
  and only in the folder of its own split, candidate and fingerprint.
- **Old layout still read.** Per-trial files ``<task>__s<seed>.json`` written by earlier
  versions in the same folder are read when the log has no line for that trial.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path

from pydantic import ValidationError

from honesteval.models import COUNTED_STATUSES, TrialRecord
from honesteval.redaction import redact
from honesteval.store.durable import fsync, fsync_dir, named, write_fully

LOG_NAME = "trials.jsonl"
TrialKey = tuple[str, int]  # (task id, seed)

_pending = threading.local()  # the logs this thread holds open inside deferred_sync()


def _open(log: Path) -> int:
    """An append descriptor on ``log``, created 0600 (its folder fsynced when new)."""
    try:
        return os.open(log, os.O_WRONLY | os.O_APPEND)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise named(exc, log) from None
    try:
        log.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    except OSError as exc:
        raise named(exc, log) from None
    fsync_dir(log.parent)
    return fd


def write(log: Path, record: TrialRecord) -> None:
    """Append ``record`` (secrets redacted) to ``log`` as one whole line, durably (see
    :func:`deferred_sync`)."""
    data = ("\n" + redact(record.model_dump_json()) + "\n").encode("utf-8")
    held: dict[Path, int] | None = getattr(_pending, "fds", None)
    if held is not None:  # inside deferred_sync: one open and one fsync per batch
        if log not in held:
            held[log] = _open(log)
        write_fully(held[log], data, log)
        return
    fd = _open(log)
    try:
        write_fully(fd, data, log)
        fsync(fd, log)
    finally:
        os.close(fd)


@contextlib.contextmanager
def deferred_sync() -> Iterator[None]:
    """Inside this block, this thread's appends go through one descriptor per log, fsynced
    and closed when the block ends (also by an exception): one fsync per batch instead of one
    per trial, and no open/close per record (each syscall also costs a GIL hand-off among the
    batch threads, measured as a quarter of a no-op trial's time)."""
    if getattr(_pending, "fds", None) is not None:  # nested: the outermost block syncs
        yield
        return
    held: dict[Path, int] = {}
    _pending.fds = held
    try:
        yield
    finally:
        del _pending.fds
        for log, fd in held.items():
            try:
                fsync(fd, log)
            finally:
                os.close(fd)


def _valid_reward(reward: float | None) -> bool:
    return reward is not None and math.isfinite(reward) and 0.0 <= reward <= 1.0


def parse_record(data: object) -> TrialRecord | None:
    """A stored record, or None when it is not one (wrong shape). A counted record whose
    reward is not a number in [0, 1] (tampered, corrupt) is returned as None too: missing
    data, which reruns."""
    try:
        record = TrialRecord.model_validate(data)
    except ValidationError:
        return None
    if record.status in COUNTED_STATUSES and not _valid_reward(record.reward):
        return None
    return record


#: The (task, seed) at the start of a line as :func:`write` lays it out (TrialRecord's field
#: order), read without parsing the line: superseded lines are skipped unparsed.
_KEY_PREFIX = re.compile(
    rb'\{"task_id":("(?:[^"\\]|\\.)*"),"candidate":"(?:[^"\\]|\\.)*","fingerprint":"[^"]*",'
    rb'"split":"[a-z]+","trial":-?\d+,"seed":(-?\d+)[,}]'
)


def _key_prefix(line: bytes) -> TrialKey | None:
    """The (task, seed) a line written by :func:`write` starts with, else None (then the
    line is parsed in full)."""
    match = _KEY_PREFIX.match(line)
    if match is None:
        return None
    quoted = match[1]
    with contextlib.suppress(json.JSONDecodeError, UnicodeDecodeError):
        # An id with no escape is its bytes between the quotes: no JSON parse per line.
        task_id = quoted[1:-1].decode() if b"\\" not in quoted else json.loads(quoted)
        return task_id, int(match[2])
    return None


def _lines_newest_first(log: Path) -> Iterator[tuple[TrialKey | None, bytes]]:
    try:
        raw = log.read_bytes()
    except OSError:
        return
    end = len(raw)
    while end >= 0:  # raw.split() backwards, one line at a time: no second copy of the log
        start = raw.rfind(b"\n", 0, end) + 1
        line = raw[start:end]
        if line.strip():
            yield _key_prefix(line), line
        end = start - 1


def _parse(line: bytes) -> object:
    try:
        return json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None  # a torn fragment is skipped


def read(folder: Path, owner: tuple[str, str, str]) -> dict[TrialKey, TrialRecord]:
    """Every trial stored in ``folder`` for ``owner`` = (split, candidate, fingerprint): the
    last valid log line per (task, seed), else a per-trial file of the old layout.

    A line naming another owner is ignored; a record that fails validation is skipped (an
    earlier line of that trial, e.g. its stored rollout, then stands); a counted record with an
    invalid reward makes that trial missing (it reruns), whatever came before it.
    """
    return dict(iter_read(folder, owner))


def iter_read(folder: Path, owner: tuple[str, str, str]) -> Iterator[tuple[TrialKey, TrialRecord]]:
    """:func:`read`'s trials one at a time, newest log line first, each as soon as it is
    decided (a caller that turns each into something smaller never holds them all)."""
    done: set[TrialKey] = set()
    # Newest line first: a trial is decided by its last line that validates or claims a counted
    # status, so earlier lines of a decided trial are neither parsed nor validated (a log that
    # --fresh runs grew to 56,000 lines holds 2,000 trials: 2,000 parses, not 56,000).
    for prefix, line in _lines_newest_first(folder / LOG_NAME):
        if prefix is not None and prefix in done:
            continue  # decided by a later line
        data = _parse(line)
        if not isinstance(data, dict) or _owner(data) != owner:
            continue
        record = parse_record(data)
        key = (record.task_id, record.seed) if record is not None else _counted_key(data)
        if key is not None and key not in done:
            done.add(key)
            if record is not None:  # None: a counted status with an invalid reward, so missing
                yield key, record
    for path in folder.glob("*__s*.json") if folder.is_dir() else ():
        with contextlib.suppress(OSError, json.JSONDecodeError, UnicodeDecodeError):
            data = json.loads(path.read_bytes())
            if isinstance(data, dict) and _owner(data) == owner:
                record = parse_record(data)
                if record is not None and (record.task_id, record.seed) not in done:
                    done.add((record.task_id, record.seed))
                    yield (record.task_id, record.seed), record


def _counted_key(data: dict[str, object]) -> TrialKey | None:
    """The (task, seed) of a line that claims a counted status but failed validation."""
    task_id, seed, status = data.get("task_id"), data.get("seed"), data.get("status")
    if isinstance(task_id, str) and isinstance(seed, int) and isinstance(status, str):
        return (task_id, seed) if status in COUNTED_STATUSES else None
    return None


def _owner(data: dict[str, object]) -> tuple[object, object, object]:
    return data.get("split"), data.get("candidate"), data.get("fingerprint")
