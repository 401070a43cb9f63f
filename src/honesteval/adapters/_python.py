"""The ``python`` target and scorer: ``module:function`` names resolved in the project folder."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import numbers
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from honesteval.errors import ConfigError, did_you_mean
from honesteval.models import Candidate, Rollout, Score, Task

from ._base import AdapterParts, ModuleRef, TargetConfig, checked_score

if TYPE_CHECKING:
    from honesteval.project.loader import Project

_import_lock = threading.Lock()


def _module_file(root: Path, module: str) -> Path | None:
    base = root.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def load_callable(root: Path, ref: str) -> Callable[..., Any]:
    """Import ``module:function``, looking in the project folder first.

    A module that lives in the project is loaded under a name private to that project, so two
    projects that both have a ``target.py`` never see each other's (``sys.modules`` would
    otherwise hand the first one to both). The project folder is first on ``sys.path`` while it
    loads, so its own imports of sibling modules work.
    """
    module_name, _, func_name = ref.partition(":")
    with _import_lock:
        file = _module_file(root, module_name)
        try:
            if file is None:
                module = importlib.import_module(module_name)
            else:
                tag = hashlib.sha256(str(root).encode()).hexdigest()[:10]
                unique = f"_honesteval_project_{tag}.{module_name}"
                loaded = sys.modules.get(unique)
                if loaded is not None:
                    module = loaded
                else:
                    spec = importlib.util.spec_from_file_location(unique, file)
                    assert spec is not None and spec.loader is not None
                    module = importlib.util.module_from_spec(spec)
                    sys.path.insert(0, str(root))
                    try:
                        spec.loader.exec_module(module)
                    finally:
                        sys.path.remove(str(root))
                    sys.modules[unique] = module
        except ImportError as exc:
            raise ConfigError(f"cannot import {module_name!r} for {ref!r}: {exc}") from None
        except Exception as exc:  # the user's module raised while loading
            raise ConfigError(
                f"importing {module_name!r} for {ref!r} raised {type(exc).__name__}: {exc}"
            ) from None
    fn: object = getattr(module, func_name, None)
    if not callable(fn):
        where = repr(module_name) if file is None else f"{module_name!r} ({file})"
        functions = [n for n, v in vars(module).items() if callable(v) and not n.startswith("_")]
        raise ConfigError(
            f"{ref!r}: module {where} has no function {func_name!r}"
            + did_you_mean(func_name, functions)
        )
    return fn


class PythonTarget:
    """``run(task: dict, candidate_dir: str, seed: int) -> output`` (JSON-able)."""

    enforces_timeout = False  # a Python call cannot be stopped: the runner waits in a thread

    def __init__(self, root: Path, ref: str):
        self.ref = ref
        self.fn = load_callable(root, ref)

    def run(self, task: Task, candidate: Candidate, *, seed: int, trial: int) -> Rollout:
        return Rollout(output=self.fn(task.model_dump(), candidate.path, seed))


class PythonTargetConfig(TargetConfig):
    """``kind: python``: ``target: module:function`` called in this process."""

    kind: Literal["python"]
    target: ModuleRef
    #: run each trial in its own process, so timeout_s holds (and kills)
    isolate: bool = False

    def build(self, project: Project) -> AdapterParts:
        if self.isolate:
            from ._isolated import IsolatedPythonTarget

            return AdapterParts(
                IsolatedPythonTarget(project.root, self.target, timeout_s=project.config.timeout_s)
            )
        return AdapterParts(PythonTarget(project.root, self.target))

    def module_refs(self) -> list[str]:
        return [self.target, *super().module_refs()]


class NoTarget:
    """``kind: none``: no target runs, the output is null and the scorer does the work."""

    enforces_timeout = True  # returns at once: no thread needed

    def run(self, task: Task, candidate: Candidate, *, seed: int, trial: int) -> Rollout:
        return Rollout(output=None)


class NoTargetConfig(TargetConfig):
    """``kind: none``: the scorer (typically ``evaluation:`` steps) runs the candidate itself."""

    kind: Literal["none"]

    def build(self, project: Project) -> AdapterParts:
        return AdapterParts(NoTarget())


def score_from_value(value: Any) -> Score:
    """Turn what a scorer returned into a :class:`Score`; anything ungradeable is errored.

    Accepted: a number, or a mapping with ``reward`` (and optional ``feedback``,
    ``errored``, ``reason``). A bool, a string, NaN, ±inf or a reward outside [0, 1] is not a
    score: the trial becomes ``scorer_error`` (missing data), never a crash and never a zero.
    """
    feedback = reason = None
    errored = False
    if isinstance(value, dict):
        feedback = value.get("feedback")
        reason = value.get("reason")
        errored = bool(value.get("errored", False))
        reward = value.get("reward")
        if errored:
            return Score(
                errored=True,
                reason=str(reason or "the scorer said errored"),
                feedback=None if feedback is None else str(feedback),
            )
        if "reward" not in value:
            return Score(errored=True, reason="the scorer returned a mapping without 'reward'")
    else:
        reward = value
    if isinstance(reward, bool) or not isinstance(reward, numbers.Real):  # numpy scalars too
        return Score(errored=True, reason=f"reward is not a number: {reward!r}"[:300])
    # NaN, ±inf and the [0, 1] range: one rule for every scorer, in checked_score.
    return checked_score(
        Score(reward=float(reward), feedback=None if feedback is None else str(feedback))
    )


class PythonScorer:
    """``score(task: dict, output) -> float | {"reward", "feedback"?, "errored"?}``."""

    def __init__(self, root: Path, ref: str):
        self.ref = ref
        self.fn = load_callable(root, ref)

    def score(self, task: Task, rollout: Rollout) -> Score:
        return score_from_value(self.fn(task.model_dump(), rollout.output))
