"""Read ``honesteval.yaml`` into its schema; an error names the key and the file line."""

from __future__ import annotations

import typing
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import BaseModel, ValidationError

from honesteval.adapters import ADAPTER_KINDS
from honesteval.errors import ConfigError, did_you_mean
from honesteval.models import GateConfig
from honesteval.project.schema import ProjectConfig
from honesteval.project.yaml_lines import line_of

PROJECT_FILE = "honesteval.yaml"
#: The most values a project file may expand to (YAML aliases can make a few lines huge).
MAX_YAML_VALUES = 100_000
#: The most characters of the user's own input an error line repeats.
MAX_MESSAGE = 300


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
        msg = "unknown key" + did_you_mean(str(loc[-1]), _known_keys(ProjectConfig, loc[:-1]))
    elif first["type"] == "literal_error":
        msg = f"{msg} (got {first.get('input')!r})"
    msg = msg if len(msg) <= MAX_MESSAGE else msg[:MAX_MESSAGE] + "…"
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
        problem = str(getattr(exc, "problem", exc))[:MAX_MESSAGE]
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
