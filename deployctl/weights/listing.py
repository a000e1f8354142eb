"""The weights' file list and what a host says about it, parsed at one boundary.

Names come from the checkpoint's index (untrusted) and the directory from the inventory: both are validated
against plain patterns before they reach a command (``safe_name``, ``safe_dir``) and are passed to a fixed
script as positional arguments, shell-quoted (``listing_argv``), never spliced into its text. The host
answers one line per file, keyed by the file's position in the list (never by a name the host prints), and
``parse_listing`` turns that into typed ``FileState`` values: anything else is a ValueError about the host.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from deployctl.checkpoint.read import CONFIG, INDEX

# one path component: starts with a letter, digit or '_' (so never '.' or '..'), then plain characters
_PART = r"[A-Za-z0-9_][A-Za-z0-9_.+=-]{0,199}"
NAME = re.compile(rf"^{_PART}(/{_PART}){{0,7}}$")
DIR = re.compile(r"^(/[A-Za-z0-9_.+=@-]{1,255}){1,32}/?$")
MAX_FILES = 100_000           # DeepSeek-V3 has 163 shards; a checkpoint of 100k files is not one
MAX_NAME = 512
LINE_BYTES = 120              # "<i> ok <size> <sha256>" is at most ~95 bytes
HASH_WIDTH = 4                # files hashed at once per host (sha256 is CPU-bound: one core each)

# $1 directory, $2 1 to hash, $3 width, then the file names. One line per file, keyed by its position:
#   <i> ok <bytes> [<sha256>|-]   <i> missing   <i> notfile   <i> unreadable
# then "end <count>". Lines of files hashed at once may come in any order (each is one write, atomic).
SCRIPT = r"""d="$1"; h="$2"; w="$3"; shift 3
one() {
  if [ ! -e "$2" ]; then echo "$1 missing"
  elif [ ! -f "$2" ]; then echo "$1 notfile"
  elif [ ! -r "$2" ]; then echo "$1 unreadable"
  else
    s=$(wc -c < "$2" 2>/dev/null | tr -d ' ')
    if [ "$h" = 1 ]; then
      x=$(sha256sum < "$2" 2>/dev/null | cut -c1-64); echo "$1 ok ${s:--} ${x:--}"
    else echo "$1 ok ${s:--}"; fi
  fi
}
i=0; n=0
for f in "$@"; do
  if [ "$h" = 1 ]; then one "$i" "$d/$f" & n=$((n + 1)); if [ "$n" -ge "$w" ]; then wait; n=0; fi
  else one "$i" "$d/$f"; fi
  i=$((i + 1))
done
wait
echo "end $i"
"""

_LINE = re.compile(r"^(\d{1,6}) (?:(missing|notfile|unreadable)|ok (\d{1,16}|-)(?: ([0-9a-f]{64}|-))?)$")


@dataclass(frozen=True)
class FileState:
    """One file on one host: its size (None unless ``state`` is "ok") and sha256 (when hashed)."""

    state: str                   # ok | missing | notfile | unreadable
    size: int | None = None
    sha256: str | None = None

    def describe(self) -> str:
        if self.state != "ok":
            return {"missing": "missing", "notfile": "not a regular file", "unreadable": "unreadable"}[self.state]
        return f"{self.size:,} bytes" + (f", sha256 {self.sha256[:12]}…" if self.sha256 else "")


def safe_name(name: object) -> str:
    """A file name from the index, or ValueError: relative, no '..', no control characters, plain."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"{str(name)[:80]!r} is not a file name")
    if len(name) > MAX_NAME or not NAME.match(name):
        shown = name[:80].encode("unicode_escape").decode()
        raise ValueError(f"'{shown}' is not a plain relative file name (letters, digits, '_', '.', '-', '+', '=', "
                         "'/' between parts; no '..', no absolute path, no control characters)")
    return name


def safe_dir(path: str) -> str:
    """model.weights_path, or ValueError: absolute, no '..' part, plain characters."""
    p = path.rstrip("/") or "/"
    if not DIR.match(path) or any(part in (".", "..") for part in p.split("/")):
        raise ValueError(f"weights_path '{path[:120].encode('unicode_escape').decode()}' is not a plain "
                         "absolute directory (no '..', spaces or control characters)")
    return p


def files_of(weight_map: dict[str, str]) -> list[str]:
    """The files to check: config.json, the index, then every shard the index names (sorted, once each).

    Raises ValueError naming the first unsafe name (the caller says which host's index it came from)."""
    shards = sorted({safe_name(v) for v in weight_map.values()})
    names = [CONFIG, INDEX] + [s for s in shards if s not in (CONFIG, INDEX)]
    if len(names) > MAX_FILES:
        raise ValueError(f"the index names {len(names):,} files, more than the {MAX_FILES:,} a checkpoint may")
    return names


def listing_argv(directory: str, names: list[str], hashes: bool) -> list[str]:
    """The one command per host (run through the executor, which shell-quotes every argument)."""
    return ["sh", "-c", SCRIPT, "deployctl-weights", safe_dir(directory), "1" if hashes else "0",
            str(HASH_WIDTH), *[safe_name(n) for n in names]]


def parse_listing(text: str, names: list[str], hashes: bool) -> dict[str, FileState]:
    """The host's answer for ``names`` (in their order), or ValueError saying what is wrong with it.

    Bounded: at most LINE_BYTES per file is looked at; every file must be answered exactly once, then
    ``end <count>``; a line of any other shape, an index out of range or a missing hash refuses the answer.
    """
    limit = LINE_BYTES * (len(names) + 1)
    if len(text) > limit:
        raise ValueError(f"printed {len(text):,} characters for {len(names)} files (at most {limit:,} expected)")
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if not lines or lines[-1] != f"end {len(names)}":
        raise ValueError(f"the listing was cut short or garbled (last line {_show(lines[-1] if lines else '')}, "
                         f"expected 'end {len(names)}')")
    out: dict[int, FileState] = {}
    for line in lines[:-1]:
        m = _LINE.match(line)
        if m is None:
            raise ValueError(f"unexpected line {_show(line)} in the listing")
        i = int(m.group(1))
        if i >= len(names) or i in out:
            raise ValueError(f"line {_show(line)} names file #{i}, "
                             + ("answered twice" if i in out else f"but only {len(names)} were asked"))
        out[i] = _state(m, hashes)
    if len(out) != len(names):
        gone = next(i for i in range(len(names)) if i not in out)
        raise ValueError(f"no answer for {names[gone]} (#{gone}): the listing was cut short")
    return {names[i]: out[i] for i in range(len(names))}


def _state(m: re.Match, hashes: bool) -> FileState:
    if m.group(2):
        return FileState(m.group(2))
    size, digest = m.group(3), m.group(4)
    if size == "-" or (hashes and digest in (None, "-")):
        return FileState("unreadable")       # wc or sha256sum read nothing: an I/O error on the host
    if not hashes and digest is not None:
        raise ValueError("a hash came back where none was asked for")
    return FileState("ok", int(size), digest if hashes else None)


def _show(line: str) -> str:
    return repr(line[:80])
