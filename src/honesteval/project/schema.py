"""The schema of ``honesteval.yaml`` (SPEC §6.1): every section, its defaults and its limits.
Unknown keys are rejected; :mod:`honesteval.project.config_file` reads the file into it."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from honesteval.adapters import AdapterConfig
from honesteval.models import GateConfig, TimeoutIs
from honesteval.project.strict import StrictModel

#: The most trials per task a project (or --trials) may ask for: a typo such as 1000000000
#: is a clear error, not a run that never ends.
MAX_TRIALS = 10_000

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
