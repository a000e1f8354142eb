"""`weights sync`: copy the checkpoint files a node lacks or holds differently from a source, then check again.

The controller relays: it reads each file from the source (a node over SSH, or a directory on this machine)
and writes it to every node that needs it over that node's SSH connection. deployctl holds the keys and the
verified host keys; the nodes may have no keys for each other, or no route between them on the management
network, so the source never pushes. rsync is not used: it cannot copy between two remote hosts through a
third, and the simulated (and many minimal) hosts lack it. Resuming: a file is written to
``<name>.deployctl-part`` and appended to from its current size on the next run; it replaces the file only when
its size is the source's (then the re-check compares sizes, or sha256 with --hash).
"""

from __future__ import annotations

import hashlib
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from deployctl.executors.base import FAN_OUT, HostError, HostTarget, join_argv
from deployctl.textsafe import clean
from deployctl.weights.check import CheckResult, Difference, check_weights, compare, fetch_index
from deployctl.weights.listing import FileState, files_of, safe_dir, safe_name

CHUNK = 1 << 20
PART = ".deployctl-part"
COPY_KINDS = ("missing", "size", "hash", "unreadable")
_COUNT = re.compile(r"^\s*(\d{1,16})\s*$")
Progress = Callable[[str, int], None]       # (node, bytes written since the last call)

_PART_SIZE = ('mkdir -p -- "$(dirname -- "$1")" || exit 3; '
              'if [ -f "$1" ]; then wc -c < "$1"; else rm -rf -- "$1"; echo 0; fi')
_FINISH = ('s=$(wc -c < "$1" | tr -d " ") && [ "$s" = "$3" ] && mv -f -- "$1" "$2" && echo moved '
           '|| echo "size $s"')


@dataclass(frozen=True)
class Source:
    """Where the files come from: a node (``target``) or a directory on this machine (``local``)."""

    label: str
    directory: str
    target: HostTarget | None = None
    local: Path | None = None


@dataclass
class SyncResult:
    source: str
    copies: list[tuple[str, str, int]]                  # (node, file, bytes) planned
    failed: list[Difference] = field(default_factory=list)
    resumed: list[tuple[str, str, int]] = field(default_factory=list)    # (node, file, from byte)
    skipped: list[Difference] = field(default_factory=list)
    before: CheckResult | None = None
    after: CheckResult | None = None

    @property
    def ok(self) -> bool:
        return not self.failed and self.after is not None and self.after.ok


def local_listing(directory: Path, names: list[str], hashes: bool) -> dict[str, FileState]:
    out = {}
    for name in names:
        p = directory / safe_name(name)
        if not p.exists():
            out[name] = FileState("missing")
        elif not p.is_file():
            out[name] = FileState("notfile")
        else:
            try:
                digest = _sha256(p) if hashes else None
                out[name] = FileState("ok", p.stat().st_size, digest)
            except OSError:
                out[name] = FileState("unreadable")
    return out


