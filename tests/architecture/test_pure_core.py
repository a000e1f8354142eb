"""The core is pure (docs/dev/architecture.md): no file, process, socket, environment or clock access in
deployctl/core/, so everything it computes depends only on what it is handed. Walks every module's syntax tree.

The one exception is core/packaged.py: it reads files shipped inside the package (catalogs, templates, support
matrices), by names in the code, never a path from an inventory, a host or the environment. And core/plugins.py lists the
modules of deployctl's own packages (its engines and their settings models) and imports them: deployctl's own
files, found by folder (tests/architecture/test_layers.py keeps that to the two registries).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "deployctl" / "core"
ALLOWED = {CORE / "packaged.py", CORE / "plugins.py"}

# modules whose import means an effect (or a way to run code by name)
EFFECT_MODULES = {"os", "io", "shutil", "tempfile", "subprocess", "socket", "time", "select", "signal",
                  "threading", "multiprocessing", "asyncio", "urllib.request", "http", "requests", "httpx",
                  "paramiko", "ansible_runner", "kubernetes", "importlib", "glob", "pty", "fcntl", "sqlite3",
                  "platform", "getpass", "pwd", "ctypes"}
EFFECT_CALLS = {"open", "input", "print", "exec", "eval", "compile", "__import__", "breakpoint"}
# methods of pathlib paths (and file objects) that touch the file system or the environment
PATH_METHODS = {"read_text", "read_bytes", "write_text", "write_bytes", "open", "exists", "is_file", "is_dir",
                "is_symlink", "stat", "lstat", "iterdir", "glob", "rglob", "mkdir", "unlink", "rmdir", "touch",
                "expanduser", "home", "cwd", "resolve", "samefile", "chmod", "symlink_to", "hardlink_to",
                "readlink"}
CLOCK = {("datetime", "now"), ("datetime", "utcnow"), ("datetime", "today"), ("date", "today")}


def _effect_module(name: str) -> bool:
    parts = name.split(".")
    return any(".".join(parts[:i]) in EFFECT_MODULES for i in range(1, len(parts) + 1))


def effects(source: str) -> list[tuple[int, str]]:
    """(line, what) of every effect in a module's source."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            out += [(node.lineno, f"import {a.name}") for a in node.names if _effect_module(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if _effect_module(node.module):
                out.append((node.lineno, f"from {node.module} import ..."))
        elif isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id in EFFECT_CALLS:
                out.append((node.lineno, f"{f.id}()"))
            elif isinstance(f, ast.Attribute):
                if f.attr in PATH_METHODS:
                    out.append((node.lineno, f".{f.attr}()"))
                elif isinstance(f.value, ast.Name) and (f.value.id, f.attr) in CLOCK:
                    out.append((node.lineno, f"{f.value.id}.{f.attr}()"))
    return out


def core_modules() -> list[Path]:
    return sorted(p for p in CORE.rglob("*.py") if p not in ALLOWED)


@pytest.mark.parametrize("path", core_modules(), ids=lambda p: str(p.relative_to(CORE)))
def test_the_core_module_has_no_effect(path: Path):
    found = effects(path.read_text(encoding="utf-8"))
    assert not found, "\n".join(f"{path.relative_to(CORE.parent.parent)}:{line}: {what} (the core is pure: read "
                                 "in deployctl/io/ and hand it the data)" for line, what in found)


@pytest.mark.parametrize("snippet, what", [
    ("def f(p):\n    return open(p).read()\n", "open()"),
    ("def f(p):\n    return p.read_text()\n", ".read_text()"),
    ("import os\n\ndef f():\n    return os.environ.get('HOME')\n", "import os"),
    ("from subprocess import run\n", "from subprocess import ..."),
    ("import socket\n", "import socket"),
    ("import time\n\ndef f():\n    return time.monotonic()\n", "import time"),
    ("from datetime import datetime\n\ndef f():\n    return datetime.now()\n", "datetime.now()"),
    ("def f(p):\n    return p.expanduser()\n", ".expanduser()"),
    ("from importlib import import_module\n", "from importlib import ..."),
])
def test_the_walk_finds_each_kind_of_effect(snippet: str, what: str):
    assert what in [w for _, w in effects(snippet)]


def test_a_pure_module_passes():
    assert effects("import re\nfrom pathlib import Path\n\ndef f(p: Path) -> str:\n    return (p / 'x').name\n") == []
