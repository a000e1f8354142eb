"""Env files (KEY=VALUE lines, usable as `docker run --env-file`): the one writer every engine uses."""

from __future__ import annotations

from typing import TYPE_CHECKING

import re
from functools import lru_cache


from deployctl.core.input.envcheck import ENV_KEY  # noqa: E402

if TYPE_CHECKING:
    from deployctl.core.models.inventory import Inventory
# docker --env-file reads a line as KEY=VALUE up to the newline, with no quoting: a newline (or any other
# control character) in a value would start another variable (LD_PRELOAD=...) or split the line
ENV_BAD = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def env_file(header: list[str], env: dict[str, str]) -> str:
    """The one writer of env files: `# header` lines, then KEY=VALUE lines; refuses what would not be
    read back as exactly these variables by `docker run --env-file` (or a shell sourcing it)."""
    from deployctl.core.errors import RenderError

    for key in env:
        if not _is_name(key):
            raise RenderError(f"env key {key!r} is not a variable name", hint="this is a deployctl bug; "
                              "validation should have refused it")
    if ENV_BAD.search("".join(env.values())):         # one search per file; the value is named below
        for key, value in env.items():
            bad = ENV_BAD.search(value)
            if bad:
                raise RenderError(f"env {key}: the value holds a control character (U+{ord(bad.group()):04X}) "
                                  "that would split the env file", hint="this is a deployctl bug; validation "
                                  "should have refused it")
    lines = [f"# {h}" for h in header]
    lines += [f"{key}={value}" for key, value in env.items()]
    return "\n".join(lines) + "\n"


@lru_cache(maxsize=4096)
def _is_name(key: str) -> bool:
    """A variable name (the few dozen keys of a fleet's env files are checked once each)."""
    return ENV_KEY.match(key) is not None


def user_env(inv: Inventory, role: str) -> dict[str, str]:
    """engine.env, then the role's own layout.<role>.env over it (pd-split), as env-file values."""
    block = getattr(inv.layout, role, None) if role in ("prefill", "decode") else None
    merged = {**inv.engine.env, **(block.env if block is not None else {})}
    return {k: env_value(v) for k, v in merged.items()}


def env_value(value: object) -> str:
    """An inventory env value as its env-file text (YAML booleans as true/false)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
