"""Inspect AI as a benchmark: how one Inspect sample becomes one trial, and ``kind: inspect``.

One rule maps an Inspect sample (``inspect_ai.log.EvalSample``) to a trial's outcome, for the
samples of an imported log (``honesteval import inspect``) and for those this adapter runs:

- a sample that hit a limit (token, message, time, working, cost, …) is the candidate's
  **failure** (``failed``, scored at ``failure_reward``), unless ``limits: missing``;
- a sample that ended in an error (a provider fault, a crashed sandbox) is **missing data**
  (``infra_error``), unless ``errors: failure``;
- otherwise the chosen score's value is the reward: ``C``/``I``/``P``/``N``, booleans and
  numbers as Inspect's ``value_to_float`` reads them; a value that is not a score (an unknown
  string, a mapping without the chosen key) is a ``scorer_error``; a number outside [0, 1]
  is refused with the reason (it is not a reward).

``kind: inspect`` runs an Inspect task (``task: file.py@name``, relative to the project) as
the target: the candidate's folder reaches the task as the task argument ``candidate_arg``
(``candidate_dir`` by default), each trial index is one ``eval()`` over every task of the split
(``epochs=1``, the trial's seed in the generate config, Inspect's own retries off, so
honesteval's retry and missing-data rules decide), and the sample's outcome is the trial's.
Inspect is an optional extra: ``pip install 'honesteval[inspect]'``.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from honesteval.errors import CandidateFailure, ConfigError, InfraError
from honesteval.models import (
    COUNTED_STATUSES,
    REWARD_RANGE,
    Candidate,
    Rollout,
    Score,
    Task,
    TrialStatus,
)
from honesteval.store.state_dir import Store

from ._base import AdapterParts, TargetConfig
from .context import current_fresh_since

if TYPE_CHECKING:
    from inspect_ai.log import EvalSample

    from honesteval.adapters.project_view import ProjectView

#: What a sample error is: missing data (a provider's fault, the default) or the candidate's.
ErrorsAre = Literal["missing", "failure"]
#: What a sample that hit a limit is: the candidate's failure (the default) or missing data.
LimitsAre = Literal["failure", "missing"]
#: The task metadata key holding a sample's own id (Inspect ids may be integers).
SAMPLE_ID_KEY = "inspect_id"
INSTALL_HINT = "Inspect AI is not installed: pip install 'honesteval[inspect]'"


def require_inspect() -> None:
    """A :class:`ConfigError` saying how to install the extra when Inspect is missing."""
    try:
        import inspect_ai  # noqa: F401
    except ImportError:
        raise ConfigError(INSTALL_HINT) from None


class OutOfRangeScore(ValueError):
    """A score value that is a number outside [0, 1]: not a reward (refused, never clipped)."""


@dataclass(frozen=True)
class SampleOutcome:
    """What one Inspect sample counts as: a trial status, the reward of an ``ok`` one and,
    for the rest, why; the sample's answer, tokens and cost."""

    status: TrialStatus
    reward: float | None
    reason: str | None
    value: Any = None
    answer: str | None = None
    tokens: int | None = None
    cost: float | None = None


def choose_scorer(names: Sequence[str], scorer: str | None) -> str | None:
    """The score a log's samples are read by: ``scorer`` (``name`` or ``name/key`` for a
    score whose value is a mapping), else the only one there is.

    >>> choose_scorer(["match"], None), choose_scorer(["a", "b"], "b/acc")
    ('match', 'b/acc')
    """
    if scorer is not None:
        if scorer.split("/", 1)[0] not in names:
            raise ConfigError(f"no score {scorer!r} in the log (scores: {', '.join(names)})")
        return scorer
    if len(names) > 1:
        raise ConfigError(
            f"the log has several scores ({', '.join(names)}): choose one with --scorer NAME"
        )
    return names[0] if names else None


