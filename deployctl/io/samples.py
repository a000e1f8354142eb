"""The files `deployctl init` writes: read from the installed package (deployctl/samples/), written into the
user's directory without replacing anything unless asked.

Writing never follows a link at a target (with --force the link itself is replaced, not the file it points
at), never replaces a directory, and refuses every existing file in one message, before writing any.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

from deployctl.core.errors import Problem, UsageError

SAMPLES = "deployctl.samples"


def packaged_samples() -> dict[str, bytes]:
    """Every data file under deployctl/samples/ (not its Python modules), by its path relative to the package
    with "/" separators ("inventories/sample.yaml" ...), sorted."""
    out: dict[str, bytes] = {}

    def walk(node, prefix: str) -> None:
        for child in sorted(node.iterdir(), key=lambda c: c.name):
            if child.name == "__pycache__" or child.name.endswith((".py", ".pyc")):
                continue
            rel = f"{prefix}{child.name}"
            if child.is_dir():
                walk(child, rel + "/")
            else:
                out[rel] = child.read_bytes()

    walk(resources.files(SAMPLES), "")
    return out


def write_new_files(directory: Path, files: dict[str, bytes], force: bool) -> list[Path]:
    """Write ``files`` (relative "/" paths -> bytes) under ``directory``, creating folders as needed; the paths
    written, in order. Unless ``force``, a file already there refuses them all (UsageError, exit 2, every one
    named) before anything is written; a directory in the way refuses even with ``force``."""
    targets = [(directory.joinpath(*rel.split("/")), data) for rel, data in files.items()]
    in_way = [Problem("a directory is in the way", file=str(t)) for t, _ in targets if t.is_dir() and not
              t.is_symlink()]
    if in_way:
        raise UsageError(f"cannot write into {directory}: {len(in_way)} target(s) are directories",
                         problems=in_way, hint="choose another directory: deployctl init DIR")
    existing = [t for t, _ in targets if t.is_symlink() or t.exists()]
    if existing and not force:
        raise UsageError(f"{len(existing)} file(s) under {directory} exist already; nothing was written",
                         problems=[Problem("exists already", file=str(t)) for t in existing],
                         hint="pass --force to replace them with the packaged samples, or write elsewhere: "
                              "deployctl init DIR")
    written = []
    for target, data in targets:
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            if target.is_symlink() or target.exists():
                target.unlink()                  # --force: replace the file or link, never write through a link
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        except OSError as exc:
            raise UsageError(f"cannot write {target}: {exc.strerror or exc}",
                             hint="choose a directory you can write: deployctl init DIR") from None
        written.append(target)
    return written
