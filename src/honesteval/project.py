"""Load and validate a project: ``honesteval.yaml``, its tasks, its frozen split, its candidates.

Everything here is plain Python: the flows and the CLI call it, tests call it directly.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import Field, ValidationError, field_validator, model_validator

from honesteval._schema import StrictModel
from honesteval._yamlpos import line_of
from honesteval.adapters import ADAPTER_KINDS, AdapterConfig
from honesteval.errors import ConfigError
from honesteval.models import Candidate, GateConfig, SplitName, Task, utc_now
from honesteval.store import STATE_DIR, Store

PROJECT_FILE = "honesteval.yaml"
SPLIT_NAMES: tuple[SplitName, ...] = ("train", "val", "test")
# Files that running a candidate creates but that are not the candidate.
_FINGERPRINT_SKIP_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache"}
_FINGERPRINT_SKIP_SUFFIXES = {".pyc", ".pyo"}


_Strict = StrictModel


class SplitsConfig(_Strict):
    """Either seeded ratios (``seed``, ``train``, ``val``, ``test``) or explicit id lists."""

    seed: int = 0
    train: float | list[str] = 0.5
    val: float | list[str] = 0.25
    test: float | list[str] = 0.25

    @model_validator(mode="after")
    def _one_form(self) -> SplitsConfig:
        parts = (self.train, self.val, self.test)
        if all(isinstance(p, list) for p in parts):
            return self
        if any(isinstance(p, list) for p in parts):
            raise ValueError("give all three splits as ratios or all three as id lists")
        ratios = [float(p) for p in parts]  # type: ignore[arg-type]
        if any(r < 0 or not math.isfinite(r) for r in ratios):
            raise ValueError(f"split ratios must be finite and >= 0, got {ratios}")
        if abs(sum(ratios) - 1.0) > 1e-9:
            raise ValueError(f"split ratios must sum to 1, got {sum(ratios):g}")
        return self

    @property
    def explicit(self) -> bool:
        return isinstance(self.train, list)


class JudgeConfig(_Strict):
    """What judge steps call: an OpenAI-compatible chat endpoint (``base_url`` + ``model``), or
    an agent CLI run in the workspace (``command``), as Eve runs its judges.

    The endpoint's key is read from the env var ``api_key_env`` at call time: never stored,
    logged or written. The chat judge gets read-only tools over the workspace (``tools``) and a
    budget per trial (``max_turns``, ``max_total_tokens``); it retries 429/5xx/timeouts itself.
    """

    base_url: str | None = Field(default=None, min_length=1)
    model: str | None = Field(default=None, min_length=1)
    api_key_env: str | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1)
    timeout_s: float = Field(default=60.0, gt=0)
    retries: int = Field(default=3, ge=0)
    retry_backoff_s: float = Field(default=1.0, ge=0)
    tools: bool = True
    max_turns: int = Field(default=20, ge=1)
    max_total_tokens: int | None = Field(default=200_000, ge=1)
    command: str | list[str] | None = None
    prompt: Literal["stdin", "file"] = "stdin"

    @model_validator(mode="after")
    def _one_kind(self) -> JudgeConfig:
        endpoint = self.base_url is not None or self.model is not None
        if self.command is not None and endpoint:
            raise ValueError("give the judge a 'command' or 'base_url' + 'model', not both")
        if self.command is None and not (self.base_url and self.model):
            raise ValueError("the judge needs 'base_url' and 'model' (or a 'command')")
        return self


class EvaluationConfig(_Strict):
    """An Eve-compatible scoring pipeline (SPEC §5.1). Every key of Eve's ``evaluation:`` block
    is accepted, so Eve's own config loads unchanged; :data:`EVE_KEYS_NOT_USED` says what
    honesteval does with the ones it has no use for."""

    steps: list[Any] = Field(min_length=1)
    failure_score: dict[str, Any] = Field(default_factory=lambda: {"score": 0.0})
    reward_key: str = "score"
    scalar_score_expression: str | None = None
    count_failure_score: bool = False
    include_solver_examples: bool = False
    # Eve keys loaded and not used (see EVE_KEYS_NOT_USED)
    seed_solver_score: Any = None
    seed_solver_skip_evaluation: bool = False
    immutable_renderer: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _one_reward(self) -> EvaluationConfig:
        if self.scalar_score_expression is not None and "reward_key" in self.model_fields_set:
            raise ValueError("give reward_key or scalar_score_expression, not both")
        return self


#: Eve's evaluation keys that honesteval loads but does not act on, and why (one line each;
#: shown by ``honesteval check`` and logged when the steps are built).
EVE_KEYS_NOT_USED = {
    "seed_solver_score": "ignored: every candidate, the seed included, is scored by running "
    "the steps (a fixed score would be a number without an error bar)",
    "seed_solver_skip_evaluation": "ignored: the seed candidate is evaluated like any other",
    "immutable_renderer": "ignored: rubric files reach the judge verbatim (Eve's "
    "StaticRenderer); template markers are not filled in",
}


class ProjectConfig(_Strict):
    """The schema of ``honesteval.yaml`` (SPEC §6.1). Unknown keys are rejected."""

    name: str = Field(min_length=1)
    tasks: str = "tasks.jsonl"
    splits: SplitsConfig = Field(default_factory=SplitsConfig)
    adapter: AdapterConfig
    candidates: str = "candidates"
    trials: int = Field(default=3, ge=1)
    base_seed: int = 0
    pass_threshold: float = Field(default=1.0, ge=0, le=1)
    failure_reward: float = Field(default=0.0, ge=0, le=1)
    retries: int = Field(default=3, ge=0)
    retry_backoff_s: float = Field(default=1.0, ge=0)
    timeout_s: float = Field(default=600.0, gt=0)
    max_concurrency: int = Field(default=8, ge=1)
    stderr_method: Literal["auto", "task", "clustered", "combined"] = "auto"
    gate: dict[str, Any] = Field(default_factory=dict)
    evaluation: EvaluationConfig | None = None
    judge: JudgeConfig | None = None

    @model_validator(mode="after")
    def _has_a_scorer(self) -> ProjectConfig:
        if self.evaluation is None and not (self.adapter.scorer or self.adapter.brings_scorer):
            raise ValueError(
                "give the adapter a 'scorer: module:function' or add an 'evaluation:' block"
            )
        return self

    @field_validator("gate")
    @classmethod
    def _gate_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        GateConfig(**value)  # validates names and ranges here, with the file line
        return value


def _format_validation_error(err: ValidationError, path: Path, text: str) -> str:
    first = err.errors()[0]
    loc = [p for p in first["loc"] if not (isinstance(p, str) and p.startswith("function-"))]
    msg = first["msg"]
    # The adapter block is a union tagged by `kind`: pydantic puts the tag in the location
    # (adapter.python.target), which is not a key of the file.
    kind = loc.pop(1) if len(loc) > 1 and loc[0] == "adapter" and loc[1] in ADAPTER_KINDS else None
    if first["type"] in ("union_tag_invalid", "union_tag_not_found"):
        loc.append("kind")
        shown = ", ".join(repr(k) for k in ADAPTER_KINDS)
        got = (first.get("ctx") or {}).get("tag")
        msg = f"Input should be one of {shown}" + (f" (got {got!r})" if got else "")
    elif first["type"] == "missing" and kind is not None:
        msg = f"adapter kind {kind!r} needs {loc[-1]!r}"
    key = ".".join(str(p) for p in loc) or "(top level)"
    line = line_of(text, loc)
    where = f"{path}:{line}" if line else str(path)
    if first["type"] == "extra_forbidden":
        msg = "unknown key"
    elif first["type"] == "literal_error":
        msg = f"{msg} (got {first.get('input')!r})"
    more = f" (and {len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    return f"{where}: {key}: {msg}{more}"


def parse_project_file(path: Path) -> ProjectConfig:
    """Read and validate ``honesteval.yaml``; errors name the key and the file line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ConfigError(f"{where}: not valid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the project file must be a mapping of keys")
    if isinstance(data.get("evaluation"), str):
        data["evaluation"] = _eve_evaluation_block(path.parent, data["evaluation"])
    try:
        return ProjectConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(_format_validation_error(exc, path, text)) from None