def score_value_to_reward(value: Any) -> float | None:
    """A score value as a reward, None when it is not a score (then the trial is a
    ``scorer_error``); a number outside [0, 1] raises :class:`OutOfRangeScore`.

    >>> [score_value_to_reward(v) for v in ("C", "I", "P", True, 0.25, "0.5", "maybe")]
    [1.0, 0.0, 0.5, 1.0, 0.25, 0.5, None]
    """
    from inspect_ai.scorer import INCORRECT, NOANSWER, value_to_float

    if isinstance(value, Mapping | list) or value is None:
        return None
    reward = value_to_float()(value)
    # value_to_float reads what it cannot convert as 0.0 (with a log line): a zero is kept
    # only for a value that means zero, never for an unknown string.
    if reward == 0.0 and isinstance(value, str):
        zeros = {INCORRECT, NOANSWER, "no", "false"}
        if value not in zeros and value.lower() not in zeros and not _is_number(value):
            return None
    if not math.isfinite(reward):
        return None
    low, high = REWARD_RANGE
    if not low <= reward <= high:
        raise OutOfRangeScore(f"score value {value!r} is outside [{low:g}, {high:g}]")
    return reward


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def sample_outcome(
    sample: EvalSample,
    scorer: str | None,
    *,
    errors: ErrorsAre = "missing",
    limits: LimitsAre = "failure",
) -> SampleOutcome:
    """What ``sample`` counts as under the rule of this module's docstring; ``scorer`` as
    :func:`choose_scorer` returned it (None: the log has no scores)."""
    usage = list(sample.model_usage.values())
    tokens = sum(u.total_tokens for u in usage) if usage else None
    costs = [u.total_cost for u in usage if u.total_cost is not None]
    common: dict[str, Any] = dict(tokens=tokens, cost=sum(costs) if costs else None)
    if sample.limit is not None:
        why = f"{sample.limit.type} limit {sample.limit.limit:g} reached"
        status: TrialStatus = "failed" if limits == "failure" else "infra_error"
        return SampleOutcome(status, None, why, **common)
    if sample.error is not None:
        why = sample.error.message
        return SampleOutcome(
            "failed" if errors == "failure" else "infra_error", None, why, **common
        )
    name, _, key = (scorer or "").partition("/")
    score = (sample.scores or {}).get(name)
    if score is None:
        return SampleOutcome("scorer_error", None, f"the sample has no score {name!r}", **common)
    value: Any = score.value
    if key:
        value = value.get(key) if isinstance(value, Mapping) else None
    common.update(value=value, answer=score.answer)
    reward = score_value_to_reward(value)
    if reward is None:
        what = f"{name}/{key}" if key else name
        return SampleOutcome(
            "scorer_error", None, f"{what} value {value!r} is not a score", **common
        )
    return SampleOutcome("ok", reward, None, **common)


class InspectTargetConfig(TargetConfig):
    """``kind: inspect``: an Inspect task run as the target, its score the reward."""

    kind: Literal["inspect"]
    #: ``file.py@name`` (the file relative to the project folder) or a registry name.
    task: str = Field(min_length=1)
    model: str = Field(min_length=1)
    task_args: dict[str, Any] = Field(default_factory=dict)
    model_args: dict[str, Any] = Field(default_factory=dict)
    #: The task argument that receives the candidate's folder.
    candidate_arg: str = Field(default="candidate_dir", min_length=1)
    #: Which score is the reward (``name`` or ``name/key``) when the task has several.
    score: str | None = None
    errors: ErrorsAre = "missing"
    limits: LimitsAre = "failure"
    brings_scorer = True

    def build(self, project: ProjectView) -> AdapterParts:
        require_inspect()
        if self.candidate_arg in self.task_args:
            raise ConfigError(
                f"adapter.task_args sets {self.candidate_arg!r}: honesteval passes the "
                "candidate's folder there (adapter.candidate_arg)"
            )
        return AdapterParts(InspectTarget(self, project), InspectScorer())


def _task_ref(project_root: Path, ref: str) -> str:
    """``file.py@name`` with the file resolved against the project folder."""
    file, at, name = ref.partition("@")
    if file.endswith(".py"):
        return str((project_root / file).resolve()) + at + name
    return ref


