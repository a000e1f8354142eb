"""`weights check`: which of the checkpoint's files differ between the nodes (missing, size, sha256).

The file list comes from the index (model.safetensors.index.json) of the first node that gives a readable one,
read through deployctl.io.checkpoint_files's bounded reader; then every node lists the files in one command, all
nodes in parallel (listing.py). A node that cannot be reached or answers garbage is a difference about that
node, never an exception.
"""

from __future__ import annotations

import os
import tempfile
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from deployctl.core.checkpoint.files import INDEX, MAX_INDEX_BYTES, IndexFile, typed
from deployctl.io.checkpoint_files import read_json
from deployctl.core.errors import DeployctlError
from deployctl.io.executor import Executor, HostError, HostTarget, fan_out_width
from deployctl.core.textsafe import clean
from deployctl.features.weights.listing import FileState, files_of, listing_argv, parse_listing, safe_dir
from deployctl.features.weights.remote import source_argv

HASH_TIMEOUT = 4 * 3600.0     # sha256 of ~700 GB at ~1 GB/s per core, 4 files at once: well under this


@dataclass(frozen=True)
class Difference:
    node: str
    file: str                 # "" when the node as a whole could not be checked
    kind: str                 # missing | size | hash | unreadable | notfile | host | index
    have: str
    want: str = ""

    def as_dict(self) -> dict:
        return {"node": self.node, "file": self.file, "kind": self.kind, "have": self.have, "want": self.want}


@dataclass
class CheckResult:
    directory: str
    files: list[str]
    index_from: str | None
    hashes: bool
    listings: dict[str, dict[str, FileState]] = field(default_factory=dict)
    differences: list[Difference] = field(default_factory=list)
    reference: dict[str, FileState] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.differences

    def as_dict(self) -> dict:
        return {"weights_path": self.directory, "index_from": self.index_from, "hashes": self.hashes,
                "files": len(self.files), "nodes": sorted(self.listings), "ok": self.ok,
                "differences": [d.as_dict() for d in self.differences],
                "reference": {n: {"state": s.state, "size": s.size, "sha256": s.sha256}
                              for n, s in self.reference.items()}}


def fetch_index(executor: Executor, target: HostTarget, directory: str, timeout: float) -> IndexFile:
    """The node's index, read through the bounded reader; a DeployctlError or HostError says why not."""
    path = f"{safe_dir(directory)}/{INDEX}"
    argv = source_argv("cat", directory, INDEX, MAX_INDEX_BYTES + 1)      # never through a link
    fd, tmp = tempfile.mkstemp(prefix="deployctl-index-", suffix=".json")
    try:
        with os.fdopen(fd, "wb") as sink:
            stream = getattr(executor, "stream", None)
            if stream is not None:        # SshExecutor: straight to disk, past the in-memory output cap
                res = stream(target, argv, timeout, sink, MAX_INDEX_BYTES + 1)
                rc = res.rc if res.stopped is None else (-1 if res.stopped == "limit" else 124)
            else:
                r = executor.run(target, argv, timeout)
                sink.write((r.stdout if r.rc == 0 else r.stdout + r.stderr).encode())
                rc = r.rc
        if rc != 0:
            with open(tmp, "rb") as f:          # the reader's complaint (stderr goes to the same sink)
                said = clean(f.read(300).decode(errors="replace"), multiline=False).strip()
            said = said.rsplit(": ", 1)[-1][:120]      # deployctl-read: <the reason>
            raise HostError(target.name, "index", f"cannot read {path} (exit {rc}{': ' + said if said else ''})",
                            "the node lacks the index or it is unreadable: copy it with `deployctl weights sync`")
        try:
            return typed(IndexFile, read_json(Path(tmp), MAX_INDEX_BYTES), f"{target.name}:{path}")
        except DeployctlError as exc:
            detail = "; ".join(f"{p.path + ': ' if p.path else ''}{p.message}" for p in exc.problems) or str(exc)
            raise HostError(target.name, "index", clean(f"{path} {detail}", multiline=False)[:300],
                            "the index is not a safetensors index: re-copy it from the checkpoint") from None
    finally:
        os.unlink(tmp)


def list_node(executor: Executor, target: HostTarget, directory: str, names: list[str], hashes: bool,
              timeout: float) -> dict[str, FileState] | Difference:
    """One node's files, or a Difference naming the node and why it could not be listed."""
    try:
        res = executor.run(target, listing_argv(directory, names, hashes), timeout)
    except HostError as exc:
        return Difference(target.name, "", "host", clean(exc.message, multiline=False)[:300])
    if res.rc != 0:
        return Difference(target.name, "", "host", clean(f"the listing exited {res.rc}: "
                                                         f"{res.stderr.strip()[:200]}", multiline=False))
    try:
        return parse_listing(res.stdout, names, hashes)
    except ValueError as exc:
        return Difference(target.name, "", "host", clean(f"answered something that is not a listing: {exc}",
                                                         multiline=False)[:300])


