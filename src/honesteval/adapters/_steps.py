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
import math
import os
import re
import shutil
import subprocess
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
from honesteval.retry import RetryPolicy
from honesteval.store import safe_name

from ._openai import ChatClient, require_key

if TYPE_CHECKING:
    from honesteval.project import Project

_FENCE = re.compile(r"```(?:ya?ml|json)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_TAIL = 500


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


def _inside(root: Path, rel: str, what: str) -> Path:
    path = (root / rel).resolve()
    if not path.is_relative_to(root):
        raise ConfigError(f"{what}: {rel!r} escapes the project folder")
    return path


def _hash_tree(path: Path) -> str:
    h = hashlib.sha256()
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    for f in files:
        h.update(f.relative_to(path.parent).as_posix().encode() + b"\0")
        h.update(f.read_bytes())
    return h.hexdigest()


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


def parse_steps(project: Project) -> list[ShellStep | JudgeStep]:
    """Validate every step before any trial runs; errors name the step."""
    cfg = project.config.evaluation
    assert cfg is not None
    root = project.root
    leaves = numeric_leaves(cfg.failure_score)
    if cfg.reward_key not in leaves:
        raise ConfigError(
            f"evaluation.reward_key {cfg.reward_key!r} is not a numeric leaf of failure_score "
            f"(leaves: {', '.join(leaves) or 'none'})"
        )
    steps: list[ShellStep | JudgeStep] = []
    for i, raw in enumerate(cfg.steps, start=1):
        label = f"evaluation.steps[{i}]"
        if isinstance(raw, str) and raw.endswith(".sh"):
            path = _inside(root, raw, label)
            if not path.is_file():
                raise ConfigError(f"{label}: shell step {raw!r} not found")
            steps.append(ShellStep(name=path.stem, path=path))
        elif isinstance(raw, dict) and "prompt" in raw:
            unknown = set(raw) - {"prompt", "immutable", "name"}
            if unknown:
                raise ConfigError(f"{label}: unknown key(s) {sorted(unknown)} in a judge step")
            prompt_dir = _inside(root, str(raw["prompt"]), label)
            if not (prompt_dir / "ENTRYPOINT.md").is_file():
                raise ConfigError(f"{label}: judge prompt {raw['prompt']!r} has no ENTRYPOINT.md")
            immutable = None
            if raw.get("immutable") is not None:
                immutable = _inside(root, str(raw["immutable"]), label)
                if not immutable.exists():
                    raise ConfigError(f"{label}: immutable {raw['immutable']!r} not found")
            if project.config.judge is None:
                raise ConfigError(f"{label}: a judge step needs a 'judge:' endpoint block")
            require_key(project.config.judge.api_key_env, "judge")
            steps.append(
                JudgeStep(
                    name=str(raw.get("name") or prompt_dir.name),
                    prompt_dir=prompt_dir,
                    immutable=immutable,
                    immutable_hash=None if immutable is None else _hash_tree(immutable),
                )
            )
        else:
            raise ConfigError(
                f"{label}: {raw!r} is neither a shell step (a path ending .sh) nor a judge "
                "step (a mapping with 'prompt')"
            )
    names = [s.name for s in steps]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ConfigError(f"evaluation.steps: duplicate step name(s) {dupes}")
    return steps


class StepsScorer:
    """Run the evaluation steps for one rollout and read the reward out of score.yaml."""

    def __init__(self, project: Project):
        cfg = project.config.evaluation
        assert cfg is not None
        self.project = project
        self.cfg = cfg
        self.steps = parse_steps(project)
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

    # -- workspace --------------------------------------------------------------------------
    def _workspace(self, task_id: str) -> Path:
        info = current_info.get()
        if info is None:  # a probe (`honesteval check`): a throw-away folder
            return Path(tempfile.mkdtemp(prefix="honesteval-workspace-")) / "ws"
        return (
            self.project.state_dir
            / "workspaces"
            / info.split
            / safe_name(info.candidate.name)
            / info.candidate.fingerprint[:12]
            / f"{safe_name(task_id)}__s{info.seed}"
        )

    def score(self, task: Task, rollout: Rollout) -> Score:
        info = current_info.get()
        ws = self._workspace(task.id)
        if ws.exists():
            shutil.rmtree(ws)  # a rerun of an errored trial starts clean
        log_root = ws / "logs" / "evaluate"
        solver = ws / "solver"
        (log_root / "steps").mkdir(parents=True)
        if info is not None:
            src = Path(info.candidate.path)
            if src.is_dir():
                shutil.copytree(src, solver, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                solver.mkdir()
                shutil.copy2(src, solver / src.name)
        else:
            solver.mkdir()
        (ws / "task.json").write_text(task.model_dump_json(indent=2))
        (solver / "output.json").write_text(json.dumps(rollout.output, indent=2, default=str))
        env = {
            **os.environ,
            "EVE_WORKSPACE_ROOT": str(ws),
            "EVE_SOLVER_ROOT": str(solver),
            "EVE_EVAL_LOG_ROOT": str(log_root),
            "HONESTEVAL_TASK": str(ws / "task.json"),
            "HONESTEVAL_OUTPUT": str(solver / "output.json"),
            "HONESTEVAL_TASK_ID": task.id,
            "HONESTEVAL_SEED": str(info.seed if info else 0),
            "HONESTEVAL_TRIAL": str(info.trial if info else 0),
            "HONESTEVAL_CANDIDATE": info.candidate.name if info else "",
            "HONESTEVAL_CANDIDATE_DIR": info.candidate.path if info else "",
            "HONESTEVAL_PROJECT": str(self.project.root),
            "HONESTEVAL_PYTHON": sys.executable,
        }
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
                        self._run_shell(step, ws, env, step_dir)
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
            reward, verdict = self._read_score(log_root)
        except StepFailed as exc:
            return self._failed(str(exc), ws, timings, tokens if judged else None)
        error_txt = log_root / "error.txt"
        feedback = verdict.get("summary") if isinstance(verdict.get("summary"), str) else None
        if feedback is None and error_txt.exists():
            feedback = error_txt.read_text(errors="replace")[:_TAIL]
        return Score(
            reward=reward,
            feedback=feedback,
            tokens=tokens if judged else None,
            details={"workspace": str(ws), "steps": timings, "score_yaml": verdict},
        )

    def _failed(
        self, reason: str, ws: Path, timings: list[dict[str, Any]], tokens: int | None
    ) -> Score:
        details = {"workspace": str(ws), "steps": timings, "failure_score": self.cfg.failure_score}
        if self.cfg.count_failure_score:
            reward = numeric_leaves(self.cfg.failure_score)[self.cfg.reward_key]
            return Score(
                reward=reward,
                feedback=f"evaluation failed: {reason}",
                tokens=tokens,
                details=details | {"counted_failure": reason},
            )
        return Score(errored=True, reason=reason, tokens=tokens, details=details)

    # -- steps ------------------------------------------------------------------------------
    def _run_shell(self, step: ShellStep, ws: Path, env: dict[str, str], step_dir: Path) -> None:
        with (
            (step_dir / "stdout.txt").open("wb") as out,
            (step_dir / "stderr.txt").open("wb") as err,
        ):
            try:
                proc = subprocess.run(
                    ["bash", str(step.path)],
                    cwd=ws,
                    env=env,
                    stdout=out,
                    stderr=err,
                    timeout=self.timeout_s,
                )
            except subprocess.TimeoutExpired:
                (step_dir / "status.txt").write_text("timeout\n")
                raise StepFailed(f"step {step.name!r} ran past {self.timeout_s:g} s") from None
        (step_dir / "status.txt").write_text(f"exit {proc.returncode}\n")
        if proc.returncode != 0:
            tail = (step_dir / "stderr.txt").read_text(errors="replace")[-_TAIL:].strip()
            raise StepFailed(f"step {step.name!r} exited {proc.returncode}: {tail}")

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
            (step_dir / "status.txt").write_text("no verdict\n")
            raise StepFailed(f"judge step {step.name!r}: the reply had no fenced YAML/JSON verdict")
        current = yaml.safe_load(so_far) if score_path.exists() else {}
        if not isinstance(current, dict):
            raise StepFailed("score.yaml is not a mapping")
        score_path.write_text(yaml.safe_dump(deep_merge(current, verdict), sort_keys=False))
        (step_dir / "status.txt").write_text("exit 0\n")
        return tokens

    def _ask(
        self, messages: list[dict[str, str]], seed: int | None, step_dir: Path
    ) -> tuple[str, int]:
        assert self.judge is not None and self.judge_cfg is not None
        policy = RetryPolicy(self.judge_cfg.retries, self.judge_cfg.retry_backoff_s)
        errors = []
        for attempt in range(1, self.judge_cfg.retries + 2):
            try:
                reply = self.judge.complete(messages, seed=seed)
                return reply.text, reply.tokens or 0
            except InfraError as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
                if not policy.allows(attempt):
                    break
                time.sleep(policy.delay(attempt, getattr(exc, "retry_after", None)))
        (step_dir / "stderr.txt").write_text("\n".join(errors) + "\n")
        (step_dir / "status.txt").write_text("judge unreachable\n")
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
        reward = leaves[self.cfg.reward_key]
        if not math.isfinite(reward):
            raise StepFailed(f"score.yaml {self.cfg.reward_key} is not finite: {reward}")
        return reward, data
