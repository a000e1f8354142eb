"""Where the project's documentation is published: the one place help texts and error messages take it from.

An installed deployctl carries no docs/ folder and no checkout, so a message never names a repository path
(`docs/<page>.md`, `inventories/...`): it names a command the user has (`deployctl init`, `deployctl schema`) or
one of these URLs. pyproject.toml [project.urls] names the same repository (tests/cli/test_pointers.py).
"""

from __future__ import annotations

REPOSITORY = "https://github.com/deployctl/deployctl"
DOCS = f"{REPOSITORY}/blob/main/docs/"           # + a page's file name (doc())
GUIDES = f"{REPOSITORY}/tree/main/docs"           # the folder: every page (pyproject's Documentation URL)


def doc(page: str, anchor: str = "") -> str:
    """The URL of one page of the docs (and a heading's anchor in it), e.g. doc("troubleshooting.md")."""
    return f"{DOCS}{page}" + (f"#{anchor}" if anchor else "")
