"""The content fingerprints stored trials are matched by (SPEC §1): a candidate's content and a
trial's context (the scoring fingerprint, :mod:`honesteval.project.scoring_fingerprint`, and the
task). A stored trial is reused only when they match; their bytes are pinned by
tests/unit/test_golden_fingerprints.py: a changed byte would rerun every stored trial."""

from __future__ import annotations

import hashlib
from pathlib import Path

from honesteval.models import Task

# Files that running a candidate creates but that are not the candidate.
_FINGERPRINT_SKIP_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache"}
_FINGERPRINT_SKIP_SUFFIXES = {".pyc", ".pyo"}


def fingerprint_path(path: Path) -> str:
    """sha256 of a candidate's content: a file's bytes, or a folder's files sorted by path.

    For a folder every file contributes its relative path and its bytes (so a rename changes
    the fingerprint); byte-code caches are skipped because running a candidate writes them.
    """
    h = hashlib.sha256()
    if path.is_file():
        h.update(path.read_bytes())
        return h.hexdigest()
    files = sorted(
        (p for p in path.rglob("*") if p.is_file() and fingerprint_counts(p.relative_to(path))),
        key=lambda p: p.relative_to(path).as_posix(),
    )
    for p in files:
        data = p.read_bytes()
        h.update(p.relative_to(path).as_posix().encode())
        h.update(b"\0" + str(len(data)).encode() + b"\0")
        h.update(data)
    return h.hexdigest()


def fingerprint_counts(rel: Path) -> bool:
    if any(part in _FINGERPRINT_SKIP_DIRS for part in rel.parts):
        return False
    return rel.suffix not in _FINGERPRINT_SKIP_SUFFIXES


def trial_context(scoring: str, task: Task) -> str:
    """What a stored trial must match besides candidate and seed: the scoring fingerprint and
    the task's own content (an edited input or target reruns its trials)."""
    return hashlib.sha256(f"{scoring}\0{task.model_dump_json()}".encode()).hexdigest()[:16]
