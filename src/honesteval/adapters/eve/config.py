"""The ``evaluation:`` and ``judge:`` blocks of the project file: the Eve-compatible steps and
the judges they call, beside the code that runs them (as each adapter kind's config is)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from honesteval.models import StrictModel


class JudgeConfig(StrictModel):
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


class EvaluationConfig(StrictModel):
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


def step_files(root: Path, evaluation: EvaluationConfig | None) -> list[Path]:
    """The files of the evaluation steps: shell steps, judges' prompts and rubrics."""
    files: list[Path] = []
    for step in evaluation.steps if evaluation else []:
        parts = [step] if isinstance(step, str) else [step.get("prompt"), step.get("immutable")]
        files += [root / str(p) for p in parts if isinstance(p, str)]
    return files


#: Eve's evaluation keys that honesteval loads but does not act on, and why (one line each;
#: shown by ``honesteval check`` and logged when the steps are built).
EVE_KEYS_NOT_USED = {
    "seed_solver_score": "ignored: every candidate, the seed included, is scored by running "
    "the steps (a fixed score would be a number without an error bar)",
    "seed_solver_skip_evaluation": "ignored: the seed candidate is evaluated like any other",
    "immutable_renderer": "ignored: rubric files reach the judge verbatim (Eve's "
    "StaticRenderer); template markers are not filled in",
}
