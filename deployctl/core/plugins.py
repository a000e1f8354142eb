"""Plug-ins found by file: the modules of a package, imported by name.

The one place deployctl imports its own modules by a computed name. Two callers: the engines' settings models
(core/models/engine_settings/: a module per engine) and the engine registry (app/engines.py: a folder per engine
under core/engines/). A new engine is found by its files alone; tests/architecture/test_layers.py adds these
edges to the import graph so that the layer and cycle checks still see them.
"""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType
from typing import Iterable


def plugin_modules(package: str, path: Iterable[str], packages: bool) -> list[ModuleType]:
    """The modules (``packages=False``) or sub-packages (``packages=True``) of ``package`` found on ``path`` (its
    ``__path__``), imported, by name; names starting with ``_`` are not plug-ins."""
    names = sorted(m.name for m in pkgutil.iter_modules(list(path)) if m.ispkg == packages
                   and not m.name.startswith("_"))
    return [importlib.import_module(f"{package}.{name}") for name in names]