class InspectTarget:
    """Runs trials as batched ``eval()`` calls: the first trial asked for a (candidate, seed)
    runs every task of its split at that seed in one call; the others take their sample from
    it. A retried trial (its sample already handed out) runs alone."""

    enforces_timeout = False

    def __init__(self, config: InspectTargetConfig, project: ProjectView):
        self.config = config
        self.project = project
        self.task_ref = _task_ref(project.root, config.task)
        self.log_dir = project.state_dir / "inspect-logs"
        self._lock = threading.Lock()  # one eval() at a time in this process
        self._batches: dict[tuple[str, int, str | None], dict[str, EvalSample]] = {}
        self._handed_out: dict[tuple[str, int, str | None], set[str]] = {}

    def run(self, task: Task, candidate: Candidate, *, seed: int, trial: int) -> Rollout:
        # a fresh evaluation hands out its own samples: what an earlier one took is no retry
        since = current_fresh_since.get()
        key = (candidate.fingerprint, seed, since)
        with self._lock:
            batch = self._batches.get(key)
            handed = self._handed_out.setdefault(key, set())
            if batch is None or task.id not in batch:
                wanted = (
                    [task]
                    if task.id in handed
                    else self._batch_tasks(task, candidate, seed, handed, since)
                )
                batch = {**(batch or {}), **self._eval(wanted, candidate, seed)}
                self._batches[key] = batch
            sample = batch.pop(task.id, None)
            handed.add(task.id)
            if not batch:
                del self._batches[key]
        if sample is None:
            raise InfraError(f"Inspect returned no sample {task.id!r}")
        return self._rollout(sample)

    def _batch_tasks(
        self, task: Task, candidate: Candidate, seed: int, handed: set[str], since: str | None
    ) -> list[Task]:
        """The tasks of ``task``'s split this (candidate, seed) still needs: not handed out by
        this process, not stored as counted trials (an imported or earlier run's; for a fresh
        evaluation started at ``since``, only its own count: it reuses nothing)."""
        for split, ids in self.project.frozen_split().items():
            if task.id in ids:
                stored = Store(self.project.state_dir).read_trials(
                    split, candidate.name, candidate.fingerprint
                )
                done = {
                    tid
                    for (tid, s), record in stored.items()
                    if s == seed
                    and record.status in COUNTED_STATUSES
                    and (since is None or record.started_at >= since)
                }
                by_id = {t.id: t for t in self.project.all_tasks}
                return [by_id[i] for i in ids if i == task.id or i not in handed | done]
        return [task]

    def _eval(self, tasks: list[Task], candidate: Candidate, seed: int) -> dict[str, EvalSample]:
        from inspect_ai import eval as inspect_eval

        cfg = self.config
        try:
            logs = inspect_eval(
                self.task_ref,
                model=cfg.model,
                model_args=cfg.model_args,
                task_args={**cfg.task_args, cfg.candidate_arg: candidate.path},
                sample_id=[t.metadata.get(SAMPLE_ID_KEY, t.id) for t in tasks],
                epochs=1,
                seed=seed,
                retry_on_error=0,
                fail_on_error=False,
                display="none",
                log_dir=str(self.log_dir),
            )
        except Exception as exc:  # Inspect could not start the run: nothing was graded
            raise InfraError(f"Inspect eval failed to run: {type(exc).__name__}: {exc}") from None
        samples = [s for log in logs for s in (log.samples or [])]
        if not samples and logs and logs[0].error is not None:
            raise InfraError(f"Inspect eval failed: {logs[0].error.message}")
        return {str(s.id): s for s in samples}

    def _rollout(self, sample: EvalSample) -> Rollout:
        scorer = choose_scorer(sorted(sample.scores or {}), self.config.score)
        try:
            outcome = sample_outcome(
                sample, scorer, errors=self.config.errors, limits=self.config.limits
            )
        except OutOfRangeScore as exc:
            outcome = SampleOutcome("scorer_error", None, str(exc))
        if outcome.status == "infra_error":
            raise InfraError(outcome.reason or "the sample errored")
        if outcome.status == "failed":
            raise CandidateFailure(outcome.reason or "the sample failed")
        output = {
            "answer": outcome.answer,
            "value": outcome.value,
            "reward": outcome.reward,
            "reason": outcome.reason,
            "scorer": scorer,
        }
        return Rollout(output=output, tokens=outcome.tokens, cost=outcome.cost)


class InspectScorer:
    """The reward the Inspect scorer gave, carried in the rollout (nothing is graded twice)."""

    def score(self, task: Task, rollout: Rollout) -> Score:
        output = rollout.output if isinstance(rollout.output, dict) else {}
        reward = output.get("reward")
        if reward is None:
            return Score(errored=True, reason=str(output.get("reason") or "no Inspect score"))
        return Score(reward=reward, details={"inspect_value": output.get("value")})
