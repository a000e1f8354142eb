"""The engines' support matrices: support.yaml is sourced, `deployctl engines` shows them, docs/engines.md carries them."""

from __future__ import annotations

import json
import re

from conftest import ROOT, run_cli
from deployctl.app import engines
from deployctl.core.engines.mindie.support import matrix
from deployctl.core.engines.mindie.table import support_rows
from deployctl.core.engines.vllm_ascend.support import matrix as vllm_matrix


def markdown_table() -> str:
    """What `deployctl engines --markdown` prints: every engine's table, in kind order."""
    return "\n\n".join(engines.resolve(k).support_table() for k in sorted(engines.KINDS))

BLOCK = re.compile(r"<!-- support-matrix:begin -->\n(.*?)\n<!-- support-matrix:end -->", re.S)


def test_readme_block_is_the_generated_table():
    readme = (ROOT / "docs" / "engines.md").read_text(encoding="utf-8")
    found = BLOCK.search(readme)
    assert found, "docs/engines.md has no <!-- support-matrix:begin --> ... <!-- support-matrix:end --> block"
    assert found.group(1).strip() == markdown_table().strip(), (
        "docs/engines.md's support matrix is stale: run `deployctl engines --markdown` and paste its output "
        "between <!-- support-matrix:begin --> and <!-- support-matrix:end -->")


def _entries(node, path=()):
    """Every mapping with a `value` key in support.yaml, with its path."""
    if isinstance(node, dict):
        if "value" in node:
            yield path, node
        for key, sub in node.items():
            yield from _entries(sub, (*path, str(key)))
    elif isinstance(node, list):
        for i, sub in enumerate(node):
            yield from _entries(sub, (*path, str(i)))


def test_every_yes_or_no_has_a_source():
    for data, least in ((matrix(), 20), (vllm_matrix(), 10)):
        _sourced(data, least)


def _sourced(data, least: int):
    entries = list(_entries(data))
    assert len(entries) > least
    missing = [".".join(path) for path, e in entries
               if e["value"] in ("yes", "no") and not str(e.get("source", "")).strip()]
    assert not missing, f"support.yaml entries saying yes/no without a source: {missing}"
    unsourced = [v for v, e in data["versions"].items() if not str(e.get("sources", "")).strip()]
    assert not unsourced, f"support.yaml versions without `sources`: {unsourced}"


def test_rows_are_deterministic_and_complete():
    rows = support_rows()
    assert rows == support_rows() and markdown_table() == markdown_table()
    data = matrix()
    assert len(rows) == len(data["models"]) * len(data["versions"])
    assert all(r["supported"] in ("yes", "no", "unverified") for r in rows)
    assert all(r["source"] for r in rows if r["supported"] in ("yes", "no"))


def test_engines_json_lists_v32_by_version():
    res = run_cli("engines", "--output", "json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    v32 = {r["version"]: r for r in rows if r["engine"] == "mindie" and r["display"] == "DeepSeek-V3.2"}
    assert v32["2.2"]["supported"] == "no", v32["2.2"]
    assert v32["2.2"]["source"]
    assert v32["3.0"]["supported"] == "yes" and v32["3.0"]["runtime"] == "torch", v32["3.0"]


def test_engines_text_and_markdown():
    res = run_cli("engines")
    assert res.returncode == 0, res.stderr
    assert "DeepSeek-V3.2" in res.stdout and "unverified" in res.stdout
    md = run_cli("engines", "--markdown")
    assert md.returncode == 0, md.stderr
    assert md.stdout.strip() == markdown_table().strip()


def test_engines_help_has_an_example():
    res = run_cli("engines", "--help")
    assert res.returncode == 0, res.stderr
    assert "Example" in res.stdout and "deployctl engines --output json" in res.stdout
