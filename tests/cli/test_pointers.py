"""Help texts and messages point at what an installed user has: commands (`deployctl init`, `deployctl schema`)
and the URLs of the published docs, never a path of the repository (docs/<page>.md, inventories/..., charts/...,
`npm install` in site-packages). The docs' URL lives in one place (deployctl/core/docs_url.py) and names the
repository pyproject.toml names; every page it is asked for exists."""

from __future__ import annotations

import re
import tomllib

import pytest

from conftest import ROOT, run_cli
from deployctl.core.docs_url import DOCS, GUIDES, REPOSITORY, doc

URL = re.compile(r"https?://\S+")
# a repository path a user of the wheel does not have (outside a URL)
REPO_PATH = re.compile(r"(?<![\w/.-])(docs/[\w.-]+|charts/|deployctl/(?:schema|charts|samples)/|node_modules|"
                       r"inventories/|README|npm install|\.\./)")


def _commands() -> list[list[str]]:
    top = run_cli("--help").stdout
    names = [ln.split()[0] for ln in top.split("Commands:", 1)[1].splitlines() if ln.startswith("  ") and ln.split()]
    out = [[]]
    for name in names:
        out.append([name])
        sub = run_cli(name, "--help").stdout
        if "Commands:" in sub:
            out += [[name, ln.split()[0]] for ln in sub.split("Commands:", 1)[1].splitlines()
                    if ln.startswith("  ") and ln.split()]
    return out


def test_the_docs_url_is_the_repository_pyproject_names():
    urls = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]
    assert urls["Repository"] == REPOSITORY and urls["Documentation"] == GUIDES
    assert DOCS.startswith(REPOSITORY + "/") and doc("watch.md") == DOCS + "watch.md"


def test_every_page_the_code_names_exists():
    named = set()
    for path in (ROOT / "deployctl").rglob("*.py"):
        named |= set(re.findall(r"""\bdoc\(["']([^"']+)["']""", path.read_text(encoding="utf-8")))
    assert named, "no doc() call found: the scan is broken"
    missing = sorted(p for p in named if not (ROOT / "docs" / p.split("#")[0]).is_file())
    assert not missing, f"doc() names pages docs/ does not have: {missing}"


def test_no_help_page_names_a_repository_path():
    bad = {}
    for cmd in _commands():
        if cmd == ["init"]:          # its help names the inventories/ folder it writes
            continue
        r = run_cli(*cmd, "--help")
        assert r.returncode == 0, (cmd, r.stderr)
        found = REPO_PATH.findall(URL.sub("", r.stdout))
        if found:
            bad[" ".join(cmd) or "(top)"] = found
    assert not bad, f"help pages naming repository paths: {bad}"


@pytest.mark.parametrize("content, where", [
    (None, "missing"),                      # no such file
    ("", "empty"),                          # an empty file
    ("- a list\n", "list"),                 # not a mapping
], ids=lambda v: v if isinstance(v, str) and v in ("missing", "empty", "list") else "")
def test_a_first_mistake_points_at_deployctl_init(tmp_path, content, where):
    inv = tmp_path / "my.yaml"
    if content is not None:
        inv.write_text(content)
    r = run_cli("validate", "-i", str(inv), cwd=tmp_path)
    assert r.returncode == 2 and "`deployctl init`" in r.stderr, r.stderr
    assert not REPO_PATH.findall(URL.sub("", r.stderr.replace(str(tmp_path), ""))), r.stderr
