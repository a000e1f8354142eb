"""kubernetes.workload lws: the release's LeaderWorkerSets (leaderworkerset.x-k8s.io/v1), read back (pure, over
the API's dicts).

A LeaderWorkerSet `<name>` of `replicas` groups and `size` pods a group makes pods `<name>-<g>` (the leader,
worker index 0) and `<name>-<g>-<i>` (workers 1..size-1) (kubernetes-sigs/lws@v0.9.0
pkg/controllers/leaderworkerset_controller.go, pod_controller.go). The controller itself recreates a group whose
pod failed and rolls a changed template, so deployctl restarts nothing: it waits until every pod runs the rendered
template (its checksum annotation) and is Ready.
"""

from __future__ import annotations

from collections.abc import Iterator

KIND = "LeaderWorkerSet"
GROUP, VERSION, PLURAL = "leaderworkerset.x-k8s.io", "v1", "leaderworkersets"
HINT = ("install the LeaderWorkerSet controller (kubernetes-sigs/lws, v0.9.0 or later: `helm install lws "
        "oci://registry.k8s.io/lws/charts/lws -n lws-system --create-namespace`), or set kubernetes.workload: "
        "statefulset")


def spec(doc: dict) -> tuple[int, int, dict]:
    spec = doc.get("spec") or {}
    lwt = spec.get("leaderWorkerTemplate") or {}
    return int(spec.get("replicas", 1)), int(lwt.get("size", 1)), lwt


def pod_templates(doc: dict) -> list[tuple[dict, int]]:
    """(pod template, pods made from it) of a LeaderWorkerSet: the leader's (its workerTemplate when it has no
    leaderTemplate) and the workers'."""
    replicas, size, lwt = spec(doc)
    leader = lwt.get("leaderTemplate") or lwt.get("workerTemplate") or {}
    out = [(leader, replicas)]
    if size > 1:
        out.append((lwt.get("workerTemplate") or {}, replicas * (size - 1)))
    return out


def pod_names(doc: dict) -> Iterator[tuple[str, dict]]:
    """Each pod's name and the pod template it is made from."""
    replicas, size, lwt = spec(doc)
    name = doc["metadata"]["name"]
    leader = lwt.get("leaderTemplate") or lwt.get("workerTemplate") or {}
    for g in range(replicas):
        yield f"{name}-{g}", leader
        for i in range(1, size):
            yield f"{name}-{g}-{i}", lwt.get("workerTemplate") or {}


TEMPLATE_HASH = "deployctl.io/pod-template"      # the chart's hash of a whole pod template (lws.yaml, inferserviceset.yaml)


def checksum(template: dict) -> str:
    """What identifies a pod template (key=value; '' when none): its hash where the chart gives one, else its
    checksum annotation (files and env)."""
    ann = (template.get("metadata") or {}).get("annotations") or {}
    if ann.get(TEMPLATE_HASH):
        return f"{TEMPLATE_HASH}={ann[TEMPLATE_HASH]}"
    return next((f"{k}={v}" for k, v in sorted(ann.items()) if k.startswith("checksum/")), "")


def status_lines(objects: list[dict]) -> list[str]:
    """What `status` says of the release's LeaderWorkerSets: groups ready of desired, and the Available condition."""
    from deployctl.backends.k8s.readback import condition, count_line, text

    out = []
    for o in (o for o in objects if o.get("kind") == KIND):
        replicas, size, _ = spec(o)
        cond = condition(o, "Available")
        out.append(count_line(o, f"group(s) of {size}", (o.get("status") or {}).get("readyReplicas"), replicas)
                   + (f", Available={text(cond.get('status'))}" if cond else ""))
    return out
