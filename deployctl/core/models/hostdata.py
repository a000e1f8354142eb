"""What a host says about its deployment, parsed at one boundary: typed models with strict patterns and bounds.

A host is untrusted input (issue 21): its `current`/`previous` links, revision manifests, history entries,
lock file, `docker inspect` answers and health answers are parsed here, and anything that does not parse is
left out with a finding naming the host ("node1: history/x.json is not a deployctl history entry - ignored"),
never an exception. Revision ids are what deployctl.backends.hosts.revision makes (16 hex digits), run ids what
deployctl.io.records makes (``20260101T000000.000000Z-up``).
"""

from __future__ import annotations

import hashlib
import json
from typing import Annotated, Literal, cast

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

REV = r"^[0-9a-f]{16}$"
RUN_ID = r"^[0-9]{8}T[0-9]{6}\.[0-9]{6}Z-[a-z][a-z0-9-]{0,31}$"
NODE = r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$"                  # the inventory's node names
FILE = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*(/[A-Za-z0-9_][A-Za-z0-9_.-]*)*$"   # a file of a revision folder
SHA256 = r"^[0-9a-f]{64}$"
TEXT = r"^[^\x00-\x1f\x7f-\x9f]*$"                                # one line, no control or escape characters

MAX_MANIFESTS = 256           # revision directories read per host (deploy.keep_revisions is at most 100)
MAX_HISTORY = 4096            # history entries read per host
MAX_DOC = 8 << 20             # bytes of one manifest or history file (an entry of a 1,024-server fleet is ~1 MB)
MAX_NODES = 8192
MAX_FILES = 128
MAX_REVISION = 10**9          # the highest history revision number read back (history.next_revision never passes it)

Rev = Annotated[str, StringConstraints(pattern=REV)]
RunId = Annotated[str, StringConstraints(pattern=RUN_ID)]
Node = Annotated[str, StringConstraints(pattern=NODE)]
FileName = Annotated[str, StringConstraints(pattern=FILE, max_length=200)]
Sha256 = Annotated[str, StringConstraints(pattern=SHA256)]
Digest16 = Annotated[str, StringConstraints(pattern=r"^([0-9a-f]{16})?$")]
EnvKey = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_.-]{0,127}$")]


def Text(n: int) -> StringConstraints:   # noqa: N802 - a type's constraint: Annotated[str, Text(63)]
    """One printable line of at most n characters."""
    return StringConstraints(pattern=TEXT, max_length=n)


class _HostDoc(BaseModel):
    # unknown keys are ignored (a newer deployctl may add some), known ones must parse; strict: "7" is not 7
    model_config = ConfigDict(frozen=True, extra="ignore", strict=True)


class Manifest(_HostDoc):
    """revisions/<rev>/.deployctl.json (deployctl.backends.hosts.revision.NodeBundle.manifest)."""

    revision: Rev
    run: RunId | None = None
    cluster: Annotated[str, Text(63)] | None = None
    node: Node | None = None
    files: dict[FileName, Sha256] = Field(default_factory=dict, max_length=MAX_FILES)
    env_digest: Digest16 = ""
    env_keys: list[EnvKey] = Field(default_factory=list, max_length=1024)


