"""The state folder ``.honesteval/``: atomic JSON files, safe names, locked appends.

Layout (SPEC §6.2)::

    splits.json  best.json  decisions.jsonl  seal.json  drift_checks.jsonl  report.html
    workspaces/<split>/<candidate>/<fingerprint[:12]>/<task>__s<seed>/
    trials/<split>/<candidate>/<fingerprint[:12]>/trials.jsonl   (see honesteval.store.trial_log)
    results/<split>__<candidate>__<utc-timestamp>.json

Every JSON file is written to a temporary file in the same folder, fsynced, then renamed over
the target, so a reader sees the old file or the new one, never half of one. Read-modify-write
of shared files happens under one file lock per project (``filelock``: portable, well kept).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from filelock import FileLock
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from honesteval.errors import StateFileError
from honesteval.models import (
    BestRecord,
    DecisionRecord,
    DriftRecord,
    DriftReport,
    GateDecision,
    Seal,
    SplitResult,
    TrialRecord,
)
from honesteval.redaction import redact
from honesteval.store import trial_log
from honesteval.store.durable import append_owned, fsync_dir, named

STATE_DIR = ".honesteval"
#: What every StateFileError about a corrupt file says: the state is never silently reset.
_KEEP = "honesteval will not reset it: restore it from a backup, or remove it knowingly"
ParsedT = TypeVar("ParsedT")
RecordT = TypeVar("RecordT", bound=BaseModel)
_SAFE = re.compile(r"[A-Za-z0-9_\-]")
_MAX_NAME = 120


def safe_name(raw: str, *, fold_safe: bool = True) -> str:
    """A file-name component for any id: injective, no separators, no NUL, bounded length.

    Lower-case letters, digits, ``_`` and ``-`` stay; an upper-case ASCII letter becomes ``^``
    + its lower-case form, so the name stays injective on case-insensitive filesystems (macOS,
    Windows: ``Task`` and ``task`` must not share a file); every other byte (``.``, ``/``,
    ``%``, NUL, …) becomes ``%XX`` of its UTF-8 encoding, so ``..`` cannot climb. A long
    result is cut and suffixed with ``~`` + a hash of the whole id (``~`` never appears
    otherwise, so a shortened name cannot clash with an unshortened one).

    ``fold_safe=False`` gives the names of earlier versions (upper case kept as it is), which
    :meth:`Store.read_trials` still reads.
    """
    out = "".join(_encode_char(ch, fold_safe) for ch in raw)
    if not out:
        out = "%"  # the empty id; '%' alone is never produced by encoding
    if len(out) > _MAX_NAME:
        digest = hashlib.sha256(raw.encode("utf-8")).hexdigest()[:20]
        out = out[: _MAX_NAME - 21] + "~" + digest
    return out


def _encode_char(ch: str, fold_safe: bool) -> str:
    if fold_safe and "A" <= ch <= "Z":
        return "^" + ch.lower()
    if _SAFE.fullmatch(ch):
        return ch
    return "".join(f"%{b:02X}" for b in ch.encode("utf-8"))


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (temp file + fsync + rename)."""
    atomic_write_bytes(path, redact(text).encode("utf-8"))  # no state file ever holds a key


