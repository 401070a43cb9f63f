"""The adapter kinds a project file may name.

Adding a kind is one module (its target and its config class: ``kind: Literal["<name>"]`` and
``build``) plus one line in :data:`AdapterConfig`. pydantic picks the class by ``kind``, so
each kind validates only its own keys and :func:`~honesteval.adapters.build_adapter` needs no
if-chain.
"""

from __future__ import annotations

from typing import Annotated, get_args

from pydantic import Field

from ._command import CommandTargetConfig
from ._custom import CustomAdapterConfig
from ._openai import OpenAITargetConfig
from ._python import NoTargetConfig, PythonTargetConfig
from .inspect_eval import InspectTargetConfig

AdapterConfig = Annotated[
    PythonTargetConfig
    | CommandTargetConfig
    | OpenAITargetConfig
    | NoTargetConfig
    | CustomAdapterConfig
    | InspectTargetConfig,
    Field(discriminator="kind"),
]

#: The kind names, in the order above (for messages and docs).
ADAPTER_KINDS: tuple[str, ...] = tuple(
    get_args(cls.model_fields["kind"].annotation)[0] for cls in get_args(get_args(AdapterConfig)[0])
)
