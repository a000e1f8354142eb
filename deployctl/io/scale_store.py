"""Where `deployctl scale --apply` keeps the instances it added: <run dir>/scale/<cluster>.json (ScaleState).

Written by deployctl only (0600, replaced atomically, a link in its place is never followed); read back through the
typed model, bounded. Every command that deploys reads it (app/context.py) to see the deployment as scaled.
"""

from __future__ import annotations

import os
from pathlib import Path

from deployctl.core.models.scaling import ScaleState

MAX_STATE_BYTES = 1 << 20       # 4,096 added instances of a few names each fit in a few hundred kB


def state_path(run_root: Path, cluster: str) -> Path:
    return Path(run_root) / "scale" / f"{cluster}.json"


def read_state(run_root: Path, cluster: str) -> ScaleState | None:
    """The cluster's scale state, None when scale added nothing (no file).

    Raises:
        UsageError: the file is not one deployctl wrote (a link, not a regular file, too large, not the model).
    """
    from deployctl.io.localfile import load_model

    path = state_path(run_root, cluster)
    if not os.path.lexists(path):
        return None
    state = load_model(path, ScaleState, MAX_STATE_BYTES, what="scale state",
                       hint=f"deployctl writes {path}; remove it if it is not deployctl's (the added instances "
                            "then are no longer part of the deployment)")
    if state.cluster != cluster:
        from deployctl.core.errors import UsageError

        raise UsageError(f"{path} is the scale state of cluster '{state.cluster}', not '{cluster}'",
                         hint="remove the file, or run with the inventory of that cluster")
    return state


def write_state(run_root: Path, state: ScaleState) -> Path:
    """Replace the cluster's state (removed when nothing is added any more)."""
    path = state_path(run_root, state.cluster)
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not state.added:
        if os.path.lexists(path):
            os.unlink(path)
        return path
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(state.model_dump_json(indent=2) + "\n")
    os.replace(tmp, path)
    return path
