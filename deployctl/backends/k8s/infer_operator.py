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


def roles(doc: dict) -> list[dict]:
    roles = (((doc.get("spec") or {}).get("template") or {}).get("roles")) or []
    return [r for r in roles[:64] if isinstance(r, dict)]


def pod_templates(doc: dict) -> list[tuple[dict, int]]:
    """(pod template, pods made from it) of each role: role.replicas workloads of spec.replicas pods, for each of
    the set's InferServices."""
    copies = int((doc.get("spec") or {}).get("replicas", 1))
    out = []
    for role in roles(doc):
        spec = role.get("spec") or {}
        out.append((spec.get("template") or {}, copies * int(role.get("replicas", 1)) * int(spec.get("replicas", 1))))
    return out


def pod_names(doc: dict) -> Iterator[tuple[str, dict]]:
    """Each pod's name (a StatefulSet's) and the pod template it is made from."""
    name = doc["metadata"]["name"]
    for i in range(int((doc.get("spec") or {}).get("replicas", 1))):
        for role in roles(doc):
            spec = role.get("spec") or {}
            for idx in range(int(role.get("replicas", 1))):
                for k in range(int(spec.get("replicas", 1))):
                    yield f"{name}-{i}-{role.get('name')}-{idx}-{k}", spec.get("template") or {}


from deployctl.backends.k8s.lws import TEMPLATE_HASH      # the chart's hash of a role's pod template
_OP = "infer.huawei.com/"
# on every workload the operator makes (pkg/common/constant.go, utils.go L63-70); the release's own label is not
MADE_BY_OPERATOR = f"{_OP}ascend-infer-operator=true"
# on every InstanceSet the operator makes (inferservice_controller.go L478-527); not the release's label either
OPERATOR_KEY = f"{_OP}inferservice-name"


def _wanted(rendered: list[dict]) -> dict[tuple[str, str], tuple[str, str]]:
    """(InferService, role) -> (deployctl instance, the rendered pod template's hash), for every InferService the
    rendered InferServiceSets make."""
    want: dict[tuple[str, str], tuple[str, str]] = {}
    for doc in rendered:
        if doc.get("kind") != KIND:
            continue
        for i in range(int((doc.get("spec") or {}).get("replicas", 1))):
            for role in roles(doc):
                inst = ((role.get("metadata") or {}).get("labels") or {}).get("deployctl.io/instance", "")
                want[(f"{doc['metadata']['name']}-{i}", str(role.get("name")))] = (inst, _digest(role.get("spec")))
    return want


def _digest(spec) -> str:
    """The chart's hash annotation of the pod template in a role's (or an InstanceSet's role's) spec."""
    meta = _dict(_dict(_dict(spec).get("template")).get("metadata"))
    return str(_dict(meta.get("annotations")).get(TEMPLATE_HASH, ""))


def _key(obj: dict) -> tuple[str, str]:
    """(InferService, role) of an object the operator made, by its labels (pkg/common/utils.go L63-70)."""
    labels = _dict(_dict(obj.get("metadata")).get("labels"))
    return str(labels.get(f"{_OP}inferservice-name", "")), str(labels.get(f"{_OP}instanceset-name", ""))


def _dict(value) -> dict:
    """An API answer's object, or {} where it holds something else (read as nothing, never raised on)."""
    return value if isinstance(value, dict) else {}


def stale_workloads(rendered: list[dict], statefulsets: list[dict]) -> dict[str, list[dict]]:
    """The operator's StatefulSets to replace, by instance: the operator never updates a workload it made
    (Ascend/mind-cluster@22bb3d98 pkg/controller/workload/statefulset_handler.go L111-155: it creates the missing
    ones only), so an instance with a role whose workload runs another pod template than the rendered one is
    restarted by deleting all of its workloads, which the operator makes again from the new spec."""
    want = _wanted(rendered)
    mine: dict[str, list[dict]] = {}
    stale: set[str] = set()
    for sts in statefulsets:
        key = _key(sts)
        if key not in want:
            continue
        inst, digest = want[key]
        mine.setdefault(inst, []).append(sts)
        if _digest(sts.get("spec")) != digest:
            stale.add(inst)
    return {inst: mine[inst] for inst in sorted(stale)}


def instancesets_behind(rendered: list[dict], instancesets: list[dict], instances: set[str]) -> list[str]:
    """The InstanceSets (`<InferService>-<role>`) of these instances that do not hold the rendered pod template yet.

    A changed role reaches the workloads' InstanceSet over the operator's reconciles (InferServiceSet -> InferService,
    inferserviceset_controller.go L404-416; InferService -> InstanceSet spec, inferservice_controller.go L369-405), and a
    deleted workload is made again from the InstanceSet's spec as it is then (statefulset_handler.go L157-226): a
    workload deleted before its InstanceSet holds the new template comes back with the old one."""
    have = {_key(ist): _digest(_dict(ist.get("spec")).get("spec")) for ist in instancesets}
    return sorted(f"{svc}-{role}" for (svc, role), (inst, digest) in _wanted(rendered).items()
                  if inst in instances and have.get((svc, role)) != digest)


def status_lines(objects: list[dict]) -> list[str]:
    """What `status` says of the release's InferServiceSet: InferServices ready of desired, its Ready condition."""
    from deployctl.backends.k8s.readback import condition, count_line, text

    out = []
    for o in (o for o in objects if o.get("kind") == KIND):
        cond = condition(o, "Ready")
        out.append(count_line(o, "InferService(s)", (o.get("status") or {}).get("readyReplicas"),
                              (o.get("spec") or {}).get("replicas", 1))
                   + (f", Ready={text(cond.get('status'))} ({text(cond.get('reason'))})" if cond else
                      " (no Ready condition: is the Infer Operator running?)"))
    return out
