"""Read a checkpoint's small files from the controller's disk (model.config_path, `deployctl checkpoint`), bounded.

Only regular files are read, never more than the limit the core gives for each (a device or a growing file says
nothing about its size); the core parses what was read (core/checkpoint/files.py) and sizes the model from it.
"""

from __future__ import annotations

from pathlib import Path

from deployctl.core.checkpoint.files import CheckpointFiles, checkpoint_files, parse_json, problem, too_large
from deployctl.io.localfile import NotRegular, TooLarge, read_regular

HINT = "give the directory that holds the checkpoint's config.json (model.config_path)"


def read_bounded(path: Path, limit: int) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit``; a problem naming it otherwise. A link is
    followed: the operator names the checkpoint, and a Hugging Face cache's snapshot is links into its blobs."""
    try:
        return read_regular(path, limit, follow=True)
    except NotRegular:
        raise problem(path, "is not a regular file") from None
    except TooLarge:
        raise too_large(path, limit) from None
    except OSError as exc:
        raise problem(path, f"cannot be read: {exc.strerror or exc}", hint=HINT) from None


def read_json(path: Path, limit: int) -> dict:
    """The JSON object in ``path``, refused when larger than ``limit`` bytes, not JSON, or not an object."""
    return parse_json(read_bounded(path, limit), path, limit)


class _Directory:
    def __init__(self, directory: Path):
        self.directory = directory

    def read(self, name: str, limit: int) -> bytes | None:
        path = self.directory / name
        if name != "config.json" and not path.exists():
            return None
        return read_bounded(path, limit)

    def names(self) -> list[str]:
        return sorted(p.name for p in self.directory.iterdir())


def read_checkpoint(directory: Path | str) -> CheckpointFiles:
    """config.json (required), the safetensors index and the msmodelslim description (when present)."""
    directory = Path(directory)
    if not directory.is_dir():
        raise problem(directory, "is not a directory", hint="model.config_path names a directory holding the "
                      "checkpoint's config.json and model.safetensors.index.json")
    return checkpoint_files(directory, _Directory(directory))


def describe(directory: Path | str):
    """The ModelDescription of the checkpoint in ``directory`` (InventoryError when it cannot be read)."""
    from deployctl.core.checkpoint.describe import describe_files

    return describe_files(read_checkpoint(directory))
