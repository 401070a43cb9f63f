"""The schema of ``honesteval.yaml`` (SPEC §6.1): every section, its defaults and its limits.
Unknown keys are rejected; :mod:`honesteval.project.config_file` reads the file into it."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from honesteval.adapters import AdapterConfig, SandboxConfig
from honesteval.adapters.eve.config import EvaluationConfig, JudgeConfig
from honesteval.models import Budget, GateConfig, StrictModel, TimeoutIs

#: The most trials per task a project (or --trials) may ask for: a typo such as 1000000000
#: is a clear error, not a run that never ends.
MAX_TRIALS = 10_000


class SplitsConfig(StrictModel):
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


class DaskConfig(StrictModel):
    """How a run uses a Dask cluster (``--task-runner dask``, ``--dask-address``)."""

    #: Seconds a run waits while the scheduler has no live worker and no trial finishes; then
    #: it stops in one line (exit 2), every stored trial kept.
    no_worker_timeout_s: float = Field(default=60.0, gt=0)


class ProjectConfig(StrictModel):
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
    #: A spend cap for every command that runs trials (``evaluate``, ``gate``; a request's own
    #: ``budget`` replaces it field by field).
    budget: Budget | None = None
    #: A spend cap for the whole search: a gate counts what the ledger's earlier decisions
    #: spent, and starts no trial that would take the search past it.
    search_budget: Budget | None = None
    evaluation: EvaluationConfig | None = None
    judge: JudgeConfig | None = None
    dask: DaskConfig = Field(default_factory=DaskConfig)
    #: What a candidate's program sees (:class:`honesteval.adapters.SandboxConfig`).
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)

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
