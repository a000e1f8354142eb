"""An engine is a plug-in folder: the registry finds it by its files, and nothing outside its folder (and its
settings model, core/models/engine_settings/<kind>.py) names its modules, so adding one changes no file that
exists (CONTRIBUTING.md "an engine")."""

from __future__ import annotations

import importlib
import sys
import textwrap
from pathlib import Path

import grimp

from deployctl.app import engines
from deployctl.core.models.engine_settings import SETTINGS

ROOT = Path(__file__).resolve().parents[2]
ENGINES = ROOT / "deployctl" / "core" / "engines"


def engine_folders() -> list[str]:
    return sorted(p.name for p in ENGINES.iterdir() if (p / "__init__.py").is_file() and not p.name.startswith("_"))


def test_every_engine_folder_is_registered_with_its_settings_model():
    folders = engine_folders()
    assert len(folders) >= 2
    assert sorted(spec.__class__.__module__.rsplit(".", 1)[1] for spec in engines.SPECS.values()) \
        == folders
    assert set(engines.SPECS) == set(SETTINGS)
    for kind, spec in engines.SPECS.items():
        assert spec.settings is SETTINGS[kind]


def test_a_new_folder_is_found_without_editing_the_registry(tmp_path, monkeypatch):
    """A package of engine folders with one more engine (a stand-in spec): discover() finds it by its folder."""
    pkg = tmp_path / "plugin_probe_engines"
    (pkg / "toy").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "_private").mkdir()
    (pkg / "_private" / "__init__.py").write_text("SPEC = object()\n")
    (pkg / "toy" / "__init__.py").write_text(textwrap.dedent("""
        class ToySpec:
            kind = "toy"
        SPEC = ToySpec()
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "plugin_probe_engines", raising=False)
    found = engines.discover(importlib.import_module("plugin_probe_engines"))
    assert list(found) == ["toy"]


def test_no_module_outside_an_engine_folder_imports_it():
    graph = grimp.build_graph("deployctl", cache_dir=None)
    offenders = []
    for folder in engine_folders():
        engine = f"deployctl.core.engines.{folder}"
        settings = f"deployctl.core.models.engine_settings.{folder}"
        for target, allowed in ((engine, (engine,)), (settings, (engine, settings))):
            for imported in [target, *graph.find_descendants(target)] if target in graph.modules else []:
                for importer in graph.find_modules_that_directly_import(imported):
                    if not any(importer == a or importer.startswith(a + ".") for a in allowed):
                        offenders.append(f"{importer} -> {imported}")
    assert offenders == [], "engine modules named outside their folder:\n" + "\n".join(sorted(offenders))
