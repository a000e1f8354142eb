"""Copy one file to one node through this machine, without following a link on either side (`weights sync`).

The source file is opened without following a link and must still be the regular file of the size it was listed
with (remote.SOURCE, or localfs here); the bytes go into ``<name>.deployctl-part`` on the node, created by
deployctl alone (O_CREAT|O_EXCL|O_NOFOLLOW, mode 600); the node checks that part file again before each write
and before it renames it over the file, with the source's mode (masked by the node's umask: a copy is never
readable by more users than its source).

Resuming: a part file found on the node is used only when it is deployctl's (a regular file of the SSH user,
mode 600, one link, not longer than the source's file) and its bytes are the source's first bytes (sha256 on
both sides); any other is removed or started again, and the sync says so. A copy deployctl gives up on (the
source changed or is refused, a write fails, the node answers nonsense) removes its part file; one cut off by
the connection (``Interrupted``) leaves it for the next run to verify and continue.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from deployctl.io.executor import HostError, HostTarget, join_argv
from deployctl.core.textsafe import clean
from deployctl.features.weights.listing import FileState, safe_dir, safe_name
from deployctl.features.weights.localfs import Refused, open_file, sha256_of
from deployctl.features.weights.remote import (ANSWER_BYTES, PART, WHY, dest_argv, parse_append, parse_finish, parse_part,
                                      parse_sha, parse_source_head, parse_space, source_argv)

CHUNK = 1 << 20
HASH_RATE = 20 << 20           # bytes a second a node reads and hashes at least (a part file's first bytes)
SPARE = 64 << 20               # free space a sync leaves on a node's file system beyond the copies
Progress = Callable[[str, int], None]       # (node, bytes written since the last call)


@dataclass(frozen=True)
class Source:
    """Where the files come from: a node (``target``) or a directory on this machine (``local``)."""

    label: str
    directory: str
    target: HostTarget | None = None
    local: Path | None = None


class Interrupted(HostError):
    """The connection stopped a copy: the part file stays on the node, and the next sync verifies it."""


def room(executor, dest: HostTarget, directory: str, files: list[tuple[str, int]], held: dict[str, FileState],
         timeout: float) -> str | None:
    """None when ``dest`` has the room for ``files`` copied one after another (a replaced file's bytes come
    back after its copy); else what to tell the user. Asked before a byte moves to the node."""
    r = executor.run(dest, dest_argv("space", directory), timeout)
    try:
        free = parse_space(r.stdout)
    except ValueError as exc:
        return clean(f"cannot tell the free space of {directory}: exit {r.rc}, {exc}", multiline=False)
    used = peak = 0
    for name, size in files:
        used += size
        peak = max(peak, used)
        old = held.get(name)
        used -= old.size if old is not None and old.state == "ok" and old.size else 0
    if peak + SPARE <= free:
        return None
    return (f"{directory}: {free:,} bytes free, the copies need {peak:,} bytes and deployctl leaves "
            f"{SPARE >> 20} MB to spare: nothing copied to this node")


def copy_file(executor, source: Source, dest: HostTarget, directory: str, name: str, size: int,
              timeout: float, progress: Progress, note: Callable[[str], None] = lambda _t: None) -> int:
    """Copy one file to ``dest`` through this machine; the byte it resumed from. HostError when it fails;
    ``note`` hears about a part file found on the node and not used."""
    part = f"{safe_dir(directory)}/{safe_name(name)}{PART}"
    r = executor.run(dest, dest_argv("part", directory, name, size), timeout)
    try:
        have, removed = parse_part(r.stdout)
    except ValueError as exc:
        raise HostError(dest.name, "copy", clean(f"cannot prepare {part}: exit {r.rc}, it or a directory on the "
                                                 f"way is {exc}", multiline=False)[:300],
                        "remove it by hand, then sync again") from None
    if removed:
        note(f"{part}: {WHY[removed]}: removed, copied from the first byte")
    mode = None
    try:
        if have:
            mode, have = _verify_part(executor, source, dest, directory, name, size, have, timeout, note)
        progress(dest.name, have)
        if have < size or mode is None:
            mode = _relay(executor, source, dest, directory, name, have, size, timeout, progress)
        r = executor.run(dest, dest_argv("finish", directory, name, size, f"{mode:o}"), timeout)
        try:
            problem = parse_finish(r.stdout)
        except ValueError as exc:
            problem = str(exc)
        if problem:
            raise HostError(dest.name, "copy", clean(f"{part} not moved into place after the copy: {problem}",
                                                     multiline=False)[:300], "sync again")
    except Interrupted:
        raise
    except Exception:
        try:
            executor.run(dest, dest_argv("drop", directory, name), timeout)
        except Exception:       # noqa: BLE001 - the copy's own error is the one to report
            pass
        raise
    return have


def _verify_part(executor, source: Source, dest: HostTarget, directory: str, name: str, size: int, have: int,
                 timeout: float, note: Callable[[str], None]) -> tuple[int, int]:
    """(the source's mode, the byte to resume from): ``have`` when the part file's first bytes are the
    source's, else 0."""
    limit = timeout + have / HASH_RATE
    mode, theirs = _source_sha(executor, source, directory, name, size, have, limit)
    r = executor.run(dest, dest_argv("partsha", directory, name, have), limit)
    try:
        ours = parse_sha(r.stdout)
        why = f"its first {have:,} bytes are not the source's"
    except ValueError as exc:
        ours, why = None, str(exc)
    if ours == theirs:
        return mode, have
    note(clean(f"{safe_dir(directory)}/{name}{PART}: {why}: copied from the first byte", multiline=False)[:300])
    return mode, 0


def _source_sha(executor, source: Source, directory: str, name: str, size: int, nbytes: int,
                timeout: float) -> tuple[int, str]:
    """(mode, sha256 of the first ``nbytes``) of the source's file, still the regular file of ``size`` bytes."""
    if source.local is not None:
        fd = _local(source, name, size)
        try:
            return os.fstat(fd).st_mode & 0o7777, sha256_of(fd, nbytes)
        finally:
            os.close(fd)
    r = executor.run(source.target, source_argv("sha", directory, name, size, nbytes), timeout)
    head, _, rest = r.stdout.partition("\n")
    try:
        return parse_source_head(head), parse_sha(rest)
    except ValueError as exc:
        raise _refused(source, name, exc) from None


def _refused(source: Source, name: str, why) -> HostError:
    return HostError(source.label, "copy", clean(f"the source {source.label}: {name} is {why}: not copied",
                                                 multiline=False)[:300], "check the source, then sync again")


def _local(source: Source, name: str, size: int) -> int:
    try:
        fd = open_file(source.local, name)
    except Refused as exc:
        raise _refused(source, name, WHY[exc.why]) from None
    if os.fstat(fd).st_size != size:
        os.close(fd)
        raise _refused(source, name, "no longer the size it was listed with (it changed)")
    return fd


def _relay(executor, source: Source, dest: HostTarget, directory: str, name: str, offset: int, size: int,
           timeout: float, progress: Progress) -> int:
    """Stream bytes [offset, size) of the source's file onto the end of the part file on ``dest``; the
    source file's mode."""
    part = f"{safe_dir(directory)}/{name}{PART}"
    try:
        mode, read, close = _open_source(executor, source, directory, name, size, offset, timeout)
        try:
            out = executor.client(dest).get_transport().open_session(timeout=timeout)
            try:
                out.settimeout(timeout)
                out.exec_command(join_argv(dest_argv("append", directory, name, offset, size)))
                first = _answer(out, first_line=True)
                if first != "ready":
                    why = parse_append(first, size - offset) if first.startswith("no ") else repr(first[:80])
                    raise HostError(dest.name, "copy", clean(f"cannot write {part}: {why}", multiline=False)[:300],
                                    "remove it by hand, then sync again")
                left = size - offset
                while left > 0:
                    chunk = read(min(CHUNK, left))
                    if not chunk:
                        raise _refused(source, name, f"{left:,} bytes short of its listed size ({size:,}) at the end "
                                       "(it changed while copying)")
                    out.sendall(chunk)
                    left -= len(chunk)
                    progress(dest.name, len(chunk))
                out.shutdown_write()
                answer = _answer(out)
                problem = parse_append(answer, size - offset)
            finally:
                out.close()
        finally:
            close()
    except ValueError as exc:           # the node's answer is not one of parse_append's
        raise HostError(dest.name, "copy", clean(f"writing {part}: {exc}", multiline=False)[:300]) from None
    except (OSError, EOFError) as exc:       # socket.timeout is an OSError
        raise Interrupted(dest.name, "copy", clean(f"copying {name} stopped: {type(exc).__name__}: {exc}",
                                                   multiline=False)[:300], "run the sync again: it resumes") from None
    if problem:
        raise HostError(dest.name, "copy", clean(f"writing {part} failed: {problem}", multiline=False)[:300],
                        "check free space on the node (df -h)")
    return mode


def _answer(chan, first_line: bool = False) -> str:
    """What the node printed (up to ANSWER_BYTES), or its first line; a longer answer is cut there."""
    buf = b""
    while len(buf) <= ANSWER_BYTES and not (first_line and b"\n" in buf):
        got = chan.recv(ANSWER_BYTES + 1 - len(buf))
        if not got:
            break
        buf += got
    text = buf.decode(errors="replace")
    return text.split("\n", 1)[0].strip() if first_line else text


def _open_source(executor, source: Source, directory: str, name: str, size: int, offset: int, timeout: float):
    """(mode, read(n), close) of the source's file from ``offset``; HostError when it is refused."""
    if source.local is not None:
        fd = _local(source, name, size)
        os.lseek(fd, offset, os.SEEK_SET)
        return os.fstat(fd).st_mode & 0o7777, lambda n: os.read(fd, n), lambda: os.close(fd)
    chan = executor.client(source.target).get_transport().open_session(timeout=timeout)
    chan.settimeout(timeout)
    chan.exec_command(join_argv(source_argv("read", directory, name, size, offset)))
    head = b""
    while b"\n" not in head and len(head) <= ANSWER_BYTES:
        got = chan.recv(CHUNK)
        if not got:
            break
        head += got
    line, _, pending = head.partition(b"\n")
    try:
        mode = parse_source_head(line.decode(errors="replace"))
    except ValueError as exc:
        chan.close()
        raise _refused(source, name, exc) from None
    held = [pending]

    def read(n: int) -> bytes:
        if held[0]:
            data, held[0] = held[0][:n], held[0][n:]
            return data
        data = b""
        while len(data) < n:
            got = chan.recv(n - len(data))
            if not got:
                break
            data += got
        return data
    return mode, read, chan.close
