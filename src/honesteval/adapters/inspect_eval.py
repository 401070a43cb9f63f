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
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field

from honesteval.errors import ConfigError, InfraError
from honesteval.models import (
    COUNTED_STATUSES,
    REWARD_RANGE,
    Candidate,
    Paid,
    Rollout,
    Score,
    Task,
    TrialStatus,
)
from honesteval.models.seeds import PER_TASK_SEED_LOW
from honesteval.store import trial_log
from honesteval.store.state_dir import Store

from ._base import AdapterParts, TargetConfig
from .context import current_fresh_since, current_rollout_store

if TYPE_CHECKING:
    from inspect_ai.log import EvalSample
    from inspect_ai.model import ModelCost

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


def transcript_of(rollout: Any) -> tuple[str, str] | None:
    """Where a trial's Inspect transcript is: its log file (relative to the project folder)
    and sample id, as run or imported trials record them in their rollout (None: not an
    Inspect trial).

    >>> transcript_of({"log": "logs/a.eval", "sample": 3}), transcript_of("text")
    (('logs/a.eval', '3'), None)
    """
    if not isinstance(rollout, Mapping) or not rollout.get("log"):
        return None
    return str(rollout["log"]), str(rollout.get("sample"))


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
    #: Prices for models Inspect has none for (its ``model_cost_config``: a YAML or JSON
    #: file, or a mapping of model name to ``{input, output, input_cache_write,
    #: input_cache_read}`` in dollars a million tokens): what a USD budget counts.
    model_cost_config: str | dict[str, dict[str, float]] | None = None
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


def _sum_known(values: Iterable[float | None]) -> float | None:
    """The sum of the values reported (None: none was, e.g. a model Inspect cannot price)."""
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _task_ref(project_root: Path, ref: str) -> str:
    """``file.py@name`` with the file resolved against the project folder."""
    file, at, name = ref.partition("@")
    if file.endswith(".py"):
        return str((project_root / file).resolve()) + at + name
    return ref


@dataclass(frozen=True)
class _Call:
    """One ``eval()`` call: its samples by task id, its log file, and what it paid as
    Inspect reports it (the log's model usage, every sample of the call)."""

    samples: dict[str, EvalSample]
    log: str | None
    paid: Paid


@dataclass(frozen=True)
class _Sample:
    """A sample of a call and the log file it is in (relative to the project folder)."""

    sample: EvalSample
    log: str | None


#: What a trial handed a sample of a call already paid for pays: nothing more.
_SERVED = Paid(cost=0.0, tokens=0)


