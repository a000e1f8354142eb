"""Data shipped inside the deployctl package (catalogs, support matrices, presets, templates, packaged checkpoints).

The one module of the core that opens files, and only files of the installed package itself, by names written in
the code: never a path from an inventory, a host or the environment. Everything else the core needs comes in as
data (tests/architecture/test_pure_core.py keeps it so).
"""

from __future__ import annotations

from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from deployctl.core.checkpoint.files import CheckpointFiles


def packaged_text(package: str, *parts: str) -> str:
    """The UTF-8 text of a file shipped in ``package`` (e.g. "deployctl.core.catalog", "models.yaml")."""
    return resources.files(package).joinpath(*parts).read_text(encoding="utf-8")


def packaged_yaml(package: str, *parts: str) -> Any:
    """A YAML file shipped in the package, read with libyaml's parser when PyYAML has it (the same safe
    constructor, about ten times faster: the support matrices and acceptance rules are read on every validate)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load(packaged_text(package, *parts), Loader=loader)  # noqa: S506 - a safe loader


class _Packaged:
    """A checkpoint's small files shipped in the package (catalog/checkpoints/<name>/): a checkpoint FileSource."""

    def __init__(self, package: str, parts: tuple[str, ...]):
        self.root = resources.files(package).joinpath(*parts)

    def read(self, name: str, limit: int) -> bytes | None:
        path = self.root.joinpath(name)
        return path.read_bytes()[: limit + 1] if path.is_file() else None

    def names(self) -> list[str]:
        return sorted(p.name for p in self.root.iterdir())


def packaged_checkpoint(package: str, *parts: str) -> CheckpointFiles:
    """The CheckpointFiles of a checkpoint shipped in ``package`` under ``parts``."""
    from pathlib import Path

    from deployctl.core.checkpoint.files import checkpoint_files

    source = _Packaged(package, parts)
    return checkpoint_files(Path(str(source.root)), source)


def package_file(package: str, *parts: str) -> str:
    """The path of a file shipped in the package, for a loader that opens it itself (Jinja2's)."""
    return str(resources.files(package).joinpath(*parts))