def atomic_write_lines(path: Path, lines: Iterable[str]) -> None:
    """:func:`atomic_write_text` of the lines joined, written line by line (the whole text
    is never held). Each line is redacted on its own: a secret never spans lines."""
    _atomic_write(path, (redact(line).encode("utf-8") for line in lines))


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (temp file + fsync + rename); 0600."""
    _atomic_write(path, (data,))


def _atomic_write(path: Path, chunks: Iterable[bytes]) -> None:
    """Temp file, every byte written (a buffered file writes on after a short write and
    raises on a refusal), fsync, rename, fsync of the folder. Any failure leaves the old file
    as it was and no temp file, and raises an :class:`OSError` naming ``path``."""
    tmp: str | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name[:40]}.", suffix=".tmp")
        with os.fdopen(fd, "wb") as fh:
            fh.writelines(chunks)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        if isinstance(exc, OSError):
            raise named(exc, path) from None
        raise
    fsync_dir(path.parent)


#: splits.json's key for the val tasks only confirmations score (``gate.confirm_holdout``).
HOLDOUT_KEY = "confirm_holdout"
LEDGER_NAME = "decisions.jsonl"
LEDGER_HEAD_NAME = "decisions.head.json"
#: Fields of a ledger line that belong to the log, not to the record it carries.
LEDGER_FIELDS = frozenset({"kind", "prev", "torn_tail"})
#: ``prev`` of the first line of a new ledger: the SHA-256 of no bytes.
GENESIS = hashlib.sha256(b"").hexdigest()


@dataclasses.dataclass(frozen=True)
class LedgerLine:
    """One line of decisions.jsonl as stored, with the hash of every byte before it."""

    number: int
    text: bytes  # without its newline
    terminated: bool  # ends with a newline (only the last line may not)
    before: str  # SHA-256 of every byte of the file before this line


class LedgerHead(BaseModel):
    """decisions.head.json: the ledger as its last writer left it. A ledger shorter than
    ``bytes``, or whose first ``bytes`` bytes hash to another value, was rolled back or
    edited (the chain alone cannot see a removed or edited last line)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    lines: int = Field(ge=0)
    bytes: int = Field(ge=0)
    sha256: str


def split_ledger(data: bytes) -> list[LedgerLine]:
    """The lines of a ledger file, each with the running hash of the bytes before it."""
    out: list[LedgerLine] = []
    running = hashlib.sha256()
    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        terminated = end >= 0
        stop = end if terminated else len(data)
        out.append(LedgerLine(len(out) + 1, data[start:stop], terminated, running.hexdigest()))
        running.update(data[start : stop + terminated])
        start = stop + 1
    return out


def atomic_write_json(path: Path, obj: Any) -> None:
    if isinstance(obj, BaseModel):
        text = obj.model_dump_json(indent=2)
    else:
        text = json.dumps(obj, indent=2, sort_keys=False, allow_nan=False)
    atomic_write_text(path, text + "\n")


def _one_line(err: ValidationError) -> str:
    first = err.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(top level)"
    return f"{where}: {first['msg']}"


