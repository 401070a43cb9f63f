"""The Eve-compatible ``steps`` scorer (SPEC §5.1): shell steps and judge steps in order.

Every (task, trial) gets a fresh workspace under ``.honesteval/workspaces/``::

    task.json  solver/ (a copy of the candidate + output.json)  logs/evaluate/
    logs/evaluate/score.yaml                         what the steps accumulate
    logs/evaluate/steps/step_NN_<name>/{stdout.txt,stderr.txt,status.txt}

A step that writes a score and exits 0 is a real score (a failed candidate scoring 0 is
``ok``). A step that exits non-zero, a missing or malformed score.yaml, a missing numeric leaf
of ``failure_score``, a judge that cannot be reached or gives no verdict: the trial is a
``scorer_error`` (missing data). ``failure_score`` is still written into the trial record for
Eve compatibility; it is averaged in only with ``count_failure_score: true``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from honesteval._context import current_info
from honesteval.errors import ConfigError, InfraError
from honesteval.models import Rollout, Score, Task
from honesteval.project import EVE_KEYS_NOT_USED
from honesteval.store import Store, safe_name

from ._expression import ExpressionError, ScoreExpression
from ._openai import ChatClient, require_key
from ._process import run_isolated
from ._workspace import Example, Workspace, build, remove, set_read_only, solver_hash

if TYPE_CHECKING:
    from honesteval.project import Project

_FENCE = re.compile(r"```(?:ya?ml|json)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_TAIL = 500
_log = logging.getLogger(__name__)


class StepFailed(Exception):
    """A step could not produce a score: the trial becomes a scorer_error."""


@dataclass(frozen=True)
class ShellStep:
    name: str
    path: Path


@dataclass(frozen=True)
class JudgeStep:
    name: str
    prompt_dir: Path
    immutable: Path | None
    immutable_hash: str | None


def _hash_tree(path: Path) -> str:
    h = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        h.update(f.relative_to(path.parent).as_posix().encode() + b"\0")
        h.update(f.read_bytes())
    return h.hexdigest()


def _write_status(step_dir: Path, ok: bool, detail: str) -> None:
    """Eve's ``status.txt``: ``ok`` or ``failed`` on the first line; why on the second."""
    (step_dir / "status.txt").write_text(f"{'ok' if ok else 'failed'}\n{detail}\n")


def numeric_leaves(tree: Any, prefix: str = "") -> dict[str, float]:
    """Dotted paths of every numeric (not bool) leaf of a nested mapping."""
    out: dict[str, float] = {}
    if isinstance(tree, dict):
        for key, value in tree.items():
            out |= numeric_leaves(value, f"{prefix}{key}.")
    elif isinstance(tree, int | float) and not isinstance(tree, bool):
        out[prefix[:-1]] = float(tree)
    return out


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _config_path(root: Path, raw: object) -> Path:
    """A path from the project file, as Eve resolves it: ``~`` expanded, relative to the
    project folder, symlinks followed. The project file is the user's own: a step may live
    anywhere (an absolute path, a symlinked ``configs/``)."""
    path = Path(str(raw)).expanduser()
    return (path if path.is_absolute() else root / path).resolve()


def _shell_step(root: Path, raw: object, label: str) -> ShellStep:
    path = _config_path(root, raw)
    if path.suffix != ".sh":
        raise ConfigError(f"{label}: a shell step must be a .sh file, got {raw!r}")
    if not path.is_file():
        raise ConfigError(f"{label}: shell step {raw!r} not found")
    return ShellStep(name=path.stem, path=path)


