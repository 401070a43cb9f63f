"""Load and validate a project: ``honesteval.yaml``, its tasks, its frozen split, its candidates.

Everything here is plain Python: the flows and the CLI call it, tests call it directly.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import os
import random
import typing
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator, model_validator

from honesteval.adapters import ADAPTER_KINDS, AdapterConfig
from honesteval.errors import ConfigError, StateError, StateFileError
from honesteval.models import Candidate, GateConfig, SplitName, Task, TimeoutIs, utc_now
from honesteval.project.strict import StrictModel
from honesteval.project.yaml_lines import line_of
from honesteval.redaction import register_secret_env
from honesteval.store.state_dir import STATE_DIR, Store

PROJECT_FILE = "honesteval.yaml"
SPLIT_NAMES: tuple[SplitName, ...] = ("train", "val", "test")
# Files that running a candidate creates but that are not the candidate.
_FINGERPRINT_SKIP_DIRS = {"__pycache__", ".pytest_cache", ".mypy_cache"}
_FINGERPRINT_SKIP_SUFFIXES = {".pyc", ".pyo"}


class SplitsChangedWarning(UserWarning):
    """``splits:`` in the project file no longer matches the frozen split."""


#: The most trials per task a project (or --trials) may ask for: a typo such as 1000000000
#: is a clear error, not a run that never ends.
MAX_TRIALS = 10_000
#: The most values a project file may expand to (YAML aliases can make a few lines huge).
MAX_YAML_VALUES = 100_000
_MAX_MESSAGE = 300

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
    trials: int = Field(default=3, ge=1, le=MAX_TRIALS)
    base_seed: int = 0
    pass_threshold: float = Field(default=1.0, ge=0, le=1)
    failure_reward: float = Field(default=0.0, ge=0, le=1)
    retries: int = Field(default=3, ge=0)
    retry_backoff_s: float = Field(default=1.0, ge=0)
    timeout_s: float = Field(default=600.0, gt=0)
    #: Whose time ``timeout_s`` measures: ``failure`` (the candidate's: a trial past it is
    #: ``failed`` at ``failure_reward``, never retried) or ``missing`` (the infrastructure's:
    #: retried, then ``infra_error``). A service's own network timeout is always missing data.
    timeout_is: TimeoutIs = "failure"
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


#: Plain-dict keys of the project file that a validator checks against a model.
_CHECKED_AS: dict[str, type[BaseModel]] = {"gate": GateConfig}


def _known_keys(model: type[BaseModel], loc: Sequence[int | str]) -> list[str]:
    """The keys a model accepts at ``loc`` (a pydantic error location), [] when unknown."""
    current: Any = model
    for part in loc:
        if isinstance(part, int):
            continue
        fields = getattr(current, "model_fields", None)
        if fields is None or part not in fields:
            return []
        current = _CHECKED_AS.get(part) or _model_in(fields[part].annotation)
    fields = getattr(current, "model_fields", None)
    return [] if fields is None else [f.alias or name for name, f in fields.items()]


def _model_in(annotation: Any) -> Any:
    """The pydantic model inside ``X | None``, ``list[X]``, ``dict[str, X]`` (else None)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _did_you_mean(key: str, known: list[str]) -> str:
    """`` (did you mean 'trials'?)`` for a key one typo away from a known one."""
    close = difflib.get_close_matches(key, known, n=1, cutoff=0.75)
    return f" (did you mean {close[0]!r}?)" if close else ""


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
        msg = "unknown key" + _did_you_mean(str(loc[-1]), _known_keys(ProjectConfig, loc[:-1]))
    elif first["type"] == "literal_error":
        msg = f"{msg} (got {first.get('input')!r})"
    msg = msg if len(msg) <= _MAX_MESSAGE else msg[:_MAX_MESSAGE] + "…"
    more = f" (and {len(err.errors()) - 1} more)" if len(err.errors()) > 1 else ""
    return f"{where}: {key}: {msg}{more}"


if TYPE_CHECKING:
    _SafeLoader = yaml.SafeLoader
else:  # libyaml's parser when PyYAML was built with it (~10x faster on a long split list)
    _SafeLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _UniqueKeyLoader(_SafeLoader):
    """A SafeLoader that refuses a key given twice in one mapping (YAML keeps the last one
    silently, so a repeated ``trials:`` would quietly win)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, list | dict):
                continue  # unhashable: SafeLoader reports it itself
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def _too_big(data: Any, budget: int) -> bool:
    """True when ``data`` has more than ``budget`` values counting shared ones every time they
    appear (an alias bomb is small as a graph and huge as a tree); stops at the budget."""
    stack, count = [data], 0
    while stack:
        item = stack.pop()
        count += 1
        if count > budget:
            return True
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def parse_project_file(path: Path) -> ProjectConfig:
    """Read and validate ``honesteval.yaml``; errors name the key and the file line."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = str(getattr(exc, "problem", exc))[:_MAX_MESSAGE]
        raise ConfigError(f"{where}: not valid YAML: {problem}") from None
    if _too_big(data, MAX_YAML_VALUES):
        raise ConfigError(
            f"{path}: expands to more than {MAX_YAML_VALUES} values (YAML aliases?); refused"
        )
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
        shown = repr(tid)[:_MAX_MESSAGE]
        raise ConfigError(
            f"{path}:{lineno}: task id must be a string, got {type(tid).__name__} {shown}"
        )
    if "\0" in tid:  # no environment variable, file name or argument can carry it
        raise ConfigError(f"{path}:{lineno}: task id {tid[:_MAX_MESSAGE]!r} holds a NUL character")
    if tid in seen:
        raise ConfigError(f"{path}:{lineno}: duplicate task id {tid[:_MAX_MESSAGE]!r}")
    try:
        task = Task.model_validate(obj)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        message = first["msg"].removeprefix("Value error, ")  # pydantic's prefix for our own
        raise ConfigError(f"{path}:{lineno}: {key}: {message[:_MAX_MESSAGE]}") from None
    seen.add(task.id)
    tasks.append(task)


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


