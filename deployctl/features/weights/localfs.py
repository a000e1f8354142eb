"""A checkpoint on this machine (`weights sync --from PATH`), read the way the nodes' scripts read theirs.

PATH is the operator's (its own links are followed, as for the inventory's weights_path); below it every part
of a name is looked at with lstat and opened with O_NOFOLLOW, one directory at a time, and the file must be a
regular one (fstat of what was opened): a link is reported as a ``link`` and never read, so a link to a file
outside the checkpoint (an SSH key, /etc/shadow) is never pushed to the nodes.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path

from deployctl.core.checkpoint.files import INDEX, MAX_INDEX_BYTES, IndexFile, parse_json, typed
from deployctl.io.executor import HostError
from deployctl.features.weights.listing import FileState, safe_name
from deployctl.features.weights.remote import WHY

CHUNK = 1 << 20
_RD = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_DIRS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class Refused(Exception):
    """A name deployctl will not read: ``why`` is a key of remote.WHY (link, notfile, missing, unreadable)."""

    def __init__(self, why: str):
        super().__init__(why)
        self.why = why


def _kind(st: os.stat_result, want_dir: bool = False) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise Refused("link")
    if not (stat.S_ISDIR(st.st_mode) if want_dir else stat.S_ISREG(st.st_mode)):
        raise Refused("notfile")


def _why(exc: OSError) -> str:
    return {errno.ENOENT: "missing", errno.ELOOP: "link", errno.ENOTDIR: "notfile",
            errno.EISDIR: "notfile"}.get(exc.errno, "unreadable")


def open_file(root: Path, name: str) -> int:
    """A read-only descriptor of the regular file ``root/name``; Refused (with why) for anything else."""
    parts = safe_name(name).split("/")
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise Refused(_why(exc)) from None
    try:
        for part in parts[:-1]:
            _kind(os.stat(part, dir_fd=fd, follow_symlinks=False), want_dir=True)
            sub = os.open(part, _DIRS, dir_fd=fd)
            os.close(fd)
            fd = sub
        _kind(os.stat(parts[-1], dir_fd=fd, follow_symlinks=False))
        f = os.open(parts[-1], _RD, dir_fd=fd)
    except OSError as exc:
        raise Refused(_why(exc)) from None
    finally:
        os.close(fd)
    if not stat.S_ISREG(os.fstat(f).st_mode):        # swapped after the lstat: O_NONBLOCK kept a FIFO from blocking
        os.close(f)
        raise Refused("notfile")
    return f


def sha256_of(fd: int, nbytes: int | None = None) -> str:
    """sha256 of the next ``nbytes`` of ``fd`` (all of it when None)."""
    h = hashlib.sha256()
    while nbytes is None or nbytes > 0:
        chunk = os.read(fd, CHUNK if nbytes is None else min(CHUNK, nbytes))
        if not chunk:
            break
        h.update(chunk)
        if nbytes is not None:
            nbytes -= len(chunk)
    return h.hexdigest()


def local_listing(directory: Path, names: list[str], hashes: bool) -> dict[str, FileState]:
    """What a node's listing says, for a directory here: ok (size, sha256), missing, notfile, unreadable, link."""
    out = {}
    for name in names:
        try:
            fd = open_file(directory, name)
        except Refused as exc:
            out[name] = FileState(exc.why)
            continue
        try:
            out[name] = FileState("ok", os.fstat(fd).st_size, sha256_of(fd) if hashes else None)
        except OSError:
            out[name] = FileState("unreadable")
        finally:
            os.close(fd)
    return out


def read_index(directory: Path, label: str) -> IndexFile:
    """The checkpoint's index, through the bounded reader; HostError (about ``label``) when it is not a file
    deployctl reads (a link, missing), DeployctlError when it is not an index."""
    try:
        fd = open_file(directory, INDEX)
    except Refused as exc:
        raise HostError(label, "source", f"{INDEX} is {WHY[exc.why]}",
                        "sync from a directory holding the checkpoint's own files (copy links with cp -L)") from None
    with os.fdopen(fd, "rb") as f:
        raw = f.read(MAX_INDEX_BYTES + 1)
    return typed(IndexFile, parse_json(raw, directory / INDEX, MAX_INDEX_BYTES), directory / INDEX)
