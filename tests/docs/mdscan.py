"""Reading the repository's Markdown the way GitHub renders it, for the docs tests: which lines are code, which are
headings (and the anchors GitHub gives them), which links a page makes, and which code a page shows."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def doc_files(root: Path = ROOT) -> list[Path]:
    """The pages a reader follows: README.md, CONTRIBUTING.md and everything under docs/."""
    files = [root / name for name in ("README.md", "CONTRIBUTING.md") if (root / name).is_file()]
    return files + sorted((root / "docs").rglob("*.md"))


@dataclass(frozen=True)
class Fence:
    info: str           # the info string's first word ("bash", "" for a plain fence)
    start: int          # line number (1-based) of the first line inside the fence
    lines: tuple[str, ...]


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)")


def split_fences(text: str) -> tuple[list[tuple[int, str]], list[Fence]]:
    """The lines outside fenced code blocks (number, text) and the fenced blocks themselves."""
    prose: list[tuple[int, str]] = []
    fences: list[Fence] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            prose.append((i + 1, lines[i]))
            i += 1
            continue
        marker, info = m.group(1), m.group(2).lower()
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not re.match(rf"^ {{0,3}}{marker[0]}{{{len(marker)},}}\s*$", lines[j]):
            body.append(lines[j])
            j += 1
        fences.append(Fence(info, i + 2, tuple(body)))
        i = j + 1
    return prose, fences


_CODE_SPAN = re.compile(r"(`+)(.+?)(?<!`)\1(?!`)")


def code_spans(line: str) -> list[str]:
    """The inline code spans of a prose line (GitHub trims one leading and trailing space)."""
    out = []
    for m in _CODE_SPAN.finditer(line):
        s = m.group(2)
        if len(s) > 2 and s.startswith(" ") and s.endswith(" "):
            s = s[1:-1]
        out.append(s)
    return out


def without_code_spans(line: str) -> str:
    return _CODE_SPAN.sub(lambda m: " " * len(m.group(0)), line)


# ------------------------------------------------------------------ headings and anchors

_ATX = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")


def heading_text(raw: str) -> str:
    """A heading's text as GitHub renders it: code spans keep their content, links and images their text,
    emphasis markers and HTML tags go."""
    parts, last = [], 0
    for m in _CODE_SPAN.finditer(raw):
        parts += [_plain(raw[last:m.start()]), m.group(2)]
        last = m.end()
    return "".join(parts + [_plain(raw[last:])]).strip()


def _plain(s: str) -> str:
    s = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", s)
    s = re.sub(r"!?\[([^\]]*)\]\[[^\]]*\]", r"\1", s)
    s = re.sub(r"<[^>]+>", "", s)
    return re.sub(r"(\*+|(?<!\w)_+|_+(?!\w))", "", s)


def slug(text: str) -> str:
    """GitHub's anchor for a heading's text: lower case, punctuation dropped except '-' and '_', each space a '-'
    (github-slugger)."""
    out = []
    for ch in text.lower():
        if ch in "-_" or ch == " ":
            out.append("-" if ch == " " else ch)
        elif unicodedata.category(ch)[0] in "LNM":
            out.append(ch)
    return "".join(out)


def anchors(text: str) -> set[str]:
    """Every anchor a page defines: its headings' slugs (a repeated slug gets -1, -2, ...) and explicit
    `<a name=...>` / `id=...` targets."""
    prose, _ = split_fences(text)
    seen: dict[str, int] = {}
    found: set[str] = set()

    def add(title: str) -> None:
        base = slug(heading_text(title))
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f"{base}-{n}")

    previous = ""
    last_no = -1
    for no, line in prose:
        m = _ATX.match(line)
        if m:
            add(m.group(2))
        elif (_SETEXT.match(line) and no == last_no + 1 and previous.strip() and not _ATX.match(previous)
              and not previous.lstrip().startswith(("|", "-", "*", ">")) and not _SETEXT.match(previous)):
            add(previous)
        for a in re.finditer(r"<a\s+(?:name|id)=\"([^\"]+)\"", line):
            found.add(a.group(1))
        previous, last_no = line, no
    return found


# ------------------------------------------------------------------ links

@dataclass(frozen=True)
class Link:
    source: Path
    line: int
    target: str


_INLINE_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+(?:\"[^\"]*\"|'[^']*'))?\s*\)")
_REF_DEF = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
_HTML_LINK = re.compile(r"<(?:a|img)\s[^>]*(?:href|src)=\"([^\"]+)\"")


def links(path: Path) -> list[Link]:
    """Every link target of a page outside code: inline links and images, reference definitions, HTML a/img."""
    prose, _ = split_fences(path.read_text(encoding="utf-8"))
    out = []
    for no, line in prose:
        bare = without_code_spans(line)
        targets = [m.group(1) for m in _INLINE_LINK.finditer(bare)]
        targets += [m.group(1) for m in _REF_DEF.finditer(bare)]
        targets += [m.group(1) for m in _HTML_LINK.finditer(bare)]
        out += [Link(path, no, t[1:-1] if t.startswith("<") else t) for t in targets]
    return out


def is_external(target: str) -> bool:
    return re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target) is not None or target.startswith("//")


def check_link(link: Link, root: Path) -> str | None:
    """None when a relative link resolves (file or folder inside the repository, and its #anchor a heading of the
    target page), else what is wrong. External links are not fetched."""
    from urllib.parse import unquote

    if is_external(link.target):
        return None
    where = f"{link.source.relative_to(root)}:{link.line}: ({link.target})"
    path_part, _, anchor = link.target.partition("#")
    path_part = unquote(path_part.split("?", 1)[0])
    if path_part.startswith("/"):
        return f"{where} is absolute: a link inside the repository is relative to the page"
    target = (link.source.parent / path_part).resolve() if path_part else link.source
    try:
        target.relative_to(root)
    except ValueError:
        return f"{where} points outside the repository"
    if not target.exists():
        return f"{where}: {path_part} does not exist"
    if anchor and target.is_file() and target.suffix.lower() == ".md":
        if unquote(anchor) not in anchors(target.read_text(encoding="utf-8")):
            return f"{where}: {target.relative_to(root)} has no heading with the anchor #{anchor}"
    return None
