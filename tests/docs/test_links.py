"""Every relative link of README.md, CONTRIBUTING.md and docs/**/*.md resolves: the file or folder exists in the
repository, and an #anchor (same page or another) is a heading of the target page as GitHub names it. External
links are not fetched."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from mdscan import ROOT, Link, anchors, check_link, doc_files, heading_text, links, slug


def test_every_relative_link_and_anchor_resolves():
    pages = doc_files()
    assert ROOT / "README.md" in pages and len(pages) > 10
    problems = [p for page in pages for link in links(page) if (p := check_link(link, ROOT))]
    assert not problems, "broken links:\n" + "\n".join(problems)


@pytest.mark.parametrize("heading,anchor", [
    ("Quick start (two commands, from a clean clone)", "quick-start-two-commands-from-a-clean-clone"),
    ("EI0006: socket between two ranks not built in time", "ei0006-socket-between-two-ranks-not-built-in-time"),
    ("`error code is 11`", "error-code-is-11"),
    ("GLOO_SOCKET_IFNAME and the node's interface", "gloo_socket_ifname-and-the-nodes-interface"),
    ("The serving loop (`simulate.py`, `serving.py`, `clients.py`)",
     "the-serving-loop-simulatepy-servingpy-clientspy"),
    ("Fleets: many instances behind a router, rolling updates", "fleets-many-instances-behind-a-router-rolling-updates"),
    ("Per-engine deratings", "per-engine-deratings"),
    ("**Bold** and [a link](x.md) — with a dash", "bold-and-a-link--with-a-dash"),
    ("`__init__.py` layout", "__init__py-layout"),
])
def test_anchors_follow_github(heading, anchor):
    assert slug(heading_text(heading)) == anchor


def test_repeated_headings_and_setext_headings_get_their_own_anchors():
    text = "# A\n\n## Setup\n\ntext\n\n## Setup\n\n```\n## Setup\n```\n\nOther\n-----\n\n| x |\n|---|\n"
    assert anchors(text) == {"a", "setup", "setup-1", "other"}


HERE = Path(__file__).resolve().parent
_DOC_PATH = re.compile(r"(?<![\w/.-])docs/(?:dev/)?[\w.-]+\.md\b")
_TEXT = {".md", ".py", ".yaml", ".yml", ".toml", ".json", ".txt", ".j2", ".tpl", ".sh", ".cfg", ".ini", ""}


def _tracked_text_files() -> list[Path]:
    """The repository's text files (git's list when this is a checkout, else a walk that skips build output)."""
    try:
        names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True,
                               timeout=60).stdout.decode().split("\0")
        files = [ROOT / n for n in names if n]
    except (OSError, subprocess.SubprocessError):
        skip = {".git", ".venv", "node_modules", "__pycache__", "bin", "rendered", ".deployctl"}
        files = [p for p in ROOT.rglob("*") if p.is_file() and not skip & set(p.relative_to(ROOT).parts)]
    return [p for p in files if p.suffix in _TEXT and p.is_file()
            and p.parent != HERE                              # this folder's own examples of broken names
            and p.name not in {"go.mod", "go.sum"}]           # their text is the control plane's build stamp


def test_every_page_named_by_its_path_exists():
    """A page named in prose, a comment, a help text or a test (`docs/x.md`, `docs/dev/x.md`) exists: moving a page
    leaves no stale name behind."""
    missing = []
    for path in _tracked_text_files():
        try:
            text = path.read_text(encoding="utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        for no, line in enumerate(text.splitlines(), 1):
            missing += [f"{path.relative_to(ROOT)}:{no}: {m.group(0)}" for m in _DOC_PATH.finditer(line)
                        if not (ROOT / m.group(0)).is_file()]
    assert not missing, "pages named that do not exist:\n" + "\n".join(missing)


def test_a_broken_link_or_anchor_fails(tmp_path):
    (tmp_path / "docs" / "dev").mkdir(parents=True)
    (tmp_path / "README.md").write_text(
        "# Top\n\n## Use it\n\n"
        "[ok](docs/a.md#section-two) [ok](#use-it) [ok](docs/dev/) [web](https://example.com/x#y)\n"
        "`[not a link](nowhere.md)`\n\n```\n[not a link](nowhere.md)\n```\n"
        "[gone](docs/missing.md) [bad anchor](docs/a.md#section-three) [bad here](#usage)\n"
        "[outside](../elsewhere.md) [absolute](/docs/a.md)\n")
    (tmp_path / "docs" / "a.md").write_text("# A\n\n## Section two\n\n[back](../README.md#top)\n")
    pages = [tmp_path / "README.md", tmp_path / "docs" / "a.md"]
    problems = [p for page in pages for link in links(page) if (p := check_link(link, tmp_path))]
    assert len(problems) == 5, problems
    text = "\n".join(problems)
    for wrong in ("docs/missing.md does not exist", "#section-three", "#usage", "outside the repository",
                  "is absolute"):
        assert wrong in text
    assert check_link(Link(tmp_path / "docs" / "a.md", 5, "../README.md#use-it"), tmp_path) is None
