"""The architecture's contracts (pyproject.toml [tool.importlinter], docs/dev/architecture.md): the tree keeps them,
and they bite: a copy of the package with one forbidden import fails `lint-imports`, naming that import."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).parent / "lint-imports"

# Module-level cycles that are known debts in code other work owns (docs/dev/architecture.md, "Debts"): none may be
# added.
KNOWN_CYCLES = [
    {"deployctl.core.engines.mindie.acceptance", "deployctl.core.engines.mindie.acceptance_custom"},
]


def lint(cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(cwd), "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run([str(LINT), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


@pytest.fixture
def scratch(tmp_path: Path) -> Path:
    """A copy of the package and its contracts, to break on purpose."""
    shutil.copytree(ROOT / "deployctl", tmp_path / "deployctl",
                    ignore=shutil.ignore_patterns("__pycache__", "*.yaml", "*.j2", "ascend-llm", "playbooks"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def add_import(tree: Path, module: str, line: str) -> None:
    path = tree / (module.replace(".", "/") + ".py")
    path.write_text(path.read_text() + f"\n{line}\n")


def test_the_tree_keeps_every_contract():
    res = lint(ROOT)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "7 kept, 0 broken" in res.stdout


def test_the_copy_keeps_them_too(scratch):
    res = lint(scratch)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.parametrize("module, line, names", [
    # an upward import: the models naming the hosts backend
    ("deployctl.core.models.plan", "from deployctl.backends.hosts import hosts  # noqa",
     ["deployctl.core.models.plan -> deployctl.backends.hosts.hosts"]),
    # the core naming an engine plug-in
    ("deployctl.core.sizing.memory", "import deployctl.core.engines.mindie.support  # noqa",
     ["deployctl.core.sizing.memory -> deployctl.core.engines.mindie.support"]),
    # one backend importing the other
    ("deployctl.backends.k8s.history", "from deployctl.backends.hosts import status  # noqa",
     ["deployctl.backends.k8s.history -> deployctl.backends.hosts.status"]),
    # one engine plug-in importing the other
    ("deployctl.core.engines.vllm_ascend.ports", "from deployctl.core.engines.mindie import rules  # noqa",
     ["deployctl.core.engines.vllm_ascend.ports -> deployctl.core.engines.mindie.rules"]),
    # the io ring naming a backend (upward)
    ("deployctl.io.records", "from deployctl.backends.common import pipeline  # noqa",
     ["deployctl.io.records -> deployctl.backends.common.pipeline"]),
    # a backend naming a feature above it (up is handed its preflight instead)
    ("deployctl.backends.hosts.up", "from deployctl.features.preflight import run  # noqa",
     ["deployctl.backends.hosts.up -> deployctl.features.preflight.run"]),
    # the core importing an effect library
    ("deployctl.core.render.env", "import subprocess  # noqa",
     ["deployctl.core.render.env -> subprocess"]),
    # the core reading a file through the io ring
    ("deployctl.core.inventory.validate", "from deployctl.io import inventory_file  # noqa",
     ["deployctl.core.inventory.validate -> deployctl.io.inventory_file"]),
    # the engine registry looked up below the composition root (the spec is handed down instead)
    ("deployctl.core.sizing.plan", "from deployctl.app import engines  # noqa",
     ["deployctl.core.sizing.plan -> deployctl.app.engines"]),
    ("deployctl.backends.hosts.hosts", "from deployctl.app.engines import resolve  # noqa",
     ["deployctl.backends.hosts.hosts -> deployctl.app.engines"]),
    ("deployctl.features.watch.recover", "import deployctl.app.engines  # noqa",
     ["deployctl.features.watch.recover -> deployctl.app.engines"]),
    # a cycle inside a package
    ("deployctl.core.sizing.memory", "from deployctl.core.sizing import planner  # noqa",
     [".memory -> .planner", ".planner -> .plan", ".plan -> .memory"]),
])
def test_a_forbidden_import_breaks_a_contract(scratch, module, line, names):
    add_import(scratch, module, line)
    res = lint(scratch)
    assert res.returncode != 0, res.stdout
    assert "BROKEN" in res.stdout
    assert any(n in res.stdout for n in names), res.stdout


def _cycles(graph: grimp.ImportGraph) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[set[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.find_modules_directly_imported_by(w)))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.add(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(comp)
    return out


def dynamic_imports(package: Path) -> list[tuple[str, str, int]]:
    """(importer, imported, line) of every import by name (importlib.import_module, __import__) in the package:
    edges grimp does not see. A name that is not a string constant is reported as imported "?"."""
    out = []
    for path in sorted(package.rglob("*.py")):
        module = ".".join(path.relative_to(package.parent).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in ("import_module", "__import__"):
                arg = node.args[0] if node.args else None
                target = arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else "?"
                out.append((module, target, node.lineno))
    return out


# The one module that imports by a computed name (deployctl/core/plugins.py) and the modules that call it, with the
# folder whose modules (False) or packages (True) each finds: the graph gets an edge from the caller to each.
PLUGINS = "deployctl.core.plugins"
PLUGIN_CALLERS = {
    "deployctl.core.models.engine_settings": ("deployctl/core/models/engine_settings", False),
    "deployctl.app.engines": ("deployctl/core/engines", True),
}


def plugin_callers(package: Path) -> set[str]:
    """Every module that calls plugin_modules."""
    out = set()
    for path in sorted(package.rglob("*.py")):
        module = ".".join(path.relative_to(package.parent).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "plugin_modules":
                out.add(module)
    return out


def plugin_edges(root: Path) -> list[tuple[str, str]]:
    """(caller, plug-in module) for each module or package a plugin_modules caller finds in its folder."""
    out = []
    for caller, (folder, packages) in PLUGIN_CALLERS.items():
        for child in sorted((root / folder).iterdir()):
            if child.name.startswith("_"):
                continue
            if packages and (child / "__init__.py").is_file() or not packages and child.suffix == ".py":
                out.append((caller, f"{folder.replace('/', '.')}.{child.stem}"))
    return out


def import_graph(root: Path) -> grimp.ImportGraph:
    """deployctl's import graph (lazy imports inside functions count) plus the imports by name: the plug-ins each
    plugin_modules caller finds."""
    graph = grimp.build_graph("deployctl", cache_dir=None)
    for importer, imported, line in dynamic_imports(root / "deployctl"):
        if importer == PLUGINS:
            continue
        assert imported != "?", f"{importer}:{line} imports a module by a computed name: the graph cannot see it"
        if imported.startswith("deployctl."):
            graph.add_import(importer=importer, imported=imported, line_number=line, line_contents="import_module")
    for caller, plugin in plugin_edges(root):
        graph.add_import(importer=caller, imported=plugin, line_number=0, line_contents="plugin_modules")
    return graph


def test_no_import_cycle_across_packages_but_the_known_debts():
    """acyclic_siblings checks the modules of each package; this checks every module against every other
    (lazy imports inside functions and imports by name count too)."""
    found = _cycles(import_graph(ROOT))
    assert sorted(map(sorted, found)) == sorted(map(sorted, KNOWN_CYCLES))


def test_nothing_imports_deployctl_modules_by_name_but_the_plugin_finder():
    """The engines are handed down by the composition root; only core/plugins.py imports by a computed name, and
    only the two registries (settings models, engine folders) call it: the graph above sees their edges."""
    assert [d for d in dynamic_imports(ROOT / "deployctl")
            if d[1].startswith(("deployctl", "?")) and d[0] != PLUGINS] == []
    assert plugin_callers(ROOT / "deployctl") == set(PLUGIN_CALLERS)


def test_the_plugin_edges_name_every_engine():
    edges = plugin_edges(ROOT)
    assert ("deployctl.app.engines", "deployctl.core.engines.vllm_ascend") in edges
    assert ("deployctl.core.models.engine_settings", "deployctl.core.models.engine_settings.mindie") in edges


def test_an_import_by_name_that_closes_a_cycle_is_found(scratch, monkeypatch):
    add_import(scratch, "deployctl.core.models.engine",
               "def _late():\n    import importlib\n    return importlib.import_module('deployctl.core.models.inventory')")
    monkeypatch.syspath_prepend(str(scratch))
    for name in [m for m in sys.modules if m == "deployctl" or m.startswith("deployctl.")]:
        monkeypatch.delitem(sys.modules, name)
    found = _cycles(import_graph(scratch))
    assert any({"deployctl.core.models.engine", "deployctl.core.models.inventory"} <= c for c in found), found
