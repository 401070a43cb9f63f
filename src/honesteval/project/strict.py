"""The base of every section of ``honesteval.yaml``: unknown keys rejected, frozen once loaded.

Its own module so that the project schema (:mod:`honesteval.project.schema`) and the adapter
kinds, whose config classes live beside their adapters, share one definition without importing
each other.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A validated, immutable section of the project file."""

    # strict: `trials: true` is not 1 and `retries: "3"` is not 3; no NaN or inf anywhere.
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)