def _judge_step(project: Project, raw: dict[str, Any], label: str) -> JudgeStep:
    unknown = set(raw) - {"prompt", "immutable", "name"}
    if unknown:
        raise ConfigError(f"{label}: unknown key(s) {sorted(unknown)} in a judge step")
    prompt_dir = _config_path(project.root, raw["prompt"])
    if not (prompt_dir / "ENTRYPOINT.md").is_file():
        raise ConfigError(f"{label}: judge prompt {raw['prompt']!r} has no ENTRYPOINT.md")
    immutable = None
    if raw.get("immutable") is not None:
        immutable = _config_path(project.root, raw["immutable"])
        if not immutable.exists():
            raise ConfigError(f"{label}: immutable {raw['immutable']!r} not found")
    # Eve's rule: the name is the prompt folder's, minus "prompt_" (prompt_assess -> assess).
    name = str(raw.get("name") or prompt_dir.name.removeprefix("prompt_") or prompt_dir.name)
    return JudgeStep(
        name=name,
        prompt_dir=prompt_dir,
        immutable=immutable,
        immutable_hash=None if immutable is None else _hash_tree(immutable),
    )


def parse_steps(project: Project) -> list[ShellStep | JudgeStep]:
    """Validate every step before any trial runs; errors name the step.

    Dispatch is by form, as in Eve: a string is a shell step (``.sh``); a mapping with
    ``prompt`` is a judge step; a mapping with ``path`` (and no ``immutable``) is a shell step.
    """
    cfg = project.config.evaluation
    assert cfg is not None
    if cfg.scalar_score_expression is None:
        leaves = numeric_leaves(cfg.failure_score)
        if cfg.reward_key not in leaves:
            raise ConfigError(
                f"evaluation.reward_key {cfg.reward_key!r} is not a numeric leaf of "
                f"failure_score (leaves: {', '.join(leaves) or 'none'})"
            )
    steps: list[ShellStep | JudgeStep] = []
    for i, raw in enumerate(cfg.steps, start=1):
        label = f"evaluation.steps[{i}]"
        if isinstance(raw, str):
            steps.append(_shell_step(project.root, raw, label))
        elif isinstance(raw, dict) and raw.get("prompt") is not None:
            steps.append(_judge_step(project, raw, label))
        elif isinstance(raw, dict) and raw.get("path") is not None and not raw.get("immutable"):
            if set(raw) - {"path"}:
                raise ConfigError(f"{label}: a {{path: ...}} shell step takes only 'path'")
            steps.append(_shell_step(project.root, raw["path"], label))
        else:
            raise ConfigError(
                f"{label}: {raw!r} is neither a shell step (a .sh path or {{path: x.sh}}) nor "
                "a judge step (a mapping with 'prompt')"
            )
    judges = [s.name for s in steps if isinstance(s, JudgeStep)]
    dupes = sorted({n for n in judges if judges.count(n) > 1})
    if dupes:
        raise ConfigError(f"evaluation.steps: duplicate judge name(s) {dupes}")
    if judges:
        if project.config.judge is None:
            raise ConfigError(f"evaluation.steps: judge step {judges[0]!r} needs a 'judge:' block")
        require_key(project.config.judge.api_key_env, "judge")
    return steps


def evaluator_fingerprint(project: Project, steps: list[ShellStep | JudgeStep]) -> str:
    """sha256 of what decides a score besides the candidate: the ``evaluation:`` and ``judge:``
    blocks and the content of every step file, prompt and rubric (wherever they live). A stored
    trial is reused only when this matches."""
    h = hashlib.sha256()
    cfg = project.config
    blocks = {"evaluation": cfg.evaluation, "judge": cfg.judge}
    h.update(
        json.dumps(
            {k: v and v.model_dump() for k, v in blocks.items()}, sort_keys=True, default=str
        ).encode()
    )
    for step in steps:
        if isinstance(step, ShellStep):
            h.update(b"shell\0" + step.path.read_bytes())
        else:
            h.update(b"judge\0" + _hash_tree(step.prompt_dir).encode())
            if step.immutable is not None and step.immutable.exists():
                h.update(_hash_tree(step.immutable).encode())
    if cfg.evaluation is not None and cfg.evaluation.include_solver_examples:
        best = Store(project.state_dir).read_best() or {}
        h.update(f"examples\0{best.get('name')}\0{best.get('fingerprint')}".encode())
    return h.hexdigest()


