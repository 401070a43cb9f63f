"""The Eve-compatible ``steps`` scorer (SPEC §5.1): shell steps and judge steps in order.

Every (task, trial) gets a fresh workspace under ``.honesteval/workspaces/``::

    task.json  solver/ (a copy of the candidate + output.json)  logs/evaluate/
    logs/evaluate/score.yaml                         what the steps accumulate
    logs/evaluate/steps/step_NN_<name>/{stdout.txt,stderr.txt,status.txt}

A step that writes a score and exits 0 is a real score (a failed candidate scoring 0 is
``ok``). A candidate that breaks a rule of its evaluation that it is able to break (a shell
step, which runs its code, changes its read-only copy, or anything changes an evaluator file,
a step, a judge's prompt or rubric, during the run) is a ``failed`` trial, scored at
``failure_reward``; the judges keep judging from the snapshot taken when the scorer was built,
and the change is remembered (:mod:`._evaluator_files`): no later run starts until the files
are restored. A step that exits non-zero, a
missing or malformed score.yaml, a missing numeric leaf of ``failure_score``, a judge that
cannot be reached or gives no verdict: the trial is a ``scorer_error`` (missing data).
``failure_score`` is still written into the trial record for Eve compatibility; it is
averaged in only with ``count_failure_score: true``.
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import math
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from honesteval.adapters._openai import require_key
from honesteval.adapters._process import run_isolated
from honesteval.adapters.context import current_info
from honesteval.adapters.eve.config import EVE_KEYS_NOT_USED
from honesteval.errors import ConfigError
from honesteval.models import Rollout, Score, Task
from honesteval.redaction import child_env, describe
from honesteval.store.state_dir import Store, safe_name

from ._evaluator_files import TamperMemory, changed_paths, evaluator_hashes
from ._expression import ExpressionError, ScoreExpression
from ._judge import JudgeCall, JudgeSnapshot, TrialBudget, build_judge, run_judge_step
from ._workspace import (
    Example,
    RuleBroken,
    StepFailed,
    Workspace,
    build,
    remove,
    set_read_only,
    solver_hash,
    write_status,
)

if TYPE_CHECKING:
    from honesteval.adapters.project_view import ProjectView

_TAIL = 500
_log = logging.getLogger(__name__)
#: Faults of the machine, whoever's file met them: missing data, never the candidate's.
_MACHINE_ERRNOS = frozenset(
    {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.ENOMEM, errno.EMFILE, errno.ENFILE}
)


@dataclass(frozen=True)
class ShellStep:
    name: str
    path: Path


@dataclass(frozen=True)
class JudgeStep:
    name: str
    prompt_dir: Path
    immutable: Path | None


def numeric_leaves(tree: Any, prefix: str = "") -> dict[str, float]:
    """Dotted paths of every numeric (not bool) leaf of a nested mapping."""
    out: dict[str, float] = {}
    if isinstance(tree, dict):
        for key, value in tree.items():
            out |= numeric_leaves(value, f"{prefix}{key}.")
    elif isinstance(tree, int | float) and not isinstance(tree, bool):
        out[prefix[:-1]] = float(tree)
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


def _judge_step(project: ProjectView, raw: dict[str, Any], label: str) -> JudgeStep:
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
    )


def parse_steps(project: ProjectView) -> list[ShellStep | JudgeStep]:
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


def evaluator_roots(steps: list[ShellStep | JudgeStep]) -> list[Path]:
    """The files and folders the evaluation reads: every shell step, judge prompt folder and
    rubric."""
    roots: list[Path] = []
    for step in steps:
        if isinstance(step, ShellStep):
            roots.append(step.path)
        else:
            roots += [step.prompt_dir, *([step.immutable] if step.immutable else [])]
    return roots


def evaluator_fingerprint(
    project: ProjectView, steps: list[ShellStep | JudgeStep], snapshots: dict[str, JudgeSnapshot]
) -> str:
    """sha256 of what decides a score besides the candidate: the ``evaluation:`` and ``judge:``
    blocks and the content of every step file, prompt and rubric (wherever they live; a judge's
    prompt and rubric as snapshotted, ``snapshots`` by step name). A stored trial is reused
    only when this matches."""
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
            snapshot = snapshots[step.name]
            h.update(b"judge\0" + snapshot.prompt_hash.encode())
            if snapshot.rubric_hash is not None:
                h.update(snapshot.rubric_hash.encode())
    if cfg.evaluation is not None and cfg.evaluation.include_solver_examples:
        best = Store(project.state_dir).read_best()
        name, fingerprint = (None, None) if best is None else (best.name, best.fingerprint)
        h.update(f"examples\0{name}\0{fingerprint}".encode())
    return h.hexdigest()


@dataclass
class _StepsRun:
    """One trial's steps as they run: the candidate copy's hash before them, the judge's
    budget, each step's timing, and whether a judge step ran (only then are tokens counted)."""

    candidate_hash: str
    budget: TrialBudget
    timings: list[dict[str, Any]] = field(default_factory=list)
    judged: bool = False
    candidate_ran: bool = False  # a shell step (it runs the candidate's code) has started

    @property
    def tokens(self) -> int | None:
        return self.budget.used_tokens if self.judged else None


