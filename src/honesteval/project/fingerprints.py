"""The fingerprints a stored trial is matched by (SPEC §1): a candidate's content, the scoring
settings and files, a trial's context. Their bytes are pinned by
tests/unit/test_golden_fingerprints.py: a changed byte would rerun every stored trial."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING

from honesteval.models import Task

if TYPE_CHECKING:
    from honesteval.project.schema import ProjectConfig

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


def scoring_fingerprint(root: Path, config: ProjectConfig) -> str:
    """sha256 of everything besides the candidate that decides a trial's outcome: the
    adapter, evaluation and judge settings, the project's own target/scorer modules and the
    files of the evaluation steps. A stored trial made under another one is never reused."""
    h = hashlib.sha256()
    settings = {
        "adapter": config.adapter.model_dump(mode="json"),
        "evaluation": None if config.evaluation is None else config.evaluation.model_dump(),
        "judge": None if config.judge is None else config.judge.model_dump(mode="json"),
        "pass_threshold": config.pass_threshold,
    }
    h.update(json.dumps(settings, sort_keys=True, default=str).encode())
    files: list[Path] = []
    for ref in config.adapter.module_refs():
        base = root.joinpath(*ref.partition(":")[0].split("."))
        files += [p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()]
    for step in config.evaluation.steps if config.evaluation else []:
        parts = [step] if isinstance(step, str) else [step.get("prompt"), step.get("immutable")]
        files += [root / str(p) for p in parts if isinstance(p, str)]
    for path in files:
        if path.is_file() or path.is_dir():
            h.update(str(path.relative_to(root) if path.is_relative_to(root) else path).encode())
            h.update(fingerprint_path(path).encode())
    return h.hexdigest()


def trial_context(scoring: str, task: Task) -> str:
    """What a stored trial must match besides candidate and seed: the scoring fingerprint and
    the task's own content (an edited input or target reruns its trials)."""
    return hashlib.sha256(f"{scoring}\0{task.model_dump_json()}".encode()).hexdigest()[:16]


def fingerprint_counts(rel: Path) -> bool:
    if any(part in _FINGERPRINT_SKIP_DIRS for part in rel.parts):
        return False
    return rel.suffix not in _FINGERPRINT_SKIP_SUFFIXES