_said: set[Any] = set()


def _first_time(key: Any) -> bool:
    """True the first time this process sees ``key`` (a warning is said once, not per load)."""
    if key in _said:
        return False
    _said.add(key)
    return True


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

    @cached_property
    def scoring(self) -> str:
        return scoring_fingerprint(self.root, self.config)

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

    def _splits_digest(self) -> str:
        """What ``splits:`` said when the split was frozen (to notice a later edit)."""
        text = json.dumps(self.config.splits.model_dump(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def frozen_split(self) -> dict[str, list[str]]:
        """The split, frozen in ``.honesteval/splits.json`` on first use and read after.

        A split whose ``val`` is empty is not frozen (a first run on an empty or broken tasks
        file must not block the project forever); it is computed again on the next use.
        ``splits:`` edited after the split was frozen keeps the frozen split (that is the point
        of freezing it) and says so: a :class:`SplitsChangedWarning`, one line in the CLI.
        """
        store = Store(self.state_dir)
        stored = store.read_splits()
        digest = self._splits_digest()
        if stored is None:
            split = self._compute_split()
            if not split["val"]:  # never frozen, so nothing can have been lost
                return split
            if store.has_state():  # it was frozen once: re-deriving could move a task
                raise StateFileError(
                    f"{store.root / 'splits.json'} is missing but the project has stored trials "
                    "or results: the split is not derived again silently (a task could cross "
                    f"into or out of test); run `honesteval refreeze-splits --project "
                    f"{self.root}` to write it again, checked against the stored trials"
                )
            stored = store.freeze_splits(
                {
                    "seed": self.config.splits.seed,
                    "created_at": utc_now(),
                    "splits_config": digest,
                    **split,
                }
            )
        if stored.get("splits_config", digest) != digest and _first_time((self.file, digest)):
            warnings.warn(
                f"{self.file}: 'splits:' changed after the split was frozen in "
                f"{store.root / 'splits.json'} ({stored.get('created_at')}); the frozen split "
                "is used (to split by the new 'splits:', remove splits.json and run "
                "`honesteval refreeze-splits`: it refuses to move a task with stored trials "
                "across the test boundary)",
                SplitsChangedWarning,
                stacklevel=2,
            )
        for name in SPLIT_NAMES:
            for tid in stored.get(name, []):
                if tid not in self._task_by_id:
                    raise ConfigError(
                        f"{store.root / 'splits.json'}: frozen {name} task {tid!r} is no longer"
                        f" in {self.config.tasks}"
                    )
        return {name: list(stored.get(name, [])) for name in SPLIT_NAMES}

    def refreeze_split(self) -> dict[str, list[str]]:
        """Write a lost ``splits.json`` again: the split ``splits:`` derives from today's
        tasks, refused (:class:`StateError`, nothing written) when it would put a task with
        stored train or val trials into test, or a task with stored test trials outside it."""
        store = Store(self.state_dir)
        if store.read_splits() is not None:
            raise StateError(f"{store.root / 'splits.json'} exists: nothing to re-freeze")
        split = self._compute_split()
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
                f"list the three splits explicitly in {self.file}"
            )
        if not split["val"]:
            raise StateError("cannot re-freeze the split: the derived val split is empty")
        store.freeze_splits(
            {
                "seed": self.config.splits.seed,
                "created_at": utc_now(),
                "splits_config": self._splits_digest(),
                "refrozen": True,
                **split,
            }
        )
        return self.frozen_split()

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
        """A candidate by its name in the candidates folder, or by a path to any file or
        folder (a name never holds a path separator); a path candidate is named by its
        absolute path."""
        if "/" in name or os.sep in name:
            return _path_candidate(name)
        paths = self._candidate_paths()
        if name not in paths:
            known = ", ".join(paths) or "none"
            raise ConfigError(f"unknown candidate {name!r} (candidates: {known})")
        path = paths[name]
        if not path.exists():
            raise ConfigError(f"candidate {name!r}: {path} is a broken symlink")
        return Candidate(name=name, path=str(path), fingerprint=fingerprint_path(path))


def _path_candidate(ref: str) -> Candidate:
    path = Path(ref).expanduser().resolve()
    if not path.exists():
        raise ConfigError(f"candidate {ref!r}: no such file or folder")
    return Candidate(name=str(path), path=str(path), fingerprint=fingerprint_path(path))


def load_project(path: str | Path) -> Project:
    """Load a project from its folder (or its ``honesteval.yaml``) and validate its tasks."""
    p = Path(path).expanduser()
    file = p if p.is_file() else p / PROJECT_FILE
    if not file.is_file():
        raise ConfigError(f"no {PROJECT_FILE} in {p}: pass --project PATH or run `honesteval init`")
    root = file.parent.resolve()
    config = parse_project_file(file)
    register_secret_env(
        *config.adapter.secret_env_names(),
        None if config.judge is None else config.judge.api_key_env,
    )
    tasks = _load_tasks(root / config.tasks)
    return Project(root=root, config=config, _tasks=tasks)
