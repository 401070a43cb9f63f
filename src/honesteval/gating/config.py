"""The gate's settings: the project's ``gate:`` section with a request's
:class:`~honesteval.models.GateOverrides`, and the confirmation's trials they imply."""

from __future__ import annotations

from pydantic import ValidationError

from honesteval.errors import invalid_setting
from honesteval.models import GateConfig, GateOverrides
from honesteval.project.loader import Project


def gate_config_for(project: Project, overrides: GateOverrides | None = None) -> GateConfig:
    """The project's gate config with a request's overrides (an unset one keeps the project's)."""
    values = project.gate_config.model_dump()
    values.update(overrides.given() if overrides is not None else {})
    try:
        return GateConfig(**values)
    except ValidationError as exc:
        raise invalid_setting(exc, "gate ") from None


def confirm_trials(cfg: GateConfig, screen_trials: int) -> int:
    """The confirmation's budget (:meth:`GateConfig.confirm_budget`)."""
    return cfg.confirm_budget(screen_trials)
