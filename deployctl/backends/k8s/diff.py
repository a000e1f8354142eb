"""diff --target k8s: rendered manifests vs the live objects of the release (pure).

A live object matches when every field the manifest sets has the same value live (the API server adds
defaults, status and metadata; those are not differences; an empty map or list it leaves out is not one
either). A ConfigMap's ``data``/``binaryData`` belong to the release as a whole: a key gone from the
manifest is a difference. Instances restart as a whole: when the checksum of an instance's files and env
(the pod template annotation) changes, all its pods go.

Each changed object carries ``fields`` (the differing paths, as before) and ``details``, one line per
field with the live and the rendered value; a ConfigMap file (``config.json``, ``boot.sh``, ...) is diffed
key by key inside (deployctl.core.filediff), secret-looking values read ``***``. Example::

    ConfigMap    r1-mindie-mixed-files   changed    data.config.json
    StatefulSet  r1-mindie-mixed-master  changed    spec.template.metadata.annotations.checksum/instance
    -> instance mixed: restart (files or env changed)

    ConfigMap/r1-mindie-mixed-files data.config.json › BackendConfig.ScheduleConfig.maxBatchSize: 32 → 64
    ConfigMap/r1-mindie-mixed-env data.HCCL_BUFFSIZE: 120 → 1050
    StatefulSet/r1-mindie-mixed-master spec.template.spec.containers[0].image: mindie:2.1 → mindie:2.2
"""

from __future__ import annotations

from dataclasses import dataclass

CHECKSUM = "checksum/instance"
INSTANCE_LABEL = "deployctl.io/instance"
MAX_DETAILS = 100               # detail lines per object, then "… N more changes"
FILE_LIMIT = 50                 # key-level changes per ConfigMap file
_OWNED_MAPS = {"ConfigMap": ("data", "binaryData")}
SECRET_DATA = ("data", "stringData")


@dataclass(frozen=True)
class ObjectChange:
    kind: str
    name: str
    change: str                 # new | changed | unchanged | removed
    fields: tuple[str, ...] = ()
    details: tuple[str, ...] = ()   # per field 'path: live → rendered'; ConfigMap files key by key

    def lines(self) -> list[str]:
        """The details as printable lines: 'StatefulSet/x spec.template.spec.containers[0].image: a → b'."""
        return [f"{self.kind}/{self.name} {d}" for d in self.details]


@dataclass(frozen=True)
class InstanceAction:
    instance: str
    action: str                 # start | restart | keep
    reason: str


class _Missing:
    def __repr__(self) -> str:
        return "<missing>"


_MISSING = _Missing()


def _show(value, secret: bool) -> str | None:
    from deployctl.core.filediff import show_json, show_text
    from deployctl.core.input.secrets import MASK

    if value is _MISSING:
        return None
    if secret:
        return MASK
    return show_text(value) if isinstance(value, str) else show_json(_redact(value))


def _redact(value):
    """A live/rendered container for display, its secret-looking values (``{name: HF_TOKEN, value: x}``
    env entries included) replaced by ***."""
    from deployctl.core.input.secrets import MASK

    if isinstance(value, dict):
        return {k: MASK if _secret_child(value, k) else _redact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_redact(v) for v in value]
    return value


def _empty(value) -> bool:
    return value is None or value == {} or value == []


