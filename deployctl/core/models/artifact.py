"""A rendered file: where it goes in the tree, its bytes and its mode."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Artifact(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str            # renderer key: plan, ranktable, config, env, start, ms_controller, ...
    path: str            # relative to the output directory, e.g. "node1/ranktable.json"
    content: bytes
    mode: int = 0o644
