"""The composition root (deployctl/app/) builds what a command runs with, once, and hands it down: the SSH
executor is made in one place (app/executors.py). (That the engine registry is read only there and by the CLI is
a rings contract: tests/architecture/test_layers.py.)"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "deployctl"


def constructions(name: str) -> list[str]:
    """file:line of every call ``name(...)`` in the package."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                f = node.func
                called = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
                if called == name:
                    out.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return out


def test_the_ssh_executor_is_made_in_one_place():
    assert {site.split(":")[0] for site in constructions("SshExecutor")} == {"deployctl/app/executors.py"}