class _Diff:
    """Walks the rendered object against the live one, collecting (path, detail) pairs."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.out: list[tuple[str, str]] = []

    def field(self, path: str, old, new, secret: bool) -> None:
        from deployctl.core.filediff import KeyChange

        self.out.append((path or ".", str(KeyChange(path or ".", _show(old, secret), _show(new, secret)))))

    def added(self, path: str, want, secret: bool) -> None:
        """A field the live object lacks: every leaf of it (an empty one is what the server omits)."""
        if isinstance(want, dict) and want:
            for key, value in want.items():
                self.added(f"{path}.{key}" if path else str(key), value, secret or _secret_child(want, key))
        elif isinstance(want, list) and want:
            for i, value in enumerate(want):
                self.added(f"{path}[{i}]", value, secret)
        elif not _empty(want):
            self.field(path, _MISSING, want, secret)

    def walk(self, want, have, path: str, secret: bool = False) -> None:
        if have is _MISSING:
            self.added(path, want, secret)
        elif isinstance(want, dict):
            if not isinstance(have, dict):
                self.field(path, have, want, secret)
                return
            owned = path in _OWNED_MAPS.get(self.kind, ())
            for key, value in want.items():
                sub = f"{path}.{key}" if path else str(key)
                if owned:
                    self.data(sub, key, have.get(key, _MISSING), value)
                else:
                    self.walk(value, have.get(key, _MISSING), sub, secret or _secret_child(want, key))
            if owned:
                for key in sorted(set(have) - set(want), key=str):
                    self.data(f"{path}.{key}", key, have[key], _MISSING)
        elif isinstance(want, list):
            if not isinstance(have, list):
                self.field(path, have, want, secret)
                return
            for i in range(max(len(want), len(have))):
                if i >= len(have):
                    self.added(f"{path}[{i}]", want[i], secret)
                elif i >= len(want):
                    self.field(f"{path}[{i}]", have[i], _MISSING, secret)
                else:
                    self.walk(want[i], have[i], f"{path}[{i}]", secret)
        elif want != have:
            self.field(path, have, want, secret)

    def data(self, path: str, key: str, old, new) -> None:
        """One key of a ConfigMap's data: a file diffed key by key, or a value (an env variable)."""
        from deployctl.core.filediff import file_changes
        from deployctl.core.input.secrets import is_secret

        if old == new:
            return
        if _is_file(key, old, new):
            changes = file_changes(key, _bytes(old), _bytes(new), limit=FILE_LIMIT)
            if changes is None:
                self.out.append((path, f"{path}: binary content changed"))
            elif not changes:
                self.out.append((path, f"{path}: same content, formatted differently"))
            else:
                self.out += [(path, f"{path} › {c}") for c in changes]
        else:
            self.field(path, old, new, is_secret(str(key)))


def _secret_child(parent: dict, key) -> bool:
    """A key whose value is secret: by its name, or the ``value`` of a ``{name: HF_TOKEN, value: ...}`` env
    entry."""
    from deployctl.core.input.secrets import is_secret

    if is_secret(str(key)):
        return True
    name = parent.get("name")
    return key == "value" and isinstance(name, str) and is_secret(name)


def _is_file(key: str, old, new) -> bool:
    from deployctl.core.filediff import file_format

    texts = [v for v in (old, new) if isinstance(v, str)]
    return "." in str(key).lstrip(".") or file_format(str(key)) != "lines" or any("\n" in t for t in texts)


def _bytes(value) -> bytes | None:
    if value is _MISSING or value is None:
        return None
    return value.encode() if isinstance(value, str) else str(value).encode()


def field_changes(want: dict, have: dict, kind: str = "") -> list[tuple[str, str]]:
    """(path, detail) per differing field of a rendered object body against the live one, in manifest
    order; ``path`` repeats for the key-level changes of one ConfigMap file."""
    d = _Diff(kind)
    if kind == "Secret":       # every value of a Secret is secret, whatever its name
        for key, value in want.items():
            d.walk(value, have.get(key, _MISSING), key, key in SECRET_DATA)
        return d.out
    d.walk(want, have, "")
    return d.out


def _differences(want, have, path: str) -> list[str]:
    """The differing paths (kept for callers of the former helper)."""
    d = _Diff("")
    d.walk(want, have, path)
    return list(dict.fromkeys(p for p, _ in d.out))


def _cap(details: list[str]) -> tuple[str, ...]:
    if len(details) <= MAX_DETAILS:
        return tuple(details)
    more = len(details) - MAX_DETAILS
    return (*details[:MAX_DETAILS], f"… {more} more change{'s' if more != 1 else ''}")


def diff_objects(rendered: list[dict], live: list[dict]) -> list[ObjectChange]:
    """Per object of the release: new, changed (with the differing fields and their values), unchanged or
    removed."""
    have = {(d["kind"], d["metadata"]["name"]): d for d in live}
    out = []
    for doc in rendered:
        key = (doc["kind"], doc["metadata"]["name"])
        if key not in have:
            out.append(ObjectChange(*key, "new"))
            continue
        body = {k: v for k, v in doc.items() if k not in ("apiVersion", "kind")}
        changes = field_changes(body, have[key], doc["kind"])
        fields = tuple(dict.fromkeys(p for p, _ in changes))
        out.append(ObjectChange(*key, "changed" if fields else "unchanged", fields,
                                _cap([d for _, d in changes])))
    wanted = {(d["kind"], d["metadata"]["name"]) for d in rendered}
    out += [ObjectChange(k, n, "removed") for (k, n) in sorted(have) if (k, n) not in wanted]
    return out


