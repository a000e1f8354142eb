"""The weights' file list and what a host says about it, parsed at one boundary.

Names come from the checkpoint's index (untrusted) and the directory from the inventory: both are validated
against plain patterns before they reach a command (``safe_name``, ``safe_dir``) and are passed to a fixed
script as positional arguments, shell-quoted (``listing_argv``), never spliced into its text. The host
answers one line per file, keyed by the file's position in the list (never by a name the host prints), and
``parse_listing`` turns that into typed ``FileState`` values: anything else is a ValueError about the host.

Links: the directory is the inventory's (its own links are the operator's and are followed); below it no
symbolic link is followed, on any node and by any of deployctl's scripts (``PRELUDE``): every part of a name is
looked at with lstat and opened with O_NOFOLLOW, one directory at a time, so a link swapped in between is
refused by the open itself. A link is reported as such (``link``), never read through.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from deployctl.core.checkpoint.files import CONFIG, INDEX

# one path component: starts with a letter, digit or '_' (so never '.' or '..'), then plain characters
_PART = r"[A-Za-z0-9_][A-Za-z0-9_.+=-]{0,199}"
NAME = re.compile(rf"^{_PART}(/{_PART}){{0,7}}$")
DIR = re.compile(r"^(/[A-Za-z0-9_.+=@-]{1,255}){1,32}/?$")
MAX_FILES = 100_000           # DeepSeek-V3 has 163 shards; a checkpoint of 100k files is not one
MAX_NAME = 512
LINE_BYTES = 120              # "<i> ok <size> <sha256>" is at most ~95 bytes
HASH_WIDTH = 4                # files hashed at once per host (sha256 is CPU-bound: one core each)

# Shared by every script deployctl runs on a node against the weights (python3, which Ansible needs anyway):
# below(d, name) opens the directory holding name's last part, one part at a time without following a link
# (lstat says which part is a link; O_NOFOLLOW refuses one swapped in after it); regular(fd, last) opens that
# last part the same way, O_NONBLOCK (a FIFO swapped in cannot block) and checks with fstat that it is a file.
PRELUDE = r"""import errno, hashlib, os, stat, sys
RD = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
DIRS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
CHUNK = 1 << 20

class Refused(Exception):
    pass

def why(e):
    if isinstance(e, Refused):
        return e.args[0]
    return {errno.ENOENT: "missing", errno.ELOOP: "link", errno.ENOTDIR: "notfile",
            errno.EISDIR: "notfile", errno.EEXIST: "changed"}.get(e.errno, "unreadable")

def kind(st):
    if stat.S_ISLNK(st.st_mode):
        return "link"
    return None if stat.S_ISREG(st.st_mode) else "notfile"

def below(d, name, make=False):
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    parts = name.split("/")
    try:
        for p in parts[:-1]:
            if make:
                try:
                    os.mkdir(p, 0o750, dir_fd=fd)
                except FileExistsError:
                    pass
            st = os.stat(p, dir_fd=fd, follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode) or not stat.S_ISDIR(st.st_mode):
                raise Refused("link" if stat.S_ISLNK(st.st_mode) else "notfile")
            sub = os.open(p, DIRS, dir_fd=fd)
            os.close(fd)
            fd = sub
    except BaseException:
        os.close(fd)
        raise
    return fd, parts[-1]

def regular(fd, last, flags=RD):
    k = kind(os.stat(last, dir_fd=fd, follow_symlinks=False))
    if k:
        raise Refused(k)
    f = os.open(last, flags, dir_fd=fd)
    if not stat.S_ISREG(os.fstat(f).st_mode):
        os.close(f)
        raise Refused("notfile")
    return f

def open_below(d, name):
    fd, last = below(d, name)
    try:
        return regular(fd, last)
    finally:
        os.close(fd)

def sha(f, n=None):
    h = hashlib.sha256()
    while n is None or n > 0:
        b = os.read(f, CHUNK if n is None else min(CHUNK, n))
        if not b:
            break
        h.update(b)
        if n is not None:
            n -= len(b)
    return h.hexdigest(), n
"""

# argv[1] the label, then the directory, 1 to hash, the width, the file names. One line per file, keyed by
# its position: <i> ok <bytes> [<sha256>]   <i> missing|notfile|unreadable|link   then "end <count>".
# Files hashed at once (``width`` threads: sha256 releases the GIL) answer in the list's order.
SCRIPT = PRELUDE + r"""
def one(i, name):
    try:
        f = open_below(d, name)
        try:
            size = os.fstat(f).st_size
            return "%d ok %d %s" % (i, size, sha(f)[0]) if h else "%d ok %d" % (i, size)
        finally:
            os.close(f)
    except (OSError, Refused) as e:
        return "%d %s" % (i, why(e))

d, h, w, names = sys.argv[2], sys.argv[3] == "1", int(sys.argv[4]), sys.argv[5:]
if h and len(names) > 1:
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(max(1, w)) as pool:
        for line in pool.map(one, range(len(names)), names):
            sys.stdout.write(line + "\n")
else:
    for i, name in enumerate(names):
        sys.stdout.write(one(i, name) + "\n")
sys.stdout.write("end %d\n" % len(names))
"""

_LINE = re.compile(r"^(\d{1,6}) (?:(missing|notfile|unreadable|link)|ok (\d{1,16}|-)(?: ([0-9a-f]{64}|-))?)$")


@dataclass(frozen=True)
class FileState:
    """One file on one host: its size (None unless ``state`` is "ok") and sha256 (when hashed)."""

    state: str                   # ok | missing | notfile | unreadable | link
    size: int | None = None
    sha256: str | None = None

    def describe(self) -> str:
        if self.state != "ok":
            return {"missing": "missing", "notfile": "not a regular file", "unreadable": "unreadable",
                    "link": "a symbolic link (not followed)"}[self.state]
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
    return ["python3", "-c", SCRIPT, "deployctl-weights", safe_dir(directory), "1" if hashes else "0",
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
