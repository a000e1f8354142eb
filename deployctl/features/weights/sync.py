"""`weights sync`: copy the checkpoint files a node lacks or holds differently from a source, then check again.

The controller relays: it reads each file from the source (a node over SSH, or a directory on this machine)
and writes it to every node that needs it over that node's SSH connection. deployctl holds the keys and the
verified host keys; the nodes may have no keys for each other, or no route between them on the management
network, so the source never pushes. rsync is not used: it cannot copy between two remote hosts through a
third, and the simulated (and many minimal) hosts lack it. One file's copy is relay.py's.

Before a byte moves: the source must hold every file of its own index as a regular file (a symbolic link is
named and refused, never read), its shards together no more bytes than the index's metadata.total_size allows
(``check_sizes``), and each node the room for what it gets (``relay.room``).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

from deployctl.core.checkpoint.files import CONFIG, INDEX, MAX_CONFIG_BYTES, MAX_INDEX_BYTES, IndexFile
from deployctl.io.executor import HostError, HostTarget, fan_out_width
from deployctl.core.textsafe import clean
from deployctl.features.weights.check import CheckResult, Difference, check_weights, compare, fetch_index
from deployctl.features.weights.listing import FileState, files_of
from deployctl.features.weights.localfs import local_listing, read_index
from deployctl.features.weights.relay import Progress, Source, copy_file, room

COPY_KINDS = ("missing", "size", "hash", "unreadable")
# a safetensors shard: 8 bytes giving the header's length, a JSON header (at most 100,000,000 bytes: the format's
# own limit, safetensors MAX_HEADER_SIZE), then the tensors' bytes, which metadata.total_size adds up
SHARD_OVERHEAD = 8 + 100_000_000
SHOWN = 10                  # links named in a refusal


@dataclass
class SyncResult:
    source: str
    copies: list[tuple[str, str, int]]                  # (node, file, bytes) planned
    failed: list[Difference] = field(default_factory=list)
    resumed: list[tuple[str, str, int]] = field(default_factory=list)    # (node, file, from byte)
    skipped: list[Difference] = field(default_factory=list)
    distrusted: list[Difference] = field(default_factory=list)           # part files found and not used
    before: CheckResult | None = None
    after: CheckResult | None = None

    @property
    def ok(self) -> bool:
        return not self.failed and self.after is not None and self.after.ok


def source_files(executor, source: Source, timeout: float) -> tuple[IndexFile, list[str]]:
    """The source's own index (bounded reader, never through a link) and the file list it gives;
    HostError/DeployctlError when unreadable, ValueError for an unsafe name."""
    if source.local is not None:
        index = read_index(source.local, source.label)
    else:
        index = fetch_index(executor, source.target, source.directory, timeout)
    return index, files_of(index.weight_map)


def check_sizes(label: str, index: IndexFile, ref: dict[str, FileState], names: list[str]) -> None:
    """HostError (about the source) unless its files are of sizes its index allows: config.json and the index
    within what deployctl reads of them, the shards together at most metadata.total_size plus a header each."""
    for name, cap in ((CONFIG, MAX_CONFIG_BYTES), (INDEX, MAX_INDEX_BYTES)):
        if ref[name].size > cap:
            raise HostError(label, "source", f"{name} is {ref[name].size:,} bytes, more than the {cap:,} such a "
                            "file can be", "sync from a checkpoint whose small files are what they say")
    shards = [n for n in names if n not in (CONFIG, INDEX)]
    total = index.metadata.total_size
    if total is None:
        raise HostError(label, "source", f"{INDEX} has no metadata.total_size: deployctl cannot tell a shard of "
                        "a sane size from one that would fill the nodes' disks",
                        "give the index its metadata.total_size (the tensors' bytes, as transformers and "
                        "safetensors write it), then sync again")
    held = sum(ref[n].size for n in shards)
    most = total + len(shards) * SHARD_OVERHEAD
    if held > most:
        big = max(shards, key=lambda n: ref[n].size)
        raise HostError(label, "source", f"its {len(shards)} shards hold {held:,} bytes, more than the {most:,} "
                        f"that {INDEX}'s metadata.total_size ({total:,}) allows with a header per shard; the "
                        f"largest: {big}, {ref[big].size:,} bytes", "a shard is not what the index says (a sparse "
                        "or runaway file?): repair the source, or sync from another")


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


def sync_weights(executor, source: Source, dests: list[HostTarget], directory: str, *, hashes: bool = False,
                 timeout: float = 60.0, workers: int | None = None, progress: Progress | None = None,
                 on_plan: Callable[[list], None] | None = None) -> SyncResult:
    """Check, copy what differs from the source to each node in parallel (one relay per node), check again."""
    index, names = source_files(executor, source, timeout)
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
    links = [n for n in names if ref[n].state == "link"]
    if links:
        more = f" and {len(links) - SHOWN} more" if len(links) > SHOWN else ""
        raise HostError(source.label, "source", f"{len(links)} of the checkpoint's files are symbolic links on the "
                        f"source, not followed and not copied: {', '.join(links[:SHOWN])}{more}",
                        "replace each link with the file itself (cp -L), or sync from a copy without links")
    lacking = [n for n in names if ref[n].state != "ok"]
    if lacking:
        raise HostError(source.label, "source", f"the source lacks {len(lacking)} of the checkpoint's files "
                        f"(first: {lacking[0]}, {ref[lacking[0]].describe()})", "sync from a complete copy")
    check_sizes(source.label, index, ref, names)
    copies, skipped = plan(source, ref, before)
    result = SyncResult(source.label, copies, skipped=skipped, before=before)
    if on_plan:
        on_plan(copies)
    by_node: dict[str, list[tuple[str, int]]] = {}
    for node, name, size in copies:
        by_node.setdefault(node, []).append((name, size))
    targets_by = {t.name: t for t in dests}

    def one(node: str) -> list[Difference]:
        try:
            short = room(executor, targets_by[node], directory, by_node[node], before.listings.get(node, {}),
                         timeout)
        except HostError as exc:
            return [Difference(node, "", "host", clean(exc.message, multiline=False)[:300])]
        if short:
            return [Difference(node, "", "space", clean(short, multiline=False)[:300],
                               "free space on the node (df -h), then sync again")]
        failed = []
        for name, size in by_node[node]:
            def note(text: str, name: str = name) -> None:
                result.distrusted.append(Difference(node, name, "part", text))
            try:
                start = copy_file(executor, source, targets_by[node], directory, name, size, timeout,
                                  progress or (lambda _n, _b: None), note)
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
        with ThreadPoolExecutor(max_workers=max(1, min(workers or fan_out_width(), len(by_node)))) as pool:
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

