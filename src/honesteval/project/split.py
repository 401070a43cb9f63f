"""The frozen split (SPEC §6.2): train, val and test derived once from ``splits:`` and the
tasks, frozen in ``.honesteval/splits.json`` on first use and read from there after."""

from __future__ import annotations

import hashlib
import json
import random
import warnings
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from honesteval.errors import ConfigError, StateError, StateFileError
from honesteval.models import SplitName, utc_now
from honesteval.store.state_dir import Store

if TYPE_CHECKING:
    from honesteval.project.loader import Project
    from honesteval.project.schema import SplitsConfig

SPLIT_NAMES: tuple[SplitName, ...] = ("train", "val", "test")


class SplitsChangedWarning(UserWarning):
    """``splits:`` in the project file no longer matches the frozen split."""


_said: set[Any] = set()


def _first_time(key: Any) -> bool:
    """True the first time this process sees ``key`` (a warning is said once, not per load)."""
    if key in _said:
        return False
    _said.add(key)
    return True


def compute_split(
    spec: SplitsConfig, task_ids: Collection[str], file: Path
) -> dict[str, list[str]]:
    """The split ``splits:`` derives from these tasks: its explicit lists, checked, or the
    sorted ids shuffled by ``seed`` and cut by the ratios."""
    if spec.explicit:
        split: dict[str, list[str]] = {name: list(getattr(spec, name)) for name in SPLIT_NAMES}
        seen: dict[str, str] = {}
        for name, ids in split.items():
            for tid in ids:
                if tid not in task_ids:
                    raise ConfigError(f"{file}: splits.{name}: unknown task id {tid!r}")
                if tid in seen:
                    raise ConfigError(f"{file}: task {tid!r} is in both {seen[tid]} and {name}")
                seen[tid] = name
        return split
    ids = sorted(task_ids)
    random.Random(spec.seed).shuffle(ids)
    n = len(ids)
    n_train = round(float(spec.train) * n)  # type: ignore[arg-type]
    n_val = min(round(float(spec.val) * n), n - n_train)  # type: ignore[arg-type]
    return {
        "train": ids[:n_train],
        "val": ids[n_train : n_train + n_val],
        "test": ids[n_train + n_val :],
    }


def splits_digest(spec: SplitsConfig) -> str:
    """What ``splits:`` said when the split was frozen (to notice a later edit)."""
    text = json.dumps(spec.model_dump(), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def frozen_split(project: Project) -> dict[str, list[str]]:
    """The split, frozen in ``.honesteval/splits.json`` on first use and read after.

    A split whose ``val`` is empty is not frozen (a first run on an empty or broken tasks
    file must not block the project forever); it is computed again on the next use.
    ``splits:`` edited after the split was frozen keeps the frozen split (that is the point
    of freezing it) and says so: a :class:`SplitsChangedWarning`, one line in the CLI.
    """
    store = Store(project.state_dir)
    stored = store.read_splits()
    digest = splits_digest(project.config.splits)
    if stored is None:
        split = compute_split(project.config.splits, project.task_ids, project.file)
        if not split["val"]:  # never frozen, so nothing can have been lost
            return split
        if store.has_state():  # it was frozen once: re-deriving could move a task
            raise StateFileError(
                f"{store.root / 'splits.json'} is missing but the project has stored trials "
                "or results: the split is not derived again silently (a task could cross "
                f"into or out of test); run `honesteval refreeze-splits --project "
                f"{project.root}` to write it again, checked against the stored trials"
            )
        stored = store.freeze_splits(
            {
                "seed": project.config.splits.seed,
                "created_at": utc_now(),
                "splits_config": digest,
                **split,
            }
        )
    if stored.get("splits_config", digest) != digest and _first_time((project.file, digest)):
        warnings.warn(
            f"{project.file}: 'splits:' changed after the split was frozen in "
            f"{store.root / 'splits.json'} ({stored.get('created_at')}); the frozen split "
            "is used (to split by the new 'splits:', remove splits.json and run "
            "`honesteval refreeze-splits`: it refuses to move a task with stored trials "
            "across the test boundary)",
            SplitsChangedWarning,
            stacklevel=3,  # the caller of Project.frozen_split
        )
    for name in SPLIT_NAMES:
        for tid in stored.get(name, []):
            if tid not in project.task_ids:
                raise ConfigError(
                    f"{store.root / 'splits.json'}: frozen {name} task {tid!r} is no longer"
                    f" in {project.config.tasks}"
                )
    return {name: list(stored.get(name, [])) for name in SPLIT_NAMES}


def refreeze_split(project: Project) -> dict[str, list[str]]:
    """Write a lost ``splits.json`` again: the split ``splits:`` derives from today's
    tasks, refused (:class:`StateError`, nothing written) when it would put a task with
    stored train or val trials into test, or a task with stored test trials outside it."""
    store = Store(project.state_dir)
    if store.read_splits() is not None:
        raise StateError(f"{store.root / 'splits.json'} exists: nothing to re-freeze")
    split = compute_split(project.config.splits, project.task_ids, project.file)
    recorded = store.recorded_task_ids()
    in_test = set(split["test"])
    crossing = sorted((recorded["train"] | recorded["val"]) & in_test) + sorted(
        recorded["test"] - in_test
    )
    if crossing:
        shown = ", ".join(repr(t) for t in crossing[:5])
        more = f" and {len(crossing) - 5} more" if len(crossing) > 5 else ""
        raise StateError(
            f"cannot re-freeze the split: the split 'splits:' derives from today's tasks "
            f"moves {len(crossing)} task(s) with stored trials across the test boundary "
            f"({shown}{more}); restore {store.root / 'splits.json'} from a backup, or "
            f"list the three splits explicitly in {project.file}"
        )
    if not split["val"]:
        raise StateError("cannot re-freeze the split: the derived val split is empty")
    store.freeze_splits(
        {
            "seed": project.config.splits.seed,
            "created_at": utc_now(),
            "splits_config": splits_digest(project.config.splits),
            "refrozen": True,
            **split,
        }
    )
    return frozen_split(project)