class HistoryEntry(_HostDoc):
    """history/<run id>.json (deployctl.backends.hosts.ansible_run.entry_for), ``digest`` sealed by ``seal``."""

    revision: int = Field(ge=1, le=MAX_REVISION)
    run_id: RunId
    time: Annotated[str, StringConstraints(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.+Z-]{1,32}$")]
    operation: Literal["up", "rollback", "down", "restart", "scale-up", "scale-down"]   # restart: by `watch`; scale-*: by `scale --apply`
    result: Literal["successful", "failed", "canceled"]
    user: Annotated[str, Text(128)] = ""
    deployctl: Annotated[str, Text(64)] = ""
    summary: Annotated[str, Text(500)] = ""
    inventory_digest: Digest16 = ""
    nodes: dict[Node, Rev] = Field(default_factory=dict, max_length=MAX_NODES)
    files: dict[Node, dict[FileName, Sha256]] = Field(default_factory=dict, max_length=MAX_NODES)
    failure: Annotated[str, Text(1000)] | None = None
    to: int | None = Field(None, ge=1, le=MAX_REVISION)
    digest: Sha256 | None = None

    def as_dict(self) -> dict:
        """The entry as the history functions use it (``digest``: the content digest, always set)."""
        return self.model_dump(exclude_none=True)


class LockDoc(_HostDoc):
    """The lock file (deployctl.backends.common.lockinfo.LockOwner as JSON)."""

    user: Annotated[str, Text(128)]
    host: Annotated[str, Text(255)]
    pid: int = Field(ge=0, le=2**31)
    command: Annotated[str, Text(400)]
    run_id: Annotated[str, Text(64)]
    started: Annotated[str, Text(64)]
    heartbeat: Annotated[str, Text(64)] = ""


class InspectState(_HostDoc):
    Status: Annotated[str, Text(32)] = "unknown"
    ExitCode: int | None = Field(None, ge=-(2 ** 31), le=2 ** 31 - 1)     # a process's exit status (Go int)
    StartedAt: Annotated[str, Text(64)] | None = None


class InspectMount(_HostDoc):
    Source: Annotated[str, Text(4096)] = ""
    Destination: Annotated[str, Text(4096)] = ""


class ContainerDoc(_HostDoc):
    """`docker inspect --format` of one container: State, Mounts, Config.Env (remote.INSPECT_FORMAT)."""

    state: InspectState
    mounts: list[InspectMount] = Field(default_factory=list, max_length=1024)
    env: list[Annotated[str, StringConstraints(max_length=1 << 16)]] = Field(default_factory=list, max_length=4096)


def seal(entry: dict) -> dict:
    """The entry with its digest: sha256 of its canonical JSON without the digest (what the hosts must agree on)."""
    return {**entry, "digest": content_digest(entry)}


def clean_entry(entry: dict) -> dict:
    """The texts of an entry deployctl writes made one printable line (a failure can quote a host's output)."""
    return {k: printable(v, {"failure": 1000, "summary": 500}.get(k, 128)) if k in ("user", "summary", "failure")
            and isinstance(v, str) else v for k, v in entry.items()}


def content_digest(doc: dict) -> str:
    body = {k: v for k, v in doc.items() if k != "digest"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def why_invalid(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(x) for x in err["loc"][:3])
    return f"{where}: {err['msg']}"[:120] if where else err["msg"][:120]


def json_files(text: str, node: str, what: str, limit: int) -> tuple[list[tuple[str, object]], list[str]]:
    """The files of a CAT_ALL read: [(path, parsed JSON)], findings for the rest (not JSON, too many, too big)."""
    out, findings = [], []
    chunks = text.split("@@file ")[1:]
    if len(chunks) > limit:
        findings.append(f"{node}: {len(chunks)} {what} files, only the first {limit} read")
        chunks = chunks[:limit]
    for chunk in chunks:
        path, _, body = chunk.partition("\n")
        path = path.strip()
        if len(body) > MAX_DOC:
            findings.append(f"{node}: {short(path)} is larger than {MAX_DOC >> 20} MB - ignored")
            continue
        try:
            out.append((path, json.loads(body)))
        except (ValueError, RecursionError):
            findings.append(f"{node}: {short(path)} is not JSON - ignored")
    return out, findings


def short(path: str) -> str:
    """The last two parts of a host path, printable (for findings)."""
    tail = "/".join(path.rsplit("/", 2)[-2:])[:120]
    return "".join(ch if ch.isprintable() else "?" for ch in tail)


def parse_manifests(text: str, node: str) -> tuple[dict[str, Manifest], list[str]]:
    out: dict[str, Manifest] = {}
    files, findings = json_files(text, node, "revision manifest", MAX_MANIFESTS)
    for path, doc in files:
        parts = path.rsplit("/", 2)
        folder = parts[-2] if len(parts) >= 2 else ""
        try:
            man = Manifest.model_validate(doc)
        except ValidationError as exc:
            findings.append(f"{node}: {short(path)} is not a deployctl revision manifest ({why_invalid(exc)}) "
                            "- ignored")
            continue
        if man.revision != folder:
            findings.append(f"{node}: {short(path)} names revision {man.revision}, not its directory - ignored")
            continue
        out[man.revision] = man
    return out, findings


def parse_history(text: str, node: str) -> tuple[list[HistoryEntry], list[str]]:
    """This host's history entries (each ``digest`` set to its content digest), sorted by revision."""
    out: dict[str, HistoryEntry] = {}
    files, findings = json_files(text, node, "history", MAX_HISTORY)
    for path, doc in files:
        name = short(path).rsplit("/", 1)[-1]
        try:
            e = HistoryEntry.model_validate(doc)
        except ValidationError as exc:
            findings.append(f"{node}: history/{name} is not a deployctl history entry ({why_invalid(exc)}) "
                            "- ignored")
            continue
        digest = content_digest(cast(dict, doc))   # a history entry parsed from it: a JSON object
        if e.digest is not None and e.digest != digest:
            findings.append(f"{node}: history/{name} does not match its own digest - ignored")
            continue
        if name != f"{e.run_id}.json" or e.run_id in out:
            findings.append(f"{node}: history/{name} holds run {e.run_id}, not its file name - ignored")
            continue
        out[e.run_id] = e.model_copy(update={"digest": digest})
    return sorted(out.values(), key=lambda e: (e.revision, e.run_id)), findings


def parse_link(text: str | None, node: str, name: str) -> tuple[str | None, list[str]]:
    """`readlink current|previous`: the revision id it names (``revisions/<rev>``), else None and a finding."""
    if text is None or not text.strip():
        return None, []
    raw = text.strip()
    parts = raw.rstrip("/").rsplit("/", 2)
    if len(raw) <= 4096 and len(parts) >= 2 and parts[-2] == "revisions" and _matches(REV, parts[-1]):
        return parts[-1], []
    return None, [f"{node}: `{name}` points at {printable(raw, 80)!r}, not a deployctl revision - ignored"]


def parse_lock(text: str | None, node: str) -> tuple[LockDoc | None, list[str]]:
    if text is None or not text.strip():
        return None, []
    try:
        return LockDoc.model_validate_json(text.strip()[:MAX_DOC]), []
    except ValidationError:
        return None, [f"{node}: the lock file is not a deployctl lock (it still counts as held)"]


def parse_container(text: str, node: str, name: str) -> tuple[ContainerDoc | None, list[str]]:
    """None when docker said nothing (no such container); a finding when it said something else."""
    lines = text.splitlines()[:3]
    try:
        state, mounts, env = (json.loads(x) for x in lines) if len(lines) == 3 else ((),) * 3
        if state == ():
            raise ValueError("not three lines")
        return ContainerDoc.model_validate({"state": state, "mounts": mounts or [], "env": env or []}), []
    except (ValueError, RecursionError, ValidationError, TypeError):
        return None, [f"{node}: `docker inspect {name}` answered {printable(text.strip(), 60)!r}, not docker's "
                      "state of a container - its state is unknown"]


def parse_count(text: str) -> int | None:
    t = text.strip()
    return int(t) if _matches(r"^[0-9]{1,9}$", t) else None


def printable(text: str, n: int) -> str:
    t = "".join(ch if ch.isprintable() else "?" for ch in text[: n + 1])
    return t if len(t) <= n else t[:n] + "…"


def _matches(pattern: str, text: str) -> bool:
    import re

    return re.fullmatch(pattern.strip("^$"), text, flags=re.ASCII) is not None