def read_state_bytes(path: Path) -> bytes | None:
    """A state file's bytes; None when it does not exist; unreadable → :class:`StateFileError`."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StateFileError(f"{path}: cannot read it: {exc.strerror}") from None


def read_state_file(path: Path, parse: Callable[[Any], ParsedT]) -> ParsedT | None:
    """A state file's JSON as ``parse`` returns it (``parse`` raises ``ValueError`` or
    ``ValidationError`` on a wrong shape); None when the file does not exist.

    Corrupt, truncated or wrong-shape content raises :class:`StateFileError` naming the file:
    the state is never silently reset.
    """
    raw = read_state_bytes(path)
    if raw is None:
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise StateFileError(f"{path}: corrupt (not UTF-8 text); {_KEEP}") from None
    except json.JSONDecodeError as exc:
        raise StateFileError(f"{path}: corrupt (not valid JSON: {exc.msg}); {_KEEP}") from None
    try:
        return parse(data)
    except ValidationError as exc:
        raise StateFileError(f"{path}: wrong shape ({_one_line(exc)}); {_KEEP}") from None
    except (ValueError, TypeError) as exc:
        raise StateFileError(f"{path}: wrong shape ({exc}); {_KEEP}") from None


def _check_splits(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ValueError(f"expected a mapping, got {type(data).__name__}")
    seen: set[str] = set()
    for name in ("train", "val", "test"):
        ids = data.get(name)
        if not isinstance(ids, list) or not all(isinstance(i, str) for i in ids):
            raise ValueError(f"{name!r} must be a list of task ids")
        if seen & set(ids):
            raise ValueError(f"a task id is in {name!r} and in another split")
        seen |= set(ids)
    return data


def _read_json(path: Path) -> Any | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


RESULTS_INDEX = "index.jsonl"
#: What ``status`` shows of each stored result (``results/index.jsonl`` keeps these).
RESULT_SUMMARY_FIELDS = (
    "finished_at",
    "split",
    "candidate",
    "reward",
    "stderr",
    "coverage",
    "n_scored",
    "n_tasks",
    "subset",
    "reward_bounds",
)


def _summary(result: SplitResult) -> dict[str, Any]:
    return {k: getattr(result, k) for k in RESULT_SUMMARY_FIELDS}


@contextlib.contextmanager
def stops_the_run() -> Iterator[None]:
    """A write a run cannot go on without (a full disk, a read-only folder): the run stops at
    once, as a Ctrl-C stops it (every later write would fail the same way, each trial paid for
    and lost), and ends with this error in one line."""
    try:
        yield
    except OSError as exc:
        from honesteval import interrupts

        interrupts.storage_failed(exc)
        raise


def timestamp_for_file() -> str:
    return datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")


@functools.lru_cache(maxsize=64)
def _state_dir(project_root: str) -> Path:
    return Path(project_root) / STATE_DIR


@functools.lru_cache(maxsize=256)
def _version_dir(
    root: Path, kind: str, split: str, candidate: str, version: str, fold_safe: bool
) -> Path:
    # Cached: every trial record is written through it, and building the path (pathlib
    # parsing, safe_name) cost more than writing the record's line (profiled, 2,000 trials).
    return root / kind / split / safe_name(candidate, fold_safe=fold_safe) / version


class Store:
    """The state folder of one project."""

    def __init__(self, root: Path):
        self.root = root if isinstance(root, Path) else Path(root)

    # -- locking ----------------------------------------------------------------------------
    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the project's lock: one writer of shared state at a time, across processes."""
        self.root.mkdir(parents=True, exist_ok=True)
        with FileLock(str(self.root / ".lock"), mode=0o600):
            yield

    @contextlib.contextmanager
    def confirming(self, key: str) -> Iterator[None]:
        """Hold one confirmation's lock from its reservation to its decision (across
        processes): a second gate of the same pair waits here, then shares the decision."""
        folder = self.root / "locks"
        folder.mkdir(parents=True, exist_ok=True)
        with FileLock(str(folder / f"confirm-{key}.lock"), mode=0o600):
            yield

    def check_writable(self) -> None:
        """Fail before any trial runs when the state folder cannot be written (read-only,
        full disk): one line naming the folder, and nothing half-done."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            with tempfile.TemporaryFile(dir=self.root, prefix=".probe."):
                pass
        except OSError as exc:
            raise StateFileError(
                f"{self.root}: cannot write the state folder: {exc.strerror}"
            ) from None

    # -- splits -----------------------------------------------------------------------------
    def read_splits(self) -> dict[str, Any] | None:
        """The frozen split, or None before first use; corrupt → :class:`StateFileError`."""
        return read_state_file(self.root / "splits.json", _check_splits)

    def freeze_splits(self, split: dict[str, Any]) -> dict[str, Any]:
        """Write the split unless another process froze one first; return the frozen one."""
        with self.locked():
            existing = self.read_splits()
            if existing is not None:
                return existing
            atomic_write_json(self.root / "splits.json", split)
            return split

    def freeze_holdout(self, ids: list[str]) -> list[str]:
        """Add the confirmation's held-out val tasks to splits.json unless another process
        froze them first; return the frozen ones. Nothing else in the split moves."""
        with self.locked():
            existing = self.read_splits()
            if existing is None:
                raise StateFileError(f"{self.root / 'splits.json'}: no frozen split yet")
            if HOLDOUT_KEY in existing:
                return list(existing[HOLDOUT_KEY])
            atomic_write_json(self.root / "splits.json", {**existing, HOLDOUT_KEY: ids})
            return ids

    def read_holdout(self) -> list[str] | None:
        """The frozen held-out val tasks of the confirmations, or None (not frozen)."""
        splits = self.read_splits()
        return None if splits is None or HOLDOUT_KEY not in splits else list(splits[HOLDOUT_KEY])

    def has_state(self) -> bool:
        """True when anything was stored besides the split: trials, results, decisions, a
        best or a seal (a lost splits.json can then no longer be derived again silently)."""
        if any((self.root / name).exists() for name in ("best.json", "seal.json")):
            return True
        if (self.root / "decisions.jsonl").exists():
            return True
        return any(
            p.is_file() for kind in ("trials", "results") for p in (self.root / kind).rglob("*")
        )

    def recorded_task_ids(self) -> dict[str, set[str]]:
        """The task ids with a stored trial, per split (from the trial files on disk: lines of
        the trial logs and the per-trial files of earlier versions; torn lines skipped)."""
        out: dict[str, set[str]] = {}
        for split in ("train", "val", "test"):
            ids: set[str] = set()
            for path in (self.root / "trials" / split).rglob("*.json*"):
                for line in path.read_bytes().splitlines():
                    try:
                        data = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(data, dict) and isinstance(data.get("task_id"), str):
                        ids.add(data["task_id"])
            out[split] = ids
        return out

    # -- trials -----------------------------------------------------------------------------
    def _version_dir(
        self, kind: str, split: str, candidate: str, fingerprint: str, *, fold_safe: bool = True
    ) -> Path:
        """``<kind>/<split>/<candidate>/<fingerprint[:12]>``: one candidate version's folder."""
        return _version_dir(self.root, kind, split, candidate, fingerprint[:12], fold_safe)

    def trial_dir(self, split: str, candidate: str, fingerprint: str) -> Path:
        return self._version_dir("trials", split, candidate, fingerprint)

    def trial_log(self, split: str, candidate: str, fingerprint: str) -> Path:
        """The log that holds every trial of this candidate version on this split."""
        return self.trial_dir(split, candidate, fingerprint) / trial_log.LOG_NAME

    def write_trial(self, record: TrialRecord) -> Path:
        """Append the record to its trial log (see :mod:`honesteval.store.trial_log`); return it."""
        log = self.trial_log(record.split, record.candidate, record.fingerprint)
        with stops_the_run():
            trial_log.write(log, record)
        return log

    def read_trials(
        self, split: str, candidate: str, fingerprint: str
    ) -> dict[tuple[str, int], TrialRecord]:
        """Every stored trial of this candidate version on ``split``, by (task id, seed):
        the newest valid record of each (records trusted over file names)."""
        return dict(self.iter_trials(split, candidate, fingerprint))

    def iter_trials(
        self, split: str, candidate: str, fingerprint: str
    ) -> Iterator[tuple[tuple[str, int], TrialRecord]]:
        """:meth:`read_trials` one trial at a time (each key once), without holding them all."""
        owner = (split, candidate, fingerprint)
        folder = self.trial_dir(split, candidate, fingerprint)
        found: set[tuple[str, int]] = set()
        for key, record in trial_log.iter_read(folder, owner):
            found.add(key)
            yield key, record
        # Versions before case folding kept upper case in folder names (their per-trial files).
        unfolded = self._version_dir("trials", split, candidate, fingerprint, fold_safe=False)
        if unfolded != folder:
            for key, record in trial_log.iter_read(unfolded, owner):
                if key not in found:
                    yield key, record

    def read_trial(
        self, split: str, candidate: str, fingerprint: str, task_id: str, seed: int
    ) -> TrialRecord | None:
        """The stored record of this exact trial, or None (missing, unreadable or invalid).
        Reads the whole log: in a loop, call :meth:`read_trials` once instead."""
        return self.read_trials(split, candidate, fingerprint).get((task_id, seed))

    # -- results ----------------------------------------------------------------------------
    def write_result(self, result: SplitResult) -> Path:
        """Store a result, then add its summary to ``results/index.jsonl``.

        The summary is one line appended with a single ``write`` (O_APPEND: whole lines, no
        lock needed) and fsynced. A crash between the two leaves a result without a summary;
        :meth:`read_result_summaries` then reads that result's file instead.
        """
        name = f"{result.split}__{safe_name(result.candidate)}__{timestamp_for_file()}.json"
        path = self.root / "results" / name
        line = json.dumps({"file": name, **_summary(result)}, allow_nan=False) + "\n"
        with stops_the_run():
            atomic_write_json(path, result)
            append_owned(path.parent / RESULTS_INDEX, line.encode("utf-8"))
        return path

    def read_result_summaries(self) -> list[dict[str, Any]]:
        """The summary (:data:`RESULT_SUMMARY_FIELDS`) of every stored result, oldest first.

        Read from the index, so ``status`` stays fast however large the results are; a result
        the index lacks (written before the index existed, or by a run that crashed before
        appending) is read from its own file.
        """
        return [entry for _, entry in self._summaries_by_file()]

    def read_latest_results(
        self, split: str, *, last: int | None = None, keep: str | None = None
    ) -> dict[str, SplitResult]:
        """The newest stored result of every candidate on ``split``, by name, oldest first:
        chosen from the index, so only those files are read (one that is gone or invalid is
        skipped). ``last``: only the ``last`` most recently evaluated candidates, and ``keep``
        (the current best) whenever it has one."""
        summaries = self._summaries_by_file()
        newest: dict[str, str] = {}
        for name, entry in summaries:
            if entry["split"] == split:
                newest.pop(entry["candidate"], None)  # re-inserted: ordered by last evaluation
                newest[entry["candidate"]] = name
        names = list(newest)
        if last is not None:
            recent = names[-last:] if last > 0 else []
            names = [n for n in names if n == keep and n not in recent] + recent
        out: dict[str, SplitResult] = {}
        for candidate in names:
            with contextlib.suppress(OSError, ValidationError):
                path = self.root / "results" / newest[candidate]
                out[candidate] = SplitResult.model_validate_json(path.read_bytes())
        return out

    def _summaries_by_file(self) -> list[tuple[str, dict[str, Any]]]:
        """(file name, summary) of every stored result, oldest first."""
        folder = self.root / "results"
        if not folder.is_dir():
            return []
        files = {p.name for p in folder.glob("*.json")}
        indexed: dict[str, dict[str, Any]] = {}
        with contextlib.suppress(OSError):
            for line in (folder / RESULTS_INDEX).read_text(encoding="utf-8").splitlines():
                with contextlib.suppress(json.JSONDecodeError, TypeError, KeyError):
                    entry = json.loads(line)
                    if entry["file"] in files:
                        indexed[entry.pop("file")] = entry
        out: list[tuple[str, str, dict[str, Any]]] = []
        for name in files:
            entry = indexed.get(name)
            if entry is None:
                data = _read_json(folder / name)
                if data is None:
                    continue
                try:
                    entry = _summary(SplitResult.model_validate(data))
                except ValidationError:
                    continue
            out.append((entry.get("finished_at") or name, name, entry))
        return [(name, entry) for _, name, entry in sorted(out, key=lambda item: item[:2])]

    def read_results(self) -> list[SplitResult]:
        """Every stored result, oldest first."""
        folder = self.root / "results"
        if not folder.is_dir():
            return []
        out: list[tuple[str, SplitResult]] = []
        for path in folder.glob("*.json"):
            data = _read_json(path)
            if data is None:
                continue
            with contextlib.suppress(ValidationError):
                result = SplitResult.model_validate(data)
                out.append((result.finished_at or path.name, result))
        return [r for _, r in sorted(out, key=lambda pair: pair[0])]

    @classmethod
    def for_project(cls, project_root: str | Path) -> Store:
        return cls(_state_dir(str(project_root)))

    # -- evaluation-step workspaces --------------------------------------------------------
    def workspace_dir(
        self, split: str, candidate: str, fingerprint: str, task_id: str, seed: int
    ) -> Path:
        """Where the evaluation steps of one trial run (kept after it for inspection)."""
        folder = self._version_dir("workspaces", split, candidate, fingerprint)
        return folder / f"{safe_name(task_id)}__s{seed}"

    # -- current best ----------------------------------------------------------------------
    def read_best(self) -> BestRecord | None:
        """best.json, or None before the first promotion; corrupt or wrong shape →
        :class:`StateFileError` (a lost best would make the next challenger the baseline)."""
        return read_state_file(self.root / "best.json", BestRecord.model_validate)

    def write_best(self, best: BestRecord) -> None:
        """Replace best.json (call under :meth:`locked`)."""
        atomic_write_json(self.root / "best.json", best)

    # -- decisions and drift checks: JSON-lines logs ----------------------------------------
    def _append_line(self, name: str, record: BaseModel) -> None:
        """Append one whole line (0600, secrets redacted), fsynced; call under :meth:`locked`.

        A torn last line (a crash mid-append) is closed with a newline first, so the new
        line starts on its own and stays readable; the fragment is skipped on read.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        line = redact(record.model_dump_json()) + "\n"
        path = self.root / name
        with contextlib.suppress(FileNotFoundError), path.open("rb") as fh:
            end = fh.seek(0, os.SEEK_END)
            if end > 0:
                fh.seek(end - 1)
                if fh.read(1) != b"\n":
                    line = "\n" + line
        append_owned(path, line.encode("utf-8"))

    def _read_lines(self, name: str, model: type[RecordT]) -> list[RecordT]:
        """Every record of a JSON-lines log, oldest first.

        A line that is not JSON is a torn append (a crash mid-write, closed by the next
        append) and is skipped. A JSON line of the wrong shape raises :class:`StateFileError`
        naming the file and line: skipping it silently could drop a record.
        """
        path = self.root / name
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise StateFileError(f"{path}: cannot read it: {exc.strerror}") from None
        out = []
        whole = text.split("\n")[:-1]  # the last piece: "" or a torn tail, never a record
        for number, line in enumerate(whole, start=1):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict) and obj.get("kind", "decision") != "decision":
                continue  # a ledger line that is not a decision (a reservation, a repair)
            if isinstance(obj, dict):
                obj = {k: v for k, v in obj.items() if k not in LEDGER_FIELDS}
            try:
                out.append(model.model_validate(obj))
            except ValidationError as exc:
                raise StateFileError(
                    f"{path}: line {number} has the wrong shape ({_one_line(exc)}); {_KEEP}"
                ) from None
        return out

    # -- the ledger: decisions.jsonl as a hash chain, with its head ---------------------------
    def read_ledger_lines(self) -> list[LedgerLine] | None:
        """The lines of decisions.jsonl as bytes, each with the hash of every byte before it;
        None when the file does not exist. What the lines mean is
        :mod:`honesteval.gating.search`'s business."""
        data = read_state_bytes(self.root / LEDGER_NAME)
        return None if data is None else split_ledger(data)

    def read_ledger_head(self) -> LedgerHead | None:
        """decisions.head.json: how many bytes of decisions.jsonl were written, and their
        hash (None before the first hashed append)."""
        return read_state_file(self.root / LEDGER_HEAD_NAME, LedgerHead.model_validate)

    def append_ledger(self, record: dict[str, Any]) -> None:
        """Append one ledger line chained onto the file, then move the head; call under
        :meth:`locked`.

        The line carries ``prev``, the SHA-256 of every byte of the file before it (of no
        byte for the first line). A crash's torn tail (a last line that is not a complete
        JSON object) is cut off and kept verbatim in the new line's ``torn_tail``: the chain
        never covers a fragment, and nothing a crash left is dropped unrecorded.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / LEDGER_NAME
        lines = self.read_ledger_lines() or []
        data = b"".join(x.text + b"\n" for x in lines if x.terminated)
        record = dict(record)
        # A last line without its newline is a torn tail, even when its bytes parse: the
        # write that carried it never finished (a record counts only once wholly written).
        torn = lines[-1] if lines and not lines[-1].terminated else None
        record["prev"] = hashlib.sha256(data).hexdigest()
        line = redact(json.dumps(record, allow_nan=False)).encode("utf-8") + b"\n"
        if torn is None:
            append_owned(path, line)
        else:
            # Cut the fragment and add the line in one atomic replace: a crash leaves the old
            # file or the new one. The fragment stays readable in the new line.
            record["torn_tail"] = torn.text.decode("utf-8", errors="replace")
            line = redact(json.dumps(record, allow_nan=False)).encode("utf-8") + b"\n"
            atomic_write_bytes(path, data + line)
        whole = data + line
        head = LedgerHead(
            lines=len(split_ledger(whole)),
            bytes=len(whole),
            sha256=hashlib.sha256(whole).hexdigest(),
        )
        atomic_write_json(self.root / LEDGER_HEAD_NAME, head)

    def append_decision(self, decision: GateDecision) -> None:
        """Append the decision to the ledger (call under :meth:`locked`)."""
        self.append_ledger({"kind": "decision", **decision.model_dump(mode="json")})

    def read_decisions(self) -> list[DecisionRecord]:
        """Every recorded decision, oldest first (torn lines and the ledger's other lines,
        reservations and repairs, skipped; :mod:`honesteval.gating.search` checks them)."""
        return self._read_lines(LEDGER_NAME, DecisionRecord)

    def append_drift_check(self, report: DriftReport) -> None:
        """Append one whole line to drift_checks.jsonl, fsynced, under the project lock."""
        with self.locked():
            self._append_line("drift_checks.jsonl", report)

    def read_drift_checks(self) -> list[DriftRecord]:
        """Every recorded drift check, oldest first (a torn line, if any, is skipped)."""
        return self._read_lines("drift_checks.jsonl", DriftRecord)

    # -- test seal --------------------------------------------------------------------------
    def read_seal(self) -> Seal | None:
        """seal.json, or None while the test split is unsealed; corrupt or wrong shape →
        :class:`StateFileError` (a garbage seal must not reopen finalize)."""
        return read_state_file(self.root / "seal.json", Seal.model_validate)

    def write_seal(self, seal: Seal) -> None:
        atomic_write_json(self.root / "seal.json", seal)

    def evaluation_lock(self, split: str, candidate: str, fingerprint: str) -> RunLock:
        """The lock one evaluation of this candidate version on ``split`` holds while it runs
        (a second one waits, then reuses the first's trials instead of paying for them)."""
        folder = self._version_dir("locks", split, candidate, fingerprint)  # not trials: no state
        folder.mkdir(parents=True, exist_ok=True)
        return RunLock(FileLock(str(folder / "evaluate.lock"), mode=0o600))

    @contextlib.contextmanager
    def finalizing(self) -> Iterator[None]:
        """Held for a whole finalize run: a second finalize fails fast instead of waiting."""
        from filelock import Timeout

        from honesteval.errors import TestSealedError

        self.root.mkdir(parents=True, exist_ok=True)
        lock = FileLock(str(self.root / ".finalize.lock"), mode=0o600)
        try:
            lock.acquire(timeout=0)
        except Timeout:
            raise TestSealedError("another finalize is running on this project") from None
        try:
            yield
        finally:
            lock.release()


class RunLock:
    """An exclusive lock across processes, taken at once or waited for."""

    def __init__(self, lock: FileLock):
        self._lock = lock

    def acquire_now(self) -> bool:
        """Take the lock if it is free; False when another process holds it."""
        from filelock import Timeout

        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            return False
        return True

    def acquire(self) -> None:
        """Wait for the lock (Ctrl-C stops the wait)."""
        self._lock.acquire()

    def release(self) -> None:
        self._lock.release()
