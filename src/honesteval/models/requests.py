"""What a caller asks for: one typed request per command that runs trials.

The CLI builds an :class:`EvaluateRequest` or a :class:`GateRequest`, :mod:`honesteval.api`
takes it (its keywords build the same model), and the flows' parameters carry its fields.
Each field's ``description`` is its text in :data:`~honesteval.settings_help.SETTINGS_HELP`,
the one help text the CLI's ``--help`` and the UI's run form show too.

>>> GateRequest(candidate="v2", trials=5, overrides=GateOverrides(alpha=0.05)).overrides.alpha
0.05
>>> GateOverrides(k_se=0)
Traceback (most recent call last):
...
pydantic_core._pydantic_core.ValidationError: 1 validation error for GateOverrides
...
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Literal, TypeVar

from pydantic import Field

from honesteval.models.base import GateMode, _Frozen
from honesteval.models.inputs import Budget
from honesteval.settings_help import SETTINGS_HELP

#: A setting that counts something: an integer >= 1.
PositiveInt = Annotated[int, Field(ge=1)]
#: Where trials run: a thread pool in this process, or Dask.
TaskRunnerKind = Literal["thread", "dask"]


class GateOverrides(_Frozen):
    """The gate settings a call may set for itself; None keeps the project's ``gate:``."""

    mode: GateMode | None = Field(default=None, description=SETTINGS_HELP["mode"])
    k_se: float | None = Field(
        default=None,
        gt=0,
        description=SETTINGS_HELP["k_se"],
    )
    alpha: float | None = Field(
        default=None,
        gt=0,
        lt=0.5,
        description=SETTINGS_HELP["alpha"],
    )
    confirm: bool | None = Field(default=None, description=SETTINGS_HELP["confirm"])
    confirm_trials: PositiveInt | None = Field(
        default=None, description=SETTINGS_HELP["confirm_trials"]
    )

    def given(self) -> dict[str, object]:
        """The settings this call sets (the rest keep the project's)."""
        return self.model_dump(exclude_none=True)


class _RunRequest(_Frozen):
    """What every request that runs trials says: how many, from which seed, where."""

    trials: PositiveInt | None = Field(default=None, description=SETTINGS_HELP["trials"])
    base_seed: int | None = Field(default=None, description=SETTINGS_HELP["base_seed"])
    max_concurrency: PositiveInt | None = Field(
        default=None, description=SETTINGS_HELP["max_concurrency"]
    )
    batch_size: PositiveInt | None = Field(default=None, description=SETTINGS_HELP["batch_size"])
    task_runner: TaskRunnerKind = Field(
        default="thread",
        description=SETTINGS_HELP["task_runner"],
    )
    dask_address: str | None = Field(default=None, description=SETTINGS_HELP["dask_address"])
    budget: Budget | None = Field(default=None, description=SETTINGS_HELP["budget"])


class EvaluateRequest(_RunRequest):
    """One evaluation of a candidate on train or val (``honesteval evaluate``)."""

    candidate: str | None = Field(default=None, description=SETTINGS_HELP["candidate"])
    split: Literal["train", "val"] = Field(
        default="val",
        description=SETTINGS_HELP["split"],
    )
    ks: list[PositiveInt] | None = Field(default=None, description=SETTINGS_HELP["ks"])
    task_ids: list[str] | None = Field(default=None, description=SETTINGS_HELP["task_ids"])
    fresh: bool = Field(default=False, description=SETTINGS_HELP["fresh"])


class GateRequest(_RunRequest):
    """One gate of a candidate against the current best on val (``honesteval gate``)."""

    candidate: str = Field(description=SETTINGS_HELP["challenger"])
    overrides: GateOverrides = Field(
        default_factory=GateOverrides, description=SETTINGS_HELP["overrides"]
    )


R = TypeVar("R", EvaluateRequest, GateRequest)


def flow_parameters(request: EvaluateRequest | GateRequest) -> dict[str, object]:
    """A request as the ``evaluate`` or ``gate`` flow's parameters (``trials`` is their
    ``n_trials``; a gate's overrides are parameters of their own)."""
    values = request.model_dump(exclude={"overrides"})
    values["n_trials"] = values.pop("trials")
    if isinstance(request, GateRequest):
        values.update(request.overrides.model_dump())
    return values


def from_flow_parameters(cls: type[R], parameters: Mapping[str, object]) -> R:
    """The request a flow run was given (the inverse of :func:`flow_parameters`; a
    parameter that is not a setting, such as ``project``, is left out).

    >>> req = GateRequest(candidate="v2", trials=4, overrides=GateOverrides(alpha=0.05))
    >>> from_flow_parameters(GateRequest, {"project": ".", **flow_parameters(req)}) == req
    True
    """
    values = {k: v for k, v in parameters.items() if k in cls.model_fields or k == "n_trials"}
    values["trials"] = values.pop("n_trials", None)
    if cls is GateRequest:
        values["overrides"] = {k: parameters.get(k) for k in GateOverrides.model_fields}
    return cls.model_validate(values)
