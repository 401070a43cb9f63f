"""The gate's settings: the project's ``gate:`` section with the CLI's and the flow's
overrides, and the confirmation's trials they imply."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from honesteval.errors import ConfigError
from honesteval.models import GateConfig
from honesteval.project.loader import Project


def gate_config_for(project: Project, **overrides: Any) -> GateConfig:
    """The project's gate config with CLI/flow overrides (None means "keep")."""
    values = project.gate_config.model_dump()
    values.update({k: v for k, v in overrides.items() if v is not None})
    try:
        return GateConfig(**values)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        raise ConfigError(f"gate {key}: {first['msg']} (got {first.get('input')!r})") from None


def confirm_trials(cfg: GateConfig, screen_trials: int) -> int:
    """The confirmation's budget (:meth:`GateConfig.confirm_budget`)."""
    return cfg.confirm_budget(screen_trials)