def _eve_evaluation_block(root: Path, ref: str) -> Any:
    """``evaluation: configs/eve/evaluation/x.yaml``: the ``evaluation:`` block of an Eve config
    file, used as it is (its step paths stay relative to the project folder, as Eve's are
    relative to its repository)."""
    file = (root / Path(ref).expanduser()).resolve()
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"evaluation: cannot read {ref!r}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"evaluation: {ref!r} is not valid YAML: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("evaluation"), dict):
        raise ConfigError(f"evaluation: {ref!r} has no 'evaluation:' mapping")
    return data["evaluation"]


def _load_tasks(path: Path) -> list[Task]:
    if not path.is_file():
        raise ConfigError(f"tasks file not found: {path}")
    tasks: list[Task] = []
    seen: set[str] = set()
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{path}:{lineno}: not valid JSON: {exc.msg}") from None
            if not isinstance(obj, dict):
                raise ConfigError(f"{path}:{lineno}: a task must be a JSON object")
            if "id" not in obj:
                raise ConfigError(f"{path}:{lineno}: task has no 'id'")
            if not isinstance(obj["id"], str):
                raise ConfigError(
                    f"{path}:{lineno}: task id must be a string, got {type(obj['id']).__name__}"
                    f" {obj['id']!r}"
                )
            if obj["id"] in seen:
                raise ConfigError(f"{path}:{lineno}: duplicate task id {obj['id']!r}")
            try:
                task = Task.model_validate(obj)
            except ValidationError as exc:
                first = exc.errors()[0]
                key = ".".join(str(p) for p in first["loc"])
                raise ConfigError(f"{path}:{lineno}: {key}: {first['msg']}") from None
            seen.add(task.id)
            tasks.append(task)
    return tasks


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
        (p for p in path.rglob("*") if p.is_file() and _fingerprint_counts(p.relative_to(path))),
        key=lambda p: p.relative_to(path).as_posix(),
    )
    for p in files:
        data = p.read_bytes()
        h.update(p.relative_to(path).as_posix().encode())
        h.update(b"\0" + str(len(data)).encode() + b"\0")
        h.update(data)
    return h.hexdigest()