class InspectTarget:
    """Runs trials as batched ``eval()`` calls: the first trial asked for a (candidate, seed)
    runs every task of its split at that seed in one call and pays for the whole call (its
    record's ``paid``); the others take their sample from it and pay nothing. The call's
    other samples are stored at once as rollouts awaiting their score, so a trial the budget
    does not let start is graded from them later, never run (and paid) again. A retried
    trial (its sample already handed out) runs alone."""

    enforces_timeout = False
    #: a seed's trials are one call: plans run trials seed by seed, so that the trials a
    #: budget lets start together are those of one call (``evaluation.plan``)
    runs_a_seed_in_one_call = True

    def __init__(self, config: InspectTargetConfig, project: ProjectView):
        self.config = config
        self.project = project
        self.task_ref = _task_ref(project.root, config.task)
        self.log_dir = project.state_dir / "inspect-logs"
        self._lock = threading.Lock()  # one eval() at a time in this process
        #: per (candidate, seed, fresh start): the samples of its calls no trial took yet,
        #: each with the log file it is in
        self._batches: dict[tuple[str, int, str | None], dict[str, _Sample]] = {}
        self._handed_out: dict[tuple[str, int, str | None], set[str]] = {}

    def run(self, task: Task, candidate: Candidate, *, seed: int, trial: int) -> Rollout:
        # a fresh evaluation hands out its own samples: what an earlier one took is no retry
        since = current_fresh_since.get()
        key = (candidate.fingerprint, seed, since)
        paid = _SERVED
        with self._lock:
            batch = self._batches.get(key)
            handed = self._handed_out.setdefault(key, set())
            if batch is None or task.id not in batch:
                split = self._split_of(task)
                # a retried trial, and one at a seed of its own (a confirmation's per-task
                # seeds: one eval() has one seed), runs alone
                alone = task.id in handed or seed >= PER_TASK_SEED_LOW
                wanted = (
                    [task]
                    if alone
                    else self._batch_tasks(task, split, candidate, seed, handed, since)
                )
                call = self._eval(wanted, candidate, seed)
                paid = call.paid
                made = {tid: _Sample(s, call.log) for tid, s in call.samples.items()}
                rest = {tid: s for tid, s in made.items() if tid != task.id}
                self._store_rollouts(rest, split)
                batch = {**(batch or {}), **made}
                self._batches[key] = batch
            sample = batch.pop(task.id, None)
            handed.add(task.id)
            if not batch:
                del self._batches[key]
        rollout, reason = (
            (None, f"Inspect returned no sample {task.id!r}")
            if sample is None
            else self._outcome_rollout(sample, paid)
        )
        if rollout is None:  # missing data, and what the call paid all the same
            errored = InfraError(reason)
            errored.paid = paid
            raise errored
        return rollout

    def unpriced(self) -> str | None:
        """Why a USD budget cannot bind (Inspect has no price for the model), or None."""
        from inspect_ai.model import get_model_info

        cfg = self.config
        info = get_model_info(cfg.model)
        if (info is not None and info.cost is not None) or cfg.model_cost_config is not None:
            return None
        return f"Inspect has no price for {cfg.model} (adapter.model_cost_config)"

    def _split_of(self, task: Task) -> str | None:
        for split, ids in self.project.frozen_split().items():
            if task.id in ids:
                return split
        return None

    def _batch_tasks(
        self,
        task: Task,
        split: str | None,
        candidate: Candidate,
        seed: int,
        handed: set[str],
        since: str | None,
    ) -> list[Task]:
        """The tasks of ``task``'s split this (candidate, seed) still needs: not handed out by
        this process, not stored as counted trials or as rollouts awaiting their score (an
        imported or earlier run's; for a fresh evaluation started at ``since``, only its own:
        it reuses nothing)."""
        if split is None:
            return [task]
        stored = Store(self.project.state_dir).read_trials(
            split, candidate.name, candidate.fingerprint
        )
        done = {
            tid
            for (tid, s), record in stored.items()
            if s == seed
            and (record.status in COUNTED_STATUSES or record.awaiting_score)
            and (since is None or record.started_at >= since)
        }
        ids = self.project.frozen_split()[split]
        by_id = {t.id: t for t in self.project.all_tasks}
        return [by_id[i] for i in ids if i == task.id or i not in handed | done]

    def _eval(self, tasks: list[Task], candidate: Candidate, seed: int) -> _Call:
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
                model_cost_config=self._model_costs(),
            )
        except Exception as exc:  # Inspect could not start the run: nothing was graded
            raise InfraError(f"Inspect eval failed to run: {type(exc).__name__}: {exc}") from None
        usage = [u for log in logs if log.stats for u in log.stats.model_usage.values()]
        paid = Paid(
            cost=_sum_known(u.total_cost for u in usage),
            tokens=sum(u.total_tokens for u in usage),
        )
        samples = [s for log in logs for s in (log.samples or [])]
        if not samples and logs and logs[0].error is not None:
            failed = InfraError(f"Inspect eval failed: {logs[0].error.message}")
            failed.paid = paid
            raise failed
        location = logs[0].location if logs else None
        return _Call({str(s.id): s for s in samples}, self._relative(location), paid)

    def _model_costs(self) -> str | dict[str, ModelCost] | None:
        """``model_cost_config`` as Inspect takes it (a file relative to the project)."""
        from inspect_ai.model import ModelCost

        given = self.config.model_cost_config
        if isinstance(given, str):
            return str(self.project.root / given)
        return None if given is None else {m: ModelCost(**c) for m, c in given.items()}

    def _relative(self, location: str | None) -> str | None:
        """A log's path relative to the project folder (``inspect view`` opens it)."""
        if not location:
            return None
        return os.path.relpath(location, self.project.root)

    def _store_rollouts(self, samples: dict[str, _Sample], split: str | None) -> None:
        """The call's samples no trial took yet, stored through the trial runner as rollouts
        awaiting their score (an errored one is not: it runs again), paid for by the trial
        that made the call."""
        store = current_rollout_store.get()
        if store is None or split is None or not samples:
            return
        by_id = {t.id: t for t in self.project.all_tasks}
        with trial_log.deferred_sync():  # one fsync for the call's rollouts
            for tid, sample in samples.items():
                rollout, _ = self._outcome_rollout(sample, _SERVED)
                if rollout is not None and tid in by_id:
                    store(by_id[tid], rollout)

    def _outcome_rollout(self, made: _Sample, paid: Paid) -> tuple[Rollout | None, str]:
        """The sample as a rollout (a limit's failure included: its scorer says ``failed``),
        or None and why for an errored one (missing data)."""
        sample = made.sample
        scorer = choose_scorer(sorted(sample.scores or {}), self.config.score)
        try:
            outcome = sample_outcome(
                sample, scorer, errors=self.config.errors, limits=self.config.limits
            )
        except OutOfRangeScore as exc:
            outcome = SampleOutcome("scorer_error", None, str(exc))
        if outcome.status == "infra_error":
            return None, outcome.reason or "the sample errored"
        output = {
            "answer": outcome.answer,
            "value": outcome.value,
            "reward": outcome.reward,
            "reason": outcome.reason,
            "failed": outcome.status == "failed",
            "scorer": scorer,
            "log": made.log,
            "sample": sample.id,
        }
        rollout = Rollout(output=output, tokens=outcome.tokens, cost=outcome.cost, paid=paid)
        return rollout, ""


class InspectScorer:
    """The reward the Inspect scorer gave, carried in the rollout (nothing is graded twice)."""

    def score(self, task: Task, rollout: Rollout) -> Score:
        output = rollout.output if isinstance(rollout.output, dict) else {}
        if output.get("failed"):  # a limit the sample hit: the candidate's failure
            return Score(failed=True, reason=str(output.get("reason") or "a limit was hit"))
        reward = output.get("reward")
        if reward is None:
            return Score(errored=True, reason=str(output.get("reason") or "no Inspect score"))
        return Score(reward=reward, details={"inspect_value": output.get("value")})
