"""Read the tasks file (JSON Lines, one task an object with a unique string ``id``); an error
names the file line."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import ValidationError

from honesteval.errors import ConfigError
from honesteval.models import Task
from honesteval.project.config_file import MAX_MESSAGE


def load_tasks(path: Path) -> list[Task]:
    if not path.is_file():
        raise ConfigError(f"tasks file not found: {path}")
    tasks: list[Task] = []
    seen: set[str] = set()
    try:
        with path.open("rb") as fh:
            for lineno, raw in enumerate(fh, start=1):
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise ConfigError(f"{path}:{lineno}: not UTF-8 text") from None
                _add_task(path, lineno, line, tasks, seen)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    return tasks


def _add_task(path: Path, lineno: int, line: str, tasks: list[Task], seen: set[str]) -> None:
    """Parse one line of the tasks file into ``tasks`` (blank lines are skipped)."""
    if not line.strip():
        return
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{lineno}: not valid JSON: {exc.msg}") from None
    if not isinstance(obj, dict):
        raise ConfigError(f"{path}:{lineno}: a task must be a JSON object")
    if "id" not in obj:
        raise ConfigError(f"{path}:{lineno}: task has no 'id'")
    tid = obj["id"]
    if not isinstance(tid, str):
        shown = repr(tid)[:MAX_MESSAGE]
        raise ConfigError(
            f"{path}:{lineno}: task id must be a string, got {type(tid).__name__} {shown}"
        )
    if "\0" in tid:  # no environment variable, file name or argument can carry it
        raise ConfigError(f"{path}:{lineno}: task id {tid[:MAX_MESSAGE]!r} holds a NUL character")
    if tid in seen:
        raise ConfigError(f"{path}:{lineno}: duplicate task id {tid[:MAX_MESSAGE]!r}")
    try:
        task = Task.model_validate(obj)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        message = first["msg"].removeprefix("Value error, ")  # pydantic's prefix for our own
        raise ConfigError(f"{path}:{lineno}: {key}: {message[:MAX_MESSAGE]}") from None
    seen.add(task.id)
    tasks.append(task)
