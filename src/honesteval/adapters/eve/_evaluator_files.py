"""The evaluator's files on disk (shell steps, judges' prompts and rubrics): read only inside
their folder, hashed as they are, and remembered once a candidate has changed them.

* :func:`readable_files`: the files of a prompt folder or rubric, in path order. A symbolic
  link that resolves outside its folder is refused (:class:`ConfigError`), never followed: a
  rubric that is a link into a workspace or a candidate's folder would let the candidate
  write what it is judged by.
* :func:`evaluator_hashes`: what each file is, without following any link: a file's sha256,
  a link's target. A file replaced by a link to an identical copy elsewhere is a change.
* :class:`TamperMemory`: when a run sees a change, the hashes of the last clean snapshot go to
  ``.honesteval/evaluator_tamper.json``; while the files on disk differ from them, the next
  ``evaluate``, ``gate`` or ``check`` refuses with one line naming the file (exit 2). Once the
  files are restored the record is cleared (said in the log); deleting it is the user's
  explicit acceptance of the files as they are. Nothing is ever written back silently.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from pydantic import BaseModel

from honesteval.errors import ConfigError, EvaluatorTampered
from honesteval.models import utc_now
from honesteval.store.state_dir import atomic_write_json, read_state_file

RECORD_NAME = "evaluator_tamper.json"
_log = logging.getLogger(__name__)


def _entries(root: Path) -> Iterator[Path]:
    """Every file and link under ``root`` (``root`` itself when it is a file or a link), in
    path order; no link is followed."""
    if root.is_symlink() or root.is_file():
        yield root
        return
    if not root.is_dir():
        return
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):  # does not descend into linked folders
        folder = Path(dirpath)
        found += [folder / name for name in dirnames if (folder / name).is_symlink()]
        found += [folder / name for name in filenames]
    yield from sorted(found)


def readable_files(root: Path) -> list[Path]:
    """The files of an evaluator folder (or the file itself) that may be read: a link is read
    only when it resolves to a file inside ``root``'s folder; one that leaves it is refused."""
    base = (root if root.is_dir() and not root.is_symlink() else root.parent).resolve()
    files = []
    for path in _entries(root):
        if path.is_symlink():
            target = path.resolve()
            if not target.is_relative_to(base):
                raise ConfigError(
                    f"evaluator file {path} is a symbolic link to {target}, outside its folder "
                    f"{base}: evaluator files are read only inside their folder"
                )
            if not target.is_file():
                continue  # a link to a folder inside: its files are read where they are
        files.append(path)
    return files


def hash_tree(root: Path) -> str:
    """sha256 of an evaluator file, or of a folder's :func:`readable_files` (relative paths
    and bytes): part of the evaluator fingerprint."""
    h = hashlib.sha256()
    for path in readable_files(root):
        h.update(path.relative_to(root.parent).as_posix().encode() + b"\0")
        h.update(path.read_bytes())
    return h.hexdigest()


def evaluator_hashes(roots: Iterable[Path]) -> dict[str, str]:
    """``{path: what it is}`` for every file and link under ``roots``: ``sha256:<hex>`` of a
    file's bytes, ``symlink:<target>`` of a link (never followed)."""
    out: dict[str, str] = {}
    for root in roots:
        for path in _entries(root):
            if path.is_symlink():
                out[str(path)] = f"symlink:{os.readlink(path)}"
            elif path.is_file():
                out[str(path)] = f"sha256:{hashlib.sha256(path.read_bytes()).hexdigest()}"
    return out


def changed_paths(before: dict[str, str], now: dict[str, str]) -> list[str]:
    """The paths changed, added or removed between two :func:`evaluator_hashes`."""
    return sorted(p for p in before.keys() | now.keys() if before.get(p) != now.get(p))


class TamperRecord(BaseModel):
    """What ``evaluator_tamper.json`` keeps: the clean snapshot's roots and hashes, and the
    first change seen (when and which files)."""

    detected_at: str
    roots: list[str]
    clean: dict[str, str]
    changed: list[str]


class TamperMemory:
    """The tamper record of one project's state folder."""

    def __init__(self, state_dir: Path):
        self.path = state_dir / RECORD_NAME

    def read(self) -> TamperRecord | None:
        return read_state_file(self.path, TamperRecord.model_validate)

    def remember(self, roots: list[Path], clean: dict[str, str], changed: list[str]) -> None:
        """Record a change seen during a run; the first record stands (its snapshot was the
        clean one) until the files are restored."""
        if self.read() is not None:
            return
        record = TamperRecord(
            detected_at=utc_now(), roots=[str(r) for r in roots], clean=clean, changed=changed
        )
        atomic_write_json(self.path, record)

    def refuse_while_tampered(self) -> None:
        """Raise :class:`EvaluatorTampered` while the evaluator files differ from the last
        clean snapshot; clear the record (and say so) once they match it again."""
        record = self.read()
        if record is None:
            return
        changed = changed_paths(record.clean, evaluator_hashes(Path(r) for r in record.roots))
        if not changed:
            self.path.unlink()
            _log.warning(
                "the evaluator files changed during the run of %s match their clean snapshot "
                "again: the tamper record is cleared",
                record.detected_at,
            )
            return
        more = f" (and {len(changed) - 1} more)" if len(changed) > 1 else ""
        raise EvaluatorTampered(
            f"{changed[0]}{more} differs from the evaluator's last clean snapshot: a run on "
            f"{record.detected_at} saw it changed (tampering); restore it, or delete "
            f"{self.path} to accept the files as they are now"
        )
