"""The scoring fingerprint (SPEC §1): everything besides the candidate that decides a trial's
outcome. Its bytes are pinned by tests/unit/test_golden_fingerprints.py."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from honesteval.adapters.eve.config import step_files
from honesteval.project.schema import ProjectConfig
from honesteval.store.fingerprints import fingerprint_path


def scoring_fingerprint(root: Path, config: ProjectConfig) -> str:
    """sha256 of everything besides the candidate that decides a trial's outcome: the
    adapter, evaluation and judge settings, the project's own target/scorer modules and the
    files of the evaluation steps. A stored trial made under another one is never reused."""
    h = hashlib.sha256()
    settings = {
        # how fast the target is called never changes what it returns
        "adapter": config.adapter.model_dump(mode="json", exclude={"rate_limit"}),
        "evaluation": None if config.evaluation is None else config.evaluation.model_dump(),
        "judge": None if config.judge is None else config.judge.model_dump(mode="json"),
        "pass_threshold": config.pass_threshold,
    }
    h.update(json.dumps(settings, sort_keys=True, default=str).encode())
    files: list[Path] = []
    for ref in config.adapter.module_refs():
        base = root.joinpath(*ref.partition(":")[0].split("."))
        files += [p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()]
    for path in files + step_files(root, config.evaluation):
        if path.is_file() or path.is_dir():
            h.update(str(path.relative_to(root) if path.is_relative_to(root) else path).encode())
            h.update(fingerprint_path(path).encode())
    return h.hexdigest()
