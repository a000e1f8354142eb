"""diff --target k8s: rendered manifests vs the live objects of the release (pure).

A live object matches when every field the manifest sets has the same value live (the API server adds
defaults, status and metadata; those are not differences). Instances restart as a whole: when the
checksum of an instance's files and env (the pod template annotation) changes, all its pods go.

Example::

    ConfigMap    r1-mindie-mixed-files   changed    data.config.json
    StatefulSet  r1-mindie-mixed-master  changed    spec.template.metadata.annotations.checksum/instance
    -> instance mixed: restart (files or env changed)
"""

from __future__ import annotations

from dataclasses import dataclass

CHECKSUM = "checksum/instance"
INSTANCE_LABEL = "deployctl.io/instance"


@dataclass(frozen=True)
class ObjectChange:
    kind: str
    name: str
    change: str                 # new | changed | unchanged | removed
    fields: tuple[str, ...] = ()


@dataclass(frozen=True)
class InstanceAction:
    instance: str
    action: str                 # start | restart | keep
    reason: str


def _differences(want, have, path: str) -> list[str]:
    if isinstance(want, dict):
        if not isinstance(have, dict):
            return [path or "."]
        out = []
        for key, value in want.items():
            sub = f"{path}.{key}" if path else str(key)
            out += [sub] if key not in have else _differences(value, have[key], sub)
        return out
    if isinstance(want, list):
        if not isinstance(have, list) or len(want) != len(have):
            return [path]
        out = []
        for i, (w, h) in enumerate(zip(want, have)):
            out += _differences(w, h, f"{path}[{i}]")
        return out
    return [] if want == have else [path]


def diff_objects(rendered: list[dict], live: list[dict]) -> list[ObjectChange]:
    """Per object of the release: new, changed (with the differing fields), unchanged or removed."""
    have = {(d["kind"], d["metadata"]["name"]): d for d in live}
    out = []
    for doc in rendered:
        key = (doc["kind"], doc["metadata"]["name"])
        if key not in have:
            out.append(ObjectChange(*key, "new"))
            continue
        body = {k: v for k, v in doc.items() if k not in ("apiVersion", "kind")}
        fields = tuple(_differences(body, have[key], ""))
        out.append(ObjectChange(*key, "changed" if fields else "unchanged", fields))
    wanted = {(d["kind"], d["metadata"]["name"]) for d in rendered}
    out += [ObjectChange(k, n, "removed") for (k, n) in sorted(have) if (k, n) not in wanted]
    return out


def _checksums(docs: list[dict]) -> dict[str, str]:
    out = {}
    for d in docs:
        if d["kind"] == "StatefulSet":
            inst = d["metadata"].get("labels", {}).get(INSTANCE_LABEL)
            ann = d["spec"]["template"]["metadata"].get("annotations") or {}
            if inst:
                out[inst] = ann.get(CHECKSUM, "")
    return out


def instance_actions(rendered: list[dict], live: list[dict]) -> list[InstanceAction]:
    """Which instances start (new), restart (files, env or pod spec changed) or stay as they are."""
    want, have = _checksums(rendered), _checksums(live)
    changes = {c.name: c for c in diff_objects(rendered, live) if c.kind == "StatefulSet"}
    out = []
    for inst, checksum in want.items():
        sets = [d["metadata"]["name"] for d in rendered if d["kind"] == "StatefulSet"
                and d["metadata"]["labels"].get(INSTANCE_LABEL) == inst]
        if inst not in have:
            out.append(InstanceAction(inst, "start", "new instance"))
        elif have[inst] != checksum:
            out.append(InstanceAction(inst, "restart", "files or env changed"))
        elif any(f.startswith("spec.template") for s in sets for f in changes[s].fields):
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
