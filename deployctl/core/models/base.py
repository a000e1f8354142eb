"""The bases of deployctl's data models: immutable, unknown keys refused."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Strict(BaseModel):
    """Inventory models: strict too, so YAML `true` is not the integer 1, and "8" is not 8."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)