# what runs an instance's pods (kubernetes.workload): its own StatefulSets or LeaderWorkerSet, or the release's
# InferServiceSet (a role per rank role of each instance)
INSTANCE_KINDS = ("StatefulSet", "LeaderWorkerSet", "InferServiceSet")


def _templates(d: dict) -> list[dict]:
    """The pod templates of a workload (a LeaderWorkerSet's leader and workers, an InferServiceSet's roles)."""
    from deployctl.backends.k8s import infer_operator, lws

    how = {lws.KIND: lws, infer_operator.KIND: infer_operator}.get(d["kind"])
    return [t for t, _ in how.pod_templates(d)] if how else [d["spec"]["template"]]


def _checksums(docs: list[dict]) -> dict[str, str]:
    out = {}
    for d in docs:
        if d["kind"] not in INSTANCE_KINDS:
            continue
        for t in _templates(d):
            meta = t.get("metadata") or {}
            inst = (meta.get("labels") or {}).get(INSTANCE_LABEL) or d["metadata"].get("labels", {}).get(INSTANCE_LABEL)
            if inst:
                out[inst] = (meta.get("annotations") or {}).get(CHECKSUM, "")
    return out


def _role_of(field: str, rendered: list[dict], name: str) -> str | None:
    """The instance of an InferServiceSet role a changed field path (spec.template.roles[i]...) is in."""
    head, _, rest = field.partition("spec.template.roles[")
    index = rest.partition("]")[0]
    doc = next((d for d in rendered if d["kind"] == "InferServiceSet" and d["metadata"]["name"] == name), None)
    if head or not index.isdigit() or doc is None:
        return None
    roles = (doc["spec"].get("template") or {}).get("roles") or []
    role = roles[int(index)] if int(index) < len(roles) else {}
    return ((role.get("metadata") or {}).get("labels") or {}).get(INSTANCE_LABEL)


def instance_actions(rendered: list[dict], live: list[dict]) -> list[InstanceAction]:
    """Which instances start (new), restart (files, env or pod spec changed) or stay as they are."""
    want, have = _checksums(rendered), _checksums(live)
    changes = {c.name: c for c in diff_objects(rendered, live) if c.kind in INSTANCE_KINDS}
    out = []
    for inst, checksum in want.items():
        sets = [d["metadata"]["name"] for d in rendered if d["kind"] in INSTANCE_KINDS
                and d["metadata"]["labels"].get(INSTANCE_LABEL, inst) == inst]
        if inst not in have:
            out.append(InstanceAction(inst, "start", "new instance"))
        elif have[inst] != checksum:
            out.append(InstanceAction(inst, "restart", "files or env changed"))
        elif any(f.startswith(("spec.template", "spec.leaderWorkerTemplate")) and (
                 changes[s].kind != "InferServiceSet" or _role_of(f, rendered, s) == inst)
                 for s in sets for f in changes[s].fields):
            out.append(InstanceAction(inst, "restart", "pod spec changed"))
        else:
            out.append(InstanceAction(inst, "keep", "up to date"))
    return out


def settled(statefulsets: list[dict]) -> bool:
    """Every StatefulSet controller has seen the latest spec (status.updateRevision is current)."""
    return all((d.get("status") or {}).get("observedGeneration", 0) >= d["metadata"].get("generation", 1)
               for d in statefulsets)


def stale_instances(statefulsets: list[dict], pods: list[dict]) -> set[str]:
    """Instances with a pod that does not run its StatefulSet's update revision (OnDelete leaves such pods
    until they are deleted): after `helm upgrade`, these restart, all their pods together."""
    revision = {d["metadata"]["name"]: (d.get("status") or {}).get("updateRevision") for d in statefulsets}
    out = set()
    for pod in pods:
        meta = pod["metadata"]
        owner = next((o["name"] for o in meta.get("ownerReferences") or [] if o.get("kind") == "StatefulSet"), None)
        want = revision.get(owner)
        if want and (meta.get("labels") or {}).get("controller-revision-hash") != want:
            out.add((meta.get("labels") or {}).get(INSTANCE_LABEL, ""))
    return out - {""}