def first_index(executor: Executor, targets: list[HostTarget], directory: str, timeout: float):
    """(node, index) of the first node giving a readable index, and the differences of those before it."""
    problems = []
    for t in targets:
        try:
            return t.name, fetch_index(executor, t, directory, timeout), problems
        except HostError as exc:
            kind = "index" if exc.kind == "index" else "host"
            problems.append(Difference(t.name, INDEX if kind == "index" else "", kind,
                                       clean(exc.message, multiline=False)[:300]))
    return None, None, problems


def check_weights(executor: Executor, targets: list[HostTarget], directory: str, *, hashes: bool = False,
                  timeout: float = 60.0, workers: int | None = None, reference: str | None = None,
                  names: list[str] | None = None) -> CheckResult:
    """List the checkpoint's files on every target in parallel and compare them.

    ``reference``: the node every other is compared with (sync's source); else, per file, the state most
    nodes agree on (a tie: no reference, every node holding a version of the file is named). ``names``:
    the file list when the caller already has it (sync reads the index once).
    """
    safe_dir(directory)
    early: list[Difference] = []
    index_from = None
    if names is None:
        index_from, index, early = first_index(executor, targets, directory, timeout)
        if index is None:
            return CheckResult(directory, [], None, hashes, differences=early)
        try:
            names = files_of(index.weight_map)
        except ValueError as exc:
            return CheckResult(directory, [], index_from, hashes, differences=early + [
                Difference(index_from, INDEX, "index", clean(f"names an unsafe file: {exc}", multiline=False))])
    limit = HASH_TIMEOUT if hashes else timeout
    gone = {d.node: d for d in early if d.kind == "host"}       # unreachable while reading the index: not again
    with ThreadPoolExecutor(max_workers=max(1, min(workers or fan_out_width(), len(targets)))) as pool:
        found = list(pool.map(lambda t: gone.get(t.name) or list_node(executor, t, directory, names, hashes,
                                                                      limit), targets))
    result = CheckResult(directory, names, index_from, hashes)
    diffs = [d for d in early if d.kind != "host"]
    for t, f in zip(targets, found):
        if isinstance(f, Difference):
            diffs.append(f)
        else:
            result.listings[t.name] = f
    result.reference, diffs2 = compare(result.listings, names, reference)
    result.differences = diffs + diffs2
    return result


def compare(listings: dict[str, dict[str, FileState]], names: list[str],
            reference: str | None = None) -> tuple[dict[str, FileState], list[Difference]]:
    """(the reference state per file, the differences from it, in node then file order). Pure."""
    ref: dict[str, FileState] = {}
    diffs: list[Difference] = []
    for name in names:
        states = {node: files[name] for node, files in listings.items()}
        want = states.get(reference) if reference else _majority(states)
        if want is not None:
            ref[name] = want
        for node, have in states.items():
            if want is not None and have == want:
                continue
            if want is None and have.state != "ok" and any(s.state == "ok" for s in states.values()):
                diffs.append(Difference(node, name, have.state, have.describe(), "present on other nodes"))
            elif want is None:
                if have.state == "ok":
                    others = ", ".join(f"{n}: {s.describe()}" for n, s in states.items() if n != node)
                    diffs.append(Difference(node, name, "hash" if have.sha256 else "size", have.describe(),
                                            f"no majority ({others})"))
                else:
                    diffs.append(Difference(node, name, have.state, have.describe(), "on no node either"))
            elif have.state != "ok":
                diffs.append(Difference(node, name, have.state, have.describe(), want.describe()))
            elif want.state != "ok":
                continue          # the reference lacks it: nothing to compare with (sync refuses such a source)
            else:
                kind = "size" if have.size != want.size else "hash"
                diffs.append(Difference(node, name, kind, have.describe(), want.describe()))
    order = {n: i for i, n in enumerate(listings)}
    at = {n: i for i, n in enumerate(names)}
    diffs.sort(key=lambda d: (order.get(d.node, -1), at.get(d.file, -1)))
    return ref, diffs


def _majority(states: dict[str, FileState]) -> FileState | None:
    """The state most nodes holding the file agree on; None on a tie (or when no node holds it)."""
    counts = Counter(s for s in states.values() if s.state == "ok").most_common()
    if not counts or (len(counts) > 1 and counts[0][1] == counts[1][1]):
        return None
    return counts[0][0]