class StepsScorer:
    """Run the evaluation steps for one rollout and read the reward out of score.yaml."""

    def __init__(self, project: Project):
        cfg = project.config.evaluation
        assert cfg is not None
        self.project = project
        self.cfg = cfg
        self.steps = parse_steps(project)
        self.expression = (
            None
            if cfg.scalar_score_expression is None
            else ScoreExpression(cfg.scalar_score_expression)
        )
        self.notes = [
            f"evaluation.{key}: {why}"
            for key, why in EVE_KEYS_NOT_USED.items()
            if key in cfg.model_fields_set
        ]
        for note in self.notes:
            _log.info(note)
        self.failure_reward: float | None = None
        if cfg.count_failure_score:
            try:
                self.failure_reward = self._reward(cfg.failure_score)
            except StepFailed as exc:
                raise ConfigError(f"evaluation.failure_score has no reward: {exc}") from None
        self.timeout_s = project.config.timeout_s
        judge = project.config.judge
        self.judge_cfg = judge
        self.judge = (
            None
            if judge is None
            else ChatClient(
                judge.base_url,
                judge.model,
                api_key_env=judge.api_key_env,
                timeout_s=judge.timeout_s,
                temperature=judge.temperature,
                max_tokens=judge.max_tokens,
            )
        )

    @property
    def fingerprint(self) -> str:
        """The evaluator fingerprint, read afresh: a step file edited since the adapter was
        built changes it (the files may live outside the project)."""
        return evaluator_fingerprint(self.project, self.steps)

    # -- workspace --------------------------------------------------------------------------
    def _workspace(self, task_id: str) -> Path:
        info = current_info.get()
        if info is None or info.probe:  # `honesteval check`: a throw-away folder
            return Path(tempfile.mkdtemp(prefix="honesteval-workspace-")) / "ws"
        return (
            self.project.state_dir
            / "workspaces"
            / info.split
            / safe_name(info.candidate.name)
            / info.candidate.fingerprint[:12]
            / f"{safe_name(task_id)}__s{info.seed}"
        )

    def _examples(self) -> list[Example]:
        """Eve's ``include_solver_examples``: the current best, with its val reward."""
        if not self.cfg.include_solver_examples:
            return []
        best = Store(self.project.state_dir).read_best()
        if best is None:
            return []
        try:
            path = Path(self.project.candidate(str(best["name"])).path)
        except ConfigError:
            return []  # the current best's folder is gone: nothing to show
        result = best.get("result") or {}
        score = {k: result.get(k) for k in ("reward", "stderr", "coverage", "split")}
        return [Example(name=str(best["name"]), path=path, score=score)]

    def score(self, task: Task, rollout: Rollout) -> Score:
        info = current_info.get()
        evaluator = self.fingerprint  # before the steps run: what this score was made with
        root = self._workspace(task.id)
        ws = build(root, task, rollout, info.candidate if info else None, self._examples())
        try:
            return self._score_in(ws, task, rollout, evaluator)
        finally:
            if info is None or info.probe:
                remove(root.parent)
            else:
                set_read_only(ws.solver, read_only=False)  # the state folder stays removable

    def _score_in(self, ws: Workspace, task: Task, rollout: Rollout, evaluator: str) -> Score:
        info = current_info.get()
        log_root = ws.log_root
        env = {
            **os.environ,
            "EVE_WORKSPACE_ROOT": str(ws.root),
            "EVE_SOLVER_ROOT": str(ws.solver),
            "EVE_EVAL_LOG_ROOT": str(log_root),
            "HONESTEVAL_TASK": str(ws.task_file),
            "HONESTEVAL_OUTPUT": str(ws.output_file),
            "HONESTEVAL_TASK_ID": task.id,
            "HONESTEVAL_SEED": str(info.seed if info else 0),
            "HONESTEVAL_TRIAL": str(info.trial if info else 0),
            "HONESTEVAL_CANDIDATE": info.candidate.name if info else "",
            "HONESTEVAL_CANDIDATE_DIR": info.candidate.path if info else "",
            "HONESTEVAL_PROJECT": str(self.project.root),
            "HONESTEVAL_PYTHON": sys.executable,
            # Eve's steps call `python3`: make it the interpreter running honesteval (with its
            # packages, e.g. yaml), as Eve puts its runtime first on PATH.
            "PATH": os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
            # solver/ is read-only, as in Eve: no byte-code caches written into it.
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        candidate_hash = solver_hash(ws)
        timings: list[dict[str, Any]] = []
        tokens = 0
        judged = False
        try:
            for n, step in enumerate(self.steps, start=1):
                step_dir = log_root / "steps" / f"step_{n:02d}_{safe_name(step.name)}"
                step_dir.mkdir()
                t0 = time.perf_counter()
                try:
                    if isinstance(step, ShellStep):
                        self._run_shell(step, ws.root, env, step_dir)
                    else:
                        judged = True
                        tokens += self._run_judge(step, task, rollout, log_root, step_dir)
                finally:
                    timings.append(
                        {
                            "step": step.name,
                            "seconds": time.perf_counter() - t0,
                            "logs": str(step_dir),
                        }
                    )
                if solver_hash(ws) != candidate_hash:
                    raise StepFailed(f"a step modified the candidate (step {step.name!r})")
            reward, verdict = self._read_score(log_root)
        except StepFailed as exc:
            return self._failed(str(exc), ws.root, timings, tokens if judged else None, evaluator)
        error_txt = log_root / "error.txt"
        feedback = verdict.get("summary") if isinstance(verdict.get("summary"), str) else None
        if feedback is None and error_txt.exists():
            feedback = error_txt.read_text(errors="replace")[:_TAIL]
        return Score(
            reward=reward,
            feedback=feedback,
            tokens=tokens if judged else None,
            details={
                "workspace": str(ws.root),
                "steps": timings,
                "score_yaml": verdict,
                "evaluator": evaluator,
            },
        )

    def _failed(
        self,
        reason: str,
        ws: Path,
        timings: list[dict[str, Any]],
        tokens: int | None,
        evaluator: str,
    ) -> Score:
        details = {
            "workspace": str(ws),
            "steps": timings,
            "failure_score": self.cfg.failure_score,
            "evaluator": evaluator,
        }
        if self.failure_reward is not None:
            return Score(
                reward=self.failure_reward,
                feedback=f"evaluation failed: {reason}",
                tokens=tokens,
                details=details | {"counted_failure": reason},
            )
        return Score(errored=True, reason=reason, tokens=tokens, details=details)

    # -- steps ------------------------------------------------------------------------------
    def _run_shell(self, step: ShellStep, ws: Path, env: dict[str, str], step_dir: Path) -> None:
        try:
            done = run_isolated(
                ["bash", str(step.path)],
                cwd=ws,
                env=env,
                stdout=step_dir / "stdout.txt",
                stderr=step_dir / "stderr.txt",
                timeout_s=self.timeout_s,
            )
        except OSError as exc:
            _write_status(step_dir, False, f"cannot start bash: {exc.strerror}")
            raise StepFailed(f"step {step.name!r}: cannot start bash: {exc.strerror}") from None
        if done.timed_out:
            _write_status(step_dir, False, "timeout")
            raise StepFailed(f"step {step.name!r} ran past {self.timeout_s:g} s")
        _write_status(step_dir, done.returncode == 0, f"exit {done.returncode}")
        if done.returncode != 0:
            tail = (step_dir / "stderr.txt").read_text(errors="replace")[-_TAIL:].strip()
            raise StepFailed(f"step {step.name!r} exited {done.returncode}: {tail}")

    def _run_judge(
        self, step: JudgeStep, task: Task, rollout: Rollout, log_root: Path, step_dir: Path
    ) -> int:
        assert self.judge is not None and self.judge_cfg is not None
        self._check_rubric(step, "before")
        entry = (step.prompt_dir / "ENTRYPOINT.md").read_text(encoding="utf-8")
        rubric = ""
        if step.immutable is not None:
            files = (
                [step.immutable]
                if step.immutable.is_file()
                else sorted(p for p in step.immutable.rglob("*") if p.is_file())
            )
            rubric = "\n\n".join(f"## {f.name}\n\n{f.read_text(errors='replace')}" for f in files)
        score_path = log_root / "score.yaml"
        so_far = score_path.read_text() if score_path.exists() else "{}"
        user = (
            f"# Task {task.id}\n\n```json\n{json.dumps(task.input, default=str)}\n```\n\n"
            f"# Output\n\n```json\n{json.dumps(rollout.output, default=str)}\n```\n\n"
            f"# score.yaml so far\n\n```yaml\n{so_far}\n```\n\n"
            "Reply with your verdict as a fenced YAML or JSON mapping."
        )
        messages = [
            {"role": "system", "content": entry + ("\n\n# Rubric\n\n" + rubric if rubric else "")},
            {"role": "user", "content": user},
        ]
        info = current_info.get()
        reply, tokens = self._ask(messages, info.seed if info else None, step_dir)
        self._check_rubric(step, "after")
        (step_dir / "stdout.txt").write_text(reply)
        verdict = self._verdict(reply)
        if verdict is None:
            _write_status(step_dir, False, "no verdict")
            raise StepFailed(f"judge step {step.name!r}: the reply had no fenced YAML/JSON verdict")
        current = yaml.safe_load(so_far) if score_path.exists() else {}
        if not isinstance(current, dict):
            raise StepFailed("score.yaml is not a mapping")
        score_path.write_text(yaml.safe_dump(deep_merge(current, verdict), sort_keys=False))
        _write_status(step_dir, True, "verdict merged")
        return tokens

    def _ask(
        self, messages: list[dict[str, str]], seed: int | None, step_dir: Path
    ) -> tuple[str, int]:
        from honesteval.trials import backoff_delay

        assert self.judge is not None and self.judge_cfg is not None
        errors = []
        for attempt in range(1, self.judge_cfg.retries + 2):
            try:
                reply = self.judge.complete(messages, seed=seed)
                return reply.text, reply.tokens or 0
            except InfraError as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                if attempt > self.judge_cfg.retries:
                    break
                time.sleep(
                    backoff_delay(
                        attempt,
                        self.judge_cfg.retry_backoff_s,
                        retry_after=getattr(exc, "retry_after", None),
                    )
                )
        (step_dir / "stderr.txt").write_text("\n".join(errors) + "\n")
        _write_status(step_dir, False, "judge unreachable")
        raise StepFailed(f"judge unreachable after {len(errors)} attempt(s): {errors[-1]}")

    @staticmethod
    def _verdict(reply: str) -> dict[str, Any] | None:
        for block in reversed(_FENCE.findall(reply)):
            try:
                data = yaml.safe_load(block)  # JSON is YAML
            except yaml.YAMLError:
                continue
            if isinstance(data, dict):
                return data
        return None

    @staticmethod
    def _check_rubric(step: JudgeStep, when: str) -> None:
        if step.immutable is None:
            return
        now = _hash_tree(step.immutable) if step.immutable.exists() else "missing"
        if now != step.immutable_hash:
            raise StepFailed(
                f"judge step {step.name!r}: the immutable rubric changed ({when} the judge call)"
            )

    def _read_score(self, log_root: Path) -> tuple[float, dict[str, Any]]:
        path = log_root / "score.yaml"
        if not path.exists():
            raise StepFailed("score.yaml missing after the last step")
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            raise StepFailed(f"score.yaml is not valid YAML: {exc}") from None
        if not isinstance(data, dict):
            raise StepFailed(f"score.yaml must be a mapping, got {type(data).__name__}")
        leaves = numeric_leaves(data)
        for key in numeric_leaves(self.cfg.failure_score):
            if key not in leaves:
                raise StepFailed(f"score.yaml lacks the numeric leaf {key!r}")
        return self._reward(data), data

    def _reward(self, tree: dict[str, Any]) -> float:
        """The reward of a score tree: ``scalar_score_expression`` or the ``reward_key`` leaf."""
        if self.expression is not None:
            try:
                return self.expression.evaluate(tree)
            except ExpressionError as exc:
                raise StepFailed(str(exc)) from None
        reward = numeric_leaves(tree).get(self.cfg.reward_key)
        if reward is None:
            raise StepFailed(f"score.yaml lacks the numeric leaf {self.cfg.reward_key!r}")
        if not math.isfinite(reward):
            raise StepFailed(f"score.yaml {self.cfg.reward_key} is not finite: {reward}")
        return reward
