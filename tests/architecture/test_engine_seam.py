"""The engine seam: outside the engine plug-ins (deployctl/core/engines/), their inventory blocks' models (the static
settings union, deployctl/core/models/engine_settings/) and the registry the composition root resolves them from
(deployctl/app/engines.py) the code never names MindIE, and engine.kind is read.

Comments and docstrings may name the engine (they explain where a rule comes from); code, string literals
included, may not: the core asks the engine spec it is handed (``inv.engine_spec``) instead.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

import yaml

from conftest import EXAMPLES, ROOT, run_cli

PACKAGE = ROOT / "deployctl"
ENGINES = PACKAGE / "core" / "engines"
REGISTRY = PACKAGE / "app" / "engines.py"
SETTINGS = PACKAGE / "core" / "models" / "engine_settings"
# the engines by name (MindIE, vLLM), MindIE's env prefix, the MindIE-MS binaries and their rank table (MindIE's config.json is skipped:
# it cannot be told from a model's config.json)
NAMES = re.compile(r"(?i:mindie|vllm|sglang|ms_controller|ms_coordinator|global_ranktable)|MIES_")


def _docstring_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """(start, end) positions of every module, class and function docstring."""
    spans = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        first = node.body[0] if node.body else None
        if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)):
            spans.append(((first.lineno, first.col_offset), (first.end_lineno, first.end_col_offset)))
    return spans


def code_mentions(path) -> list[tuple[int, str]]:
    """(line, text) of every engine name in the code of one module (comments and docstrings dropped)."""
    source = path.read_text(encoding="utf-8")
    spans = _docstring_spans(source)
    lines = source.splitlines()
    hits: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            continue
        if tok.type == tokenize.STRING and any(a <= tok.start and tok.end <= b for a, b in spans):
            continue
        for m in NAMES.finditer(tok.string):
            line = tok.start[0] + tok.string.count("\n", 0, m.start())
            hits.setdefault(line, lines[line - 1].strip())
    return sorted(hits.items())


def test_core_code_does_not_name_the_engine():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if ENGINES in path.parents or SETTINGS in path.parents or path == REGISTRY:
            continue
        for line, text in code_mentions(path):
            offenders.append(f"{path.relative_to(ROOT)}:{line}: {text}")
    for o in offenders:
        print(o)
    assert not offenders, ("code outside deployctl/core/engines/ names MindIE (ask the driver of engine.kind):\n"
                           + "\n".join(offenders))


def test_the_scanner_skips_comments_and_docstrings_only(tmp_path):
    mod = tmp_path / "m.py"
    mod.write_text('"""MindIE module docstring."""\n'
                   "# a MindIE comment\n"
                   "def f():\n"
                   '    """MIES_ docstring."""\n'
                   '    return "ok"  # ms_controller\n'
                   "class C:\n"
                   "    '''global_ranktable'''\n"
                   '    x = "mindie-service"\n'
                   'y = ("a"\n'
                   '     "MIES_INSTALL_PATH")\n'
                   "enemies_ = 1\n", encoding="utf-8")
    assert [line for line, _ in code_mentions(mod)] == [8, 10]


def test_engine_kind_is_read(tmp_path):
    inv = yaml.safe_load((EXAMPLES / "a2-1x8-single.yaml").read_text(encoding="utf-8"))
    inv["engine"]["kind"] = "nonsense"
    path = tmp_path / "inv.yaml"
    path.write_text(yaml.safe_dump(inv, sort_keys=False), encoding="utf-8")
    res = run_cli("validate", "-i", str(path))
    assert res.returncode == 2, res.stdout + res.stderr
    assert "engine.kind" in res.stdout + res.stderr, res.stdout + res.stderr
