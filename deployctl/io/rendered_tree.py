"""Write a rendered tree atomically: build it next to the target, then swap directories.

The tree holds env files (secret values in clear: a host needs them) and is the operator's alone: it is
built with explicit private modes (never the process umask), its directories are 0700, each file keeps its artifact's mode (env 0600).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Callable

from deployctl import __version__
from deployctl.core.errors import UsageError
from deployctl.core.models.artifact import Artifact

MARKER = ".deployctl.json"
# the marker lists every file's digest: 3 MB for 8,192 servers (32,772 files), ~13 MB at the inventory's 16 MB
# limit (about 32,000 servers)
MARKER_BYTES = 64 << 20


def _is_ours(path: Path) -> bool:
    """The directory holds deployctl's marker: a regular file (no link, FIFO or device) of at most MARKER_BYTES."""
    from deployctl.io.localfile import read_bytes

    try:
        doc = json.loads(read_bytes(path / MARKER, MARKER_BYTES, what="render marker", hint=""))
        return isinstance(doc, dict) and doc.get("generator") == "deployctl"
    except (OSError, ValueError, RecursionError, UsageError):
        return False


def check_target(out: Path, force: bool, keep: tuple[Path, ...] = ()) -> None:
    """Refuse to replace a directory deployctl did not write (unless --force), and never one that is
    the current directory, home, /, or holds a file in ``keep`` (the inventory)."""
    resolved = out.resolve()
    precious = {Path.cwd().resolve(), Path.home().resolve(), Path("/")}
    if resolved in precious or any(resolved in k.resolve().parents for k in keep):
        raise UsageError(f"refusing to replace {out}: it is the current, home or root directory, or it "
                         "holds the inventory", hint="render into a directory of its own, e.g. -o rendered/")
    if out.exists() and not out.is_dir():
        raise UsageError(f"{out} exists and is not a directory", hint="pass -o with a directory path")
    if out.is_dir() and any(out.iterdir()) and not _is_ours(out) and not force:
        raise UsageError(f"{out} is not empty and was not written by deployctl",
                         hint=f"choose another -o directory, or pass --force to replace {out}")


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE); False where unsupported."""
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd, rename_exchange = -100, 2
    return renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def write_tree(out: Path, artifacts: list[Artifact], force: bool = False,
               keep: tuple[Path, ...] = (), ready: Callable[[], object] | None = None) -> None:
    """Write all artifacts under ``out``; readers see the old tree or the new one, never half of each.
    ``ready()``, when given, is asked once the files are written and before they are put in place: what it
    raises leaves ``out`` as it was."""
    check_target(out, force, keep)
    out = out.absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    _write_tree(out, artifacts, ready)


def _private_dirs(top: Path, target: Path, made: set) -> None:
    """Create target and its parents below top with mode 0700 (explicit modes: the process umask is shared by
    every thread and every child process, so a library never changes it)."""
    missing = []
    d = target
    while d != top and d not in made and not d.exists():
        missing.append(d)
        d = d.parent
    for d in reversed(missing):
        os.mkdir(d, 0o700)
        os.chmod(d, 0o700)
    made.add(target)


def _write_files(top: Path, artifacts: list[Artifact]) -> None:
    """Create each file in its folder (made already, private), O_EXCL and without following a link."""
    folder, dir_fd = None, -1                    # the folder being written (artifacts come sorted: one at a time)
    try:
        for art in artifacts:
            parent, _, name = art.path.rpartition("/")
            if parent != folder:                 # one open per node folder, not per file
                if dir_fd >= 0:
                    os.close(dir_fd)
                    dir_fd = -1
                dir_fd = os.open(top / parent if parent else top, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
                folder = parent
            # a new private directory: O_EXCL, no link to follow; private until its own mode
            fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=dir_fd)
            try:
                content = art.content
                done = os.write(fd, content)
                if done < len(content):
                    view = memoryview(content)[done:]
                    while view:
                        view = view[os.write(fd, view):]
                os.fchmod(fd, art.mode)
            finally:
                os.close(fd)
    finally:
        if dir_fd >= 0:
            os.close(dir_fd)


def _write_split(top: Path, artifacts: list[Artifact], meanwhile: Callable[[], None]) -> None:
    """``_write_files``, then ``meanwhile()``; a large tree's second half of folders is written by a forked child
    at the same time (_two_ways)."""
    def folder(i: int) -> str:
        return artifacts[i].path.rpartition("/")[0]

    cut = len(artifacts) // 2
    while 0 < cut < len(artifacts) and folder(cut) == folder(cut - 1):
        cut += 1                                 # a folder is written by one process

    def first() -> None:
        _write_files(top, artifacts[:cut])
        meanwhile()

    _two_ways(first, lambda: _write_files(top, artifacts[cut:]), len(artifacts) >= SPLIT_FILES)


def _remove_tree(path: Path) -> None:
    """shutil.rmtree(path, ignore_errors=True); a large tree's second half of entries by a forked child at the
    same time (the previous render of 8,192 servers: 40,000 files and folders)."""
    try:
        names = sorted(os.listdir(path))
    except OSError:
        names = []
    cut = len(names) // 2

    def remove(part: list[str]) -> None:
        for name in part:
            entry = path / name
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)

    _two_ways(lambda: remove(names[:cut]), lambda: remove(names[cut:]), len(names) >= SPLIT_FILES // 16)
    shutil.rmtree(path, ignore_errors=True)


def _two_ways(here: Callable[[], None], there: Callable[[], None], worth: bool) -> None:
    """``there()`` in a forked child while ``here()`` runs in this process, when ``worth`` it (io/forked.py: also
    where a fork is not safe, they run one after the other here). The child's exception is raised here; an
    interrupt here stops the child before it returns."""
    from deployctl.io.forked import Forked

    with Forked(there, fork=worth) as child:
        here()
        child.result()


# A tree of this many files or more is written by two processes (a fork writes the second half of the folders):
# an 8,192-server render is 32,772 files and 0.5 GB, and the kernel's copying and file creation are most of it
SPLIT_FILES = 4096


def _write_tree(out: Path, artifacts: list[Artifact], ready: Callable[[], object] | None = None) -> None:
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        made: set[Path] = set()
        for folder in dict.fromkeys(a.path.rpartition("/")[0] for a in artifacts):
            if folder and tmp / folder not in made:
                _private_dirs(tmp, tmp / folder, made)
        digests: dict[str, str] = {}

        def digest() -> None:
            hashed: dict[int, str] = {}          # the nodes of an instance share their files' bytes: hashed once
            for art in artifacts:
                if id(art.content) not in hashed:
                    hashed[id(art.content)] = hashlib.sha256(art.content).hexdigest()
                digests[art.path] = hashed[id(art.content)]

        _write_split(tmp, artifacts, digest)
        marker = {"generator": "deployctl", "version": __version__, "files": digests}
        (tmp / MARKER).write_text(json.dumps(marker, indent=2, sort_keys=True) + "\n")
        os.chmod(tmp, 0o700)
        if ready is not None:
            ready()
        if not out.exists():
            os.rename(tmp, out)
        elif _exchange(tmp, out):   # the new tree is in place; tmp now holds the old one
            _remove_tree(tmp)
        else:                       # no renameat2: two renames, a moment without the directory
            old = out.parent / f".{out.name}.old-{os.getpid()}"
            os.rename(out, old)
            os.rename(tmp, out)
            _remove_tree(old)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