class StepsScorer:
    """Run the evaluation steps for one rollout and read the reward out of score.yaml."""

    enforces_timeout = True  # each step has timeout_s, the judge its own timeout and retries

    def __init__(self, project: ProjectView):
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
        self.judge = None if judge is None else build_judge(judge, self.timeout_s)
        # A tamper an earlier run saw is refused until the files are restored, before any
        # snapshot is taken of them.
        self.tamper_memory = TamperMemory(project.state_dir)
        self.tamper_memory.refuse_while_tampered()
        self.evaluator_roots = evaluator_roots(self.steps)
        self._clean = evaluator_hashes(self.evaluator_roots)
        # Every trial is judged from these copies, whatever happens to the files later.
        self.snapshots = {
            step.name: JudgeSnapshot.take(step.prompt_dir, step.immutable)
            for step in self.steps
            if isinstance(step, JudgeStep)
        }
        self._originals_seen = self._clean
        self.saw_tamper = False
        self._originals_lock = threading.Lock()

    @property
    def fingerprint(self) -> str:
        """The evaluator fingerprint: shell step files read afresh (a step file edited since
        the adapter was built changes it; the files may live outside the project), judge
        prompts and rubrics as snapshotted."""
        return evaluator_fingerprint(self.project, self.steps, self.snapshots)

    # -- the evaluator's originals -----------------------------------------------------------
    def _newly_changed_originals(self) -> list[str]:
        """The evaluator files (shell steps, judges' prompts and rubrics) changed, added,
        removed or replaced by a link since this scorer last looked (at first: since the
        snapshot). A change is reported once, to the trial that sees it first, and remembered
        under ``.honesteval/`` for the next runs; the judges keep the snapshot either way."""
        with self._originals_lock:
            now, seen = evaluator_hashes(self.evaluator_roots), self._originals_seen
            changed = changed_paths(seen, now)
            self._originals_seen = now
            if changed:
                self.saw_tamper = True
                self.tamper_memory.remember(self.evaluator_roots, self._clean, changed)
        return changed

    def _check_originals(self, during: str, *, candidate_ran: bool) -> None:
        """Raise when an evaluator file changed on disk: the candidate broke a rule
        (``RuleBroken``: the trial fails) unless only the judge ran (``StepFailed``)."""
        changed = self._newly_changed_originals()
        if not changed:
            return
        message = (
            f"an evaluator file (a step, a judge's prompt or rubric) was changed on disk "
            f"{during}: {', '.join(changed)} (tampering; every trial is judged from the copy "
            "taken when the run started, and no run starts until the files are restored)"
        )
        _log.error(message)
        raise RuleBroken(message) if candidate_ran else StepFailed(message)

    def _check_step_file(self, step: ShellStep) -> None:
        """A shell step runs from its file, not from a snapshot (Eve's scripts find their
        siblings through it): once the file differs from the one this run started with, no
        trial is graded by it. Only the candidate's code runs during a run to change it, so
        the trial is ``failed``, as the trial that changed it was."""
        key = str(step.path)
        if evaluator_hashes([step.path]).get(key) != self._clean.get(key):
            raise RuleBroken(
                f"step {step.name!r}: {step.path} differs from the file this run started with "
                "(changed during the run: tampering); no trial is graded by it"
            )

    # -- workspace --------------------------------------------------------------------------
    def _workspace(self, task_id: str) -> Path:
        info = current_info.get()
        if info is None or info.probe:  # `honesteval check`: a throw-away folder
            return Path(tempfile.mkdtemp(prefix="honesteval-workspace-")) / "ws"
        return Store(self.project.state_dir).workspace_dir(
            info.split, info.candidate.name, info.candidate.fingerprint, task_id, info.seed
        )

    def _examples(self) -> list[Example]:
        """Eve's ``include_solver_examples``: the current best, with its val reward."""
        if not self.cfg.include_solver_examples:
            return []
        best = Store(self.project.state_dir).read_best()
        if best is None:
            return []
        try:
            path = Path(self.project.candidate(best.name).path)
        except ConfigError:
            return []  # the current best's folder is gone: nothing to show
        score = {k: getattr(best.result, k) for k in ("reward", "stderr", "coverage", "split")}
        return [Example(name=best.name, path=path, score=score)]

    def score(self, task: Task, rollout: Rollout) -> Score:
        info = current_info.get()
        evaluator = self.fingerprint  # before the steps run: what this score was made with
        root = self._workspace(task.id)
        names = [safe_name(step.name) for step in self.steps]
        ws = build(root, task, rollout, info.candidate if info else None, self._examples(), names)
        try:
            return self._score_in(ws, task, rollout, evaluator)
        finally:
            if info is None or info.probe:
                remove(root.parent)
            else:
                set_read_only(ws.solver, read_only=False)  # the state folder stays removable

    def _score_in(self, ws: Workspace, task: Task, rollout: Rollout, evaluator: str) -> Score:
        env = self._step_env(ws, task)
        run = _StepsRun(solver_hash(ws), self._trial_budget())
        try:
            reward, verdict = self._run_steps(ws, task, rollout, env, run)
        except RuleBroken as exc:
            return Score(
                failed=True,
                reason=str(exc),
                tokens=run.tokens,
                details={"workspace": str(ws.root), "steps": run.timings, "evaluator": evaluator},
            )
        except StepFailed as exc:
            return self._failed(str(exc), ws.root, run.timings, run.tokens, evaluator)
        return self._scored(ws, reward, verdict, run, evaluator)

    def _run_steps(
        self, ws: Workspace, task: Task, rollout: Rollout, env: dict[str, str], run: _StepsRun
    ) -> tuple[float, dict[str, Any]]:
        """Every step in order, then the reward and score.yaml. A file fault inside the
        workspace once the candidate's code has run there (a folder where a file goes, a
        read-only log folder) is the candidate's broken rule, not missing data."""
        try:
            # Changed since the last trial looked: during a target run (most likely this one's).
            self._check_originals("while the target ran", candidate_ran=True)
            for n, step in enumerate(self.steps, start=1):
                self._run_step(n, step, ws, task, rollout, env, run)
            return self._read_score(ws)
        except OSError as exc:
            if not (run.candidate_ran and _in_workspace(exc, ws)):
                raise
            raise RuleBroken(
                f"the workspace as the candidate's code left it broke the scorer "
                f"({describe(exc)}): the candidate broke a rule"
            ) from None

    def _step_env(self, ws: Workspace, task: Task) -> dict[str, str]:
        """The environment every step of this trial runs in (Eve's variables and ours)."""
        info = current_info.get()
        return child_env() | {  # no API key variable: a step gets only what it needs
            "EVE_WORKSPACE_ROOT": str(ws.root),
            "EVE_SOLVER_ROOT": str(ws.solver),
            "EVE_EVAL_LOG_ROOT": str(ws.log_root),
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

    def _trial_budget(self) -> TrialBudget:
        judge_cfg = self.judge_cfg
        return TrialBudget(
            turns=judge_cfg.max_turns if judge_cfg else 0,
            tokens=judge_cfg.max_total_tokens if judge_cfg else None,
        )

    def _run_step(
        self,
        n: int,
        step: ShellStep | JudgeStep,
        ws: Workspace,
        task: Task,
        rollout: Rollout,
        env: dict[str, str],
        run: _StepsRun,
    ) -> None:
        """Step ``n`` in its own log folder, timed; then the rules it could have broken: the
        project's originals untouched, the candidate copy unmodified."""
        step_dir = ws.step_dir(n, safe_name(step.name))
        ws.check_step_dir(step_dir)
        t0 = time.perf_counter()
        try:
            if isinstance(step, ShellStep):
                self._check_step_file(step)
                run.candidate_ran = True
                self._run_shell(step, ws, env, step_dir)
            else:
                assert self.judge is not None  # parse_steps: judge steps need one
                run.judged = True
                call = self._judge_call(ws, task, rollout, step, step_dir, env, run.budget)
                run_judge_step(self.judge, call, name=step.name)
        finally:
            run.timings.append(
                {"step": step.name, "seconds": time.perf_counter() - t0, "logs": str(step_dir)}
            )
        shell = isinstance(step, ShellStep)  # a shell step runs the candidate's code
        self._check_originals(f"during step {step.name!r}", candidate_ran=shell)
        if solver_hash(ws) != run.candidate_hash:
            problem = f"a step modified the candidate (step {step.name!r})"
            raise RuleBroken(problem) if shell else StepFailed(problem)

    def _scored(
        self, ws: Workspace, reward: float, verdict: dict[str, Any], run: _StepsRun, evaluator: str
    ) -> Score:
        """The score of a trial whose steps all ran: the reward, the judge's summary (else the
        tail of ``error.txt``) as feedback, and where to look."""
        feedback = verdict.get("summary") if isinstance(verdict.get("summary"), str) else None
        if feedback is None:
            error_txt = ws.read(ws.log_root / "error.txt")
            feedback = None if error_txt is None else error_txt[:_TAIL]
        return Score(
            reward=reward,
            feedback=feedback,
            tokens=run.tokens,
            details={
                "workspace": str(ws.root),
                "steps": run.timings,
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
    def _run_shell(
        self, step: ShellStep, ws: Workspace, env: dict[str, str], step_dir: Path
    ) -> None:
        stdout, stderr = ws.real(step_dir / "stdout.txt"), ws.real(step_dir / "stderr.txt")
        try:
            done = run_isolated(
                ["bash", str(step.path)],
                cwd=ws.root,
                env=env,
                stdout=stdout,
                stderr=stderr,
                timeout_s=self.timeout_s,
            )
        except OSError as exc:
            write_status(ws, step_dir, False, f"cannot start bash: {exc.strerror}")
            raise StepFailed(f"step {step.name!r}: cannot start bash: {exc.strerror}") from None
        if done.timed_out:
            write_status(ws, step_dir, False, "timeout")
            raise StepFailed(f"step {step.name!r} ran past {self.timeout_s:g} s")
        write_status(ws, step_dir, done.returncode == 0, f"exit {done.returncode}")
        if done.returncode != 0:
            tail = (ws.read(step_dir / "stderr.txt") or "")[-_TAIL:].strip()
            raise StepFailed(f"step {step.name!r} exited {done.returncode}: {tail}")

    def _judge_call(
        self,
        ws: Workspace,
        task: Task,
        rollout: Rollout,
        step: JudgeStep,
        step_dir: Path,
        env: dict[str, str],
        budget: TrialBudget,
    ) -> JudgeCall:
        info = current_info.get()
        return JudgeCall(
            snapshot=self.snapshots[step.name],
            ws=ws,
            task=task,
            rollout=rollout,
            step_dir=step_dir,
            env=env,
            seed=info.seed if info else None,
            budget=budget,
        )

    def _read_score(self, ws: Workspace) -> tuple[float, dict[str, Any]]:
        text = ws.read(ws.score_path)
        if text is None:
            raise StepFailed("score.yaml missing after the last step")
        try:
            data = yaml.safe_load(text)
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


def _in_workspace(exc: OSError, ws: Workspace) -> bool:
    """True when a file fault is about a file inside the workspace and not the machine's."""
    if exc.errno in _MACHINE_ERRNOS or exc.filename is None:
        return False
    path = Path(os.fsdecode(exc.filename)).resolve()
    return path.is_relative_to(ws.root.resolve())
