"""Candidates by name: the entries of the project's candidates folder, or ``@<fingerprint[:16]>``,
a snapshot the Python API stored under ``.honesteval/candidates/``."""

from __future__ import annotations

import re
from pathlib import Path

from honesteval.errors import ConfigError
from honesteval.models import Candidate
from honesteval.store.fingerprints import fingerprint_path

#: Under the state folder: candidates given to the Python API in memory or as a path.
SNAPSHOTS_DIR = "candidates"
_SNAPSHOT_NAME = re.compile(r"@([0-9a-f]{16})")


def candidate_paths(folder: Path) -> dict[str, Path]:
    """Each candidate of the folder by name (a folder's name, a file's stem); entries starting
    with ``.`` or ``_`` are not candidates."""
    if not folder.is_dir():
        raise ConfigError(f"candidates folder not found: {folder}")
    out: dict[str, Path] = {}
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith((".", "_")):
            continue
        name = entry.name if entry.is_dir() else entry.stem
        if name in out:
            raise ConfigError(f"two candidates are both named {name!r} in {folder}")
        out[name] = entry
    return out


def _snapshot(name: str, key: str, folder: Path) -> Candidate:
    found = [p for p in (folder.glob(f"{key}*") if folder.is_dir() else []) if p.stem == key]
    if not found:
        raise ConfigError(f"unknown candidate {name!r}: no snapshot {key} in {folder}")
    path = found[0]
    return Candidate(name=name, path=str(path), fingerprint=fingerprint_path(path))


def find_candidate(name: str, candidates_dir: Path, snapshots_dir: Path) -> Candidate:
    """A candidate by its name in the candidates folder, or ``@<fingerprint[:16]>``: a
    snapshot the Python API stored under ``.honesteval/candidates/`` (a candidate given
    in memory or as a path). A name is never read as a path: nothing outside the
    project's folders is a candidate by accident."""
    snapshot = _SNAPSHOT_NAME.fullmatch(name)
    if snapshot is not None:
        return _snapshot(name, snapshot.group(1), snapshots_dir)
    paths = candidate_paths(candidates_dir)
    if name not in paths:
        known = ", ".join(paths) or "none"
        raise ConfigError(f"unknown candidate {name!r} (candidates: {known})")
    path = paths[name]
    if not path.exists():
        raise ConfigError(f"candidate {name!r}: {path} is a broken symlink")
    return Candidate(name=name, path=str(path), fingerprint=fingerprint_path(path))
