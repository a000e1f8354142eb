"""kubernetes.workload infer-operator: the release's InferServiceSet (mindcluster.huawei.com/v1), read back (pure,
over the API's dicts).

MindCluster's Infer Operator makes, for an InferServiceSet `<iss>` of `replicas` InferServices, InferServices
`<iss>-<i>`, per role an InstanceSet `<iss>-<i>-<role>` and `role.replicas` workloads `<iss>-<i>-<role>-<idx>`
(Ascend/mind-cluster@22bb3d98 component/infer-operator/pkg/controller/v1/inferserviceset_controller.go L404-415,
inferservice_controller.go L518-526, pkg/common/utils.go L80-82); a StatefulSet's pods are `<workload>-<k>`. It
reports `Ready` conditions (reason AllInferServicesReady / ReplicasNotReady, inferserviceset_controller.go
L270-310) and readyReplicas of replicas.
"""

from __future__ import annotations

from collections.abc import Iterator

KIND = "InferServiceSet"
GROUP, VERSION, PLURAL = "mindcluster.huawei.com", "v1", "inferservicesets"
HINT = ("install MindCluster's Infer Operator (MindCluster 26.1: component infer-operator with its CRDs), or set "
        "kubernetes.workload: statefulset")


def _roles(doc: dict) -> list[dict]:
    roles = (((doc.get("spec") or {}).get("template") or {}).get("roles")) or []
    return [r for r in roles[:64] if isinstance(r, dict)]


def pod_templates(doc: dict) -> list[tuple[dict, int]]:
    """(pod template, pods made from it) of each role: role.replicas workloads of spec.replicas pods, for each of
    the set's InferServices."""
    copies = int((doc.get("spec") or {}).get("replicas", 1))
    out = []
    for role in _roles(doc):
        spec = role.get("spec") or {}
        out.append((spec.get("template") or {}, copies * int(role.get("replicas", 1)) * int(spec.get("replicas", 1))))
    return out


def pod_names(doc: dict) -> Iterator[tuple[str, dict]]:
    """Each pod's name (a StatefulSet's) and the pod template it is made from."""
    name = doc["metadata"]["name"]
    for i in range(int((doc.get("spec") or {}).get("replicas", 1))):
        for role in _roles(doc):
            spec = role.get("spec") or {}
            for idx in range(int(role.get("replicas", 1))):
                for k in range(int(spec.get("replicas", 1))):
                    yield f"{name}-{i}-{role.get('name')}-{idx}-{k}", spec.get("template") or {}


def status_lines(objects: list[dict]) -> list[str]:
    """What `status` says of the release's InferServiceSet: InferServices ready of desired, its Ready condition."""
    from deployctl.backends.k8s.gang import _text

    out = []
    for o in objects:
        if o.get("kind") != KIND:
            continue
        status = o.get("status") or {}
        cond = next((c for c in (status.get("conditions") or [])[:16]
                     if isinstance(c, dict) and c.get("type") == "Ready"), {})
        out.append(f"InferServiceSet {_text(o['metadata'].get('name'))}: {_text(status.get('readyReplicas') or 0)}/"
                   f"{_text((o.get('spec') or {}).get('replicas', 1))} InferService(s) ready"
                   + (f", Ready={_text(cond.get('status'))} ({_text(cond.get('reason'))})" if cond else
                      " (no Ready condition: is the Infer Operator running?)"))
    return out