def _fingerprint_counts(rel: Path) -> bool:
    if any(part in _FINGERPRINT_SKIP_DIRS for part in rel.parts):
        return False
    return rel.suffix not in _FINGERPRINT_SKIP_SUFFIXES


@dataclass
class Project:
    """A loaded project. Construct with :func:`load_project`."""

    root: Path
    config: ProjectConfig
    _tasks: list[Task] = field(repr=False)

    @property
    def file(self) -> Path:
        return self.root / PROJECT_FILE

    @property
    def state_dir(self) -> Path:
        return self.root / STATE_DIR

    @property
    def candidates_dir(self) -> Path:
        return (self.root / self.config.candidates).resolve()

    @cached_property
    def gate_config(self) -> GateConfig:
        values = {"pass_threshold": self.config.pass_threshold, **self.config.gate}
        return GateConfig(**values)

    @property
    def all_tasks(self) -> list[Task]:
        return list(self._tasks)

    @cached_property
    def _task_by_id(self) -> dict[str, Task]:
        return {t.id: t for t in self._tasks}

    # -- splits -----------------------------------------------------------------------------
    def _compute_split(self) -> dict[str, list[str]]:
        spec = self.config.splits
        if spec.explicit:
            split: dict[str, list[str]] = {name: list(getattr(spec, name)) for name in SPLIT_NAMES}
            seen: dict[str, str] = {}
            for name, ids in split.items():
                for tid in ids:
                    if tid not in self._task_by_id:
                        raise ConfigError(f"{self.file}: splits.{name}: unknown task id {tid!r}")
                    if tid in seen:
                        raise ConfigError(
                            f"{self.file}: task {tid!r} is in both {seen[tid]} and {name}"
                        )
                    seen[tid] = name
            return split
        ids = sorted(self._task_by_id)
        random.Random(spec.seed).shuffle(ids)
        n = len(ids)
        n_train = round(float(spec.train) * n)  # type: ignore[arg-type]
        n_val = min(round(float(spec.val) * n), n - n_train)  # type: ignore[arg-type]
        return {
            "train": ids[:n_train],
            "val": ids[n_train : n_train + n_val],
            "test": ids[n_train + n_val :],
        }

    def frozen_split(self) -> dict[str, list[str]]:
        """The split, frozen in ``.honesteval/splits.json`` on first use and read after."""
        store = Store(self.state_dir)
        stored = store.read_splits()
        if stored is None:
            split = self._compute_split()
            stored = store.freeze_splits(
                {"seed": self.config.splits.seed, "created_at": utc_now(), **split}
            )
        for name in SPLIT_NAMES:
            for tid in stored.get(name, []):
                if tid not in self._task_by_id:
                    raise ConfigError(
                        f"{store.root / 'splits.json'}: frozen {name} task {tid!r} is no longer"
                        f" in {self.config.tasks}"
                    )
        return {name: list(stored.get(name, [])) for name in SPLIT_NAMES}

    def tasks(self, split: str) -> list[Task]:
        """The tasks of one split, in the frozen order."""
        if split not in SPLIT_NAMES:
            raise ConfigError(f"unknown split {split!r}: use one of train, val, test")
        return [self._task_by_id[tid] for tid in self.frozen_split()[split]]

    # -- candidates -------------------------------------------------------------------------
    def _candidate_paths(self) -> dict[str, Path]:
        folder = self.candidates_dir
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

    def candidate_names(self) -> list[str]:
        return list(self._candidate_paths())

    def candidate(self, name: str) -> Candidate:
        paths = self._candidate_paths()
        if name not in paths:
            known = ", ".join(paths) or "none"
            raise ConfigError(f"unknown candidate {name!r} (candidates: {known})")
        path = paths[name]
        return Candidate(name=name, path=str(path), fingerprint=fingerprint_path(path))


def load_project(path: str | Path) -> Project:
    """Load a project from its folder (or its ``honesteval.yaml``) and validate its tasks."""
    p = Path(path).expanduser()
    file = p if p.is_file() else p / PROJECT_FILE
    if not file.is_file():
        raise ConfigError(f"no {PROJECT_FILE} in {p}")
    root = file.parent.resolve()
    config = parse_project_file(file)
    tasks = _load_tasks(root / config.tasks)
    return Project(root=root, config=config, _tasks=tasks)