def _sha256(p: Path) -> str:
    h = hashlib.sha256()
    with p.open("rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
    return h.hexdigest()


def source_files(executor, source: Source, timeout: float) -> list[str]:
    """The file list from the source's own index (bounded reader); HostError/DeployctlError when unreadable."""
    if source.local is not None:
        from deployctl.checkpoint.read import INDEX, MAX_INDEX_BYTES, IndexFile, read_json, typed

        index = typed(IndexFile, read_json(source.local / INDEX, MAX_INDEX_BYTES), source.local / INDEX)
    else:
        index = fetch_index(executor, source.target, source.directory, timeout)
    return files_of(index.weight_map)


def plan(source: Source, ref: dict[str, FileState], dests: CheckResult) -> tuple[list, list[Difference]]:
    """(copies as (node, file, bytes), differences that copying cannot fix) against the source's listing."""
    _, diffs = compare({source.label: ref, **dests.listings}, dests.files, reference=source.label)
    copies, skipped = [], [d for d in dests.differences if d.kind in ("host", "index") and d.file == ""]
    for d in diffs:
        if d.node == source.label:
            continue
        if d.kind in COPY_KINDS:
            copies.append((d.node, d.file, ref[d.file].size))
        else:
            skipped.append(Difference(d.node, d.file, d.kind, d.have, "remove it by hand, then sync again"))
    return copies, skipped


def copy_file(executor, source: Source, dest: HostTarget, directory: str, name: str, size: int,
              timeout: float, progress: Progress) -> int:
    """Copy one file to ``dest`` through this machine, resuming a part file; the byte it resumed from.
    HostError when it fails."""
    final = f"{safe_dir(directory)}/{safe_name(name)}"
    part = final + PART
    r = executor.run(dest, ["sh", "-c", _PART_SIZE, "deployctl-part", part], timeout)
    m = _COUNT.match(r.stdout) if r.rc == 0 else None
    if m is None:
        raise HostError(dest.name, "copy", clean(f"cannot prepare {part}: exit {r.rc} "
                                                 f"{(r.stdout + r.stderr).strip()[:120]}", multiline=False))
    have = int(m.group(1))
    if have > size:
        executor.run(dest, ["rm", "-f", "--", part], timeout)
        have = 0
    progress(dest.name, have)
    if have < size:
        _relay(executor, source, dest, f"{source.directory}/{name}", part, have, size, timeout, progress)
    r = executor.run(dest, ["sh", "-c", _FINISH, "deployctl-finish", part, final, str(size)], timeout)
    if r.stdout.strip() != "moved":
        raise HostError(dest.name, "copy", clean(f"{part} is not {size:,} bytes after the copy "
                                                 f"({r.stdout.strip()[:60]}): not moved into place",
                                                 multiline=False))
    return have


def _relay(executor, source: Source, dest: HostTarget, src_path: str, part: str, offset: int, size: int,
           timeout: float, progress: Progress) -> None:
    """Stream bytes [offset, size) of the source file onto the end of ``part`` on ``dest``."""
    out = executor.client(dest).get_transport().open_session(timeout=timeout)
    out.settimeout(timeout)
    out.exec_command(join_argv(["sh", "-c", 'cat >> "$1"', "deployctl-append", part]))
    reader, closer = _reader(executor, source, src_path, offset, timeout)
    left = size - offset
    try:
        while left > 0:
            chunk = reader(min(CHUNK, left))
            if not chunk:
                raise HostError(source.label, "copy", f"{src_path} ended {left:,} bytes before its listed size "
                                f"({size:,}): it changed while copying", "run the sync again")
            out.sendall(chunk)
            left -= len(chunk)
            progress(dest.name, len(chunk))
        out.shutdown_write()
        rc = out.recv_exit_status()
        if rc != 0:
            err = out.recv_stderr(4096).decode(errors="replace") if out.recv_stderr_ready() else ""
            raise HostError(dest.name, "copy", clean(f"writing {part} failed (exit {rc}) {err[:160]}",
                                                     multiline=False), "check free space on the node (df -h)")
    except (OSError, EOFError) as exc:       # socket.timeout is an OSError
        raise HostError(dest.name, "copy", clean(f"copying {src_path} stopped: {exc or type(exc).__name__}",
                                                 multiline=False), "run the sync again: it resumes") from None
    finally:
        out.close()
        closer()


def _reader(executor, source: Source, path: str, offset: int, timeout: float):
    if source.local is not None:
        f = open(source.local / Path(path).relative_to(source.directory), "rb")    # noqa: SIM115 - closed by closer
        f.seek(offset)
        return f.read, f.close
    chan = executor.client(source.target).get_transport().open_session(timeout=timeout)
    chan.settimeout(timeout)
    chan.exec_command(join_argv(["tail", "-c", f"+{offset + 1}", "--", path]))

    def read(n: int) -> bytes:
        data = b""
        while len(data) < n:
            got = chan.recv(n - len(data))
            if not got:
                break
            data += got
        return data
    return read, chan.close


def sync_weights(executor, source: Source, dests: list[HostTarget], directory: str, *, hashes: bool = False,
                 timeout: float = 60.0, workers: int = FAN_OUT, progress: Progress | None = None,
                 on_plan: Callable[[list], None] | None = None) -> SyncResult:
    """Check, copy what differs from the source to each node in parallel (one relay per node), check again."""
    names = source_files(executor, source, timeout)
    targets = dests + ([source.target] if source.target is not None else [])
    before = check_weights(executor, targets, directory, hashes=hashes, timeout=timeout, workers=workers,
                           names=names)
    if source.local is not None:
        ref = local_listing(source.local, names, hashes)
    else:
        ref = before.listings.pop(source.label, None)
        if ref is None:
            raise HostError(source.label, "source", "the source node could not be listed",
                            "; ".join(d.have for d in before.differences if d.node == source.label)[:300])
    lacking = [n for n in names if ref[n].state != "ok"]
    if lacking:
        raise HostError(source.label, "source", f"the source lacks {len(lacking)} of the checkpoint's files "
                        f"(first: {lacking[0]}, {ref[lacking[0]].describe()})", "sync from a complete copy")
    copies, skipped = plan(source, ref, before)
    result = SyncResult(source.label, copies, skipped=skipped, before=before)
    if on_plan:
        on_plan(copies)
    by_node: dict[str, list[tuple[str, int]]] = {}
    for node, name, size in copies:
        by_node.setdefault(node, []).append((name, size))
    targets_by = {t.name: t for t in dests}

    def one(node: str) -> list[Difference]:
        failed = []
        for name, size in by_node[node]:
            try:
                start = copy_file(executor, source, targets_by[node], directory, name, size, timeout,
                                  progress or (lambda _n, _b: None))
                if start:
                    result.resumed.append((node, name, start))
            except HostError as exc:
                failed.append(Difference(node, name, "copy", clean(exc.message, multiline=False)[:300]))
                if exc.kind not in ("copy",):
                    break            # the connection is gone: the node's other files would fail the same way
            except Exception as exc:  # noqa: BLE001 - paramiko's channel errors, a local read: about this copy
                failed.append(Difference(node, name, "copy", clean(f"{type(exc).__name__}: {exc}",
                                                                   multiline=False)[:300]))
                break
        return failed

    if by_node:
        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(by_node)))) as pool:
            result.failed = [d for fs in pool.map(one, list(by_node)) for d in fs]
    after = check_weights(executor, targets, directory, hashes=hashes, timeout=timeout, workers=workers,
                          names=names)
    if source.local is None:
        after.listings.pop(source.label, None)
    hosts = [d for d in after.differences if d.file == "" and d.kind == "host"]
    _, diffs = compare({source.label: ref, **after.listings}, names, reference=source.label)
    after.reference = ref
    after.differences = hosts + [d for d in diffs if d.node != source.label]
    result.after = after
    return result

