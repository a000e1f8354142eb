"""Cluster scalers on a release's workloads, and replica counts changed outside deployctl (pure, over the API's
dicts).

Every Kubernetes scaler adds capacity by copying a template: an HPA (autoscaling/v2) sets `spec.replicas` through
a workload's /scale subresource, and the workload's controller makes one more copy of its pod template: one more
pod of a StatefulSet, one more group of a LeaderWorkerSet (kubernetes-sigs/lws@v0.9.0
api/leaderworkerset/v1/leaderworkerset_types.go L112-118, L381-385, L416: /scale on .spec.replicas, selector
.status.hpaPodSelector, the group leaders), one more workload of an Infer Operator InstanceSet, whose HPA the
operator makes from a role's `scalingPolicy` (Ascend/mind-cluster@22bb3d98 component/infer-operator
pkg/controller/scaling/scaling_manager.go L80-117, L227-229: `<instanceset>-scaler`, targeting the InstanceSet).

No copy of what deployctl renders is a working instance: each instance is one HCCL world whose pods are pinned to
its servers (required node affinity, one engine pod a server) and whose files name those servers' addresses
(rank tables, --host, the master's address). So deployctl renders no scaler, `up` refuses to run while one
targets the release's workloads (they would flip: helm sets the count, the scaler sets it back), and a count
changed without a scaler (`kubectl scale`) is put back: helm leaves it on a custom resource, whose upgrade patch
is a two-way merge of the old and new manifests (helm v3.22.0 pkg/kube/client.go L687-703), so an unchanged
`replicas: 1` is never sent. docs/kubernetes.md "Scaling: who owns what" says this to users.
"""

from __future__ import annotations

from dataclasses import dataclass

from deployctl.backends.k8s import infer_operator, lws
from deployctl.core.errors import Problem

INSTANCE_SET = "InstanceSet"      # what the Infer Operator makes per role (mindcluster.huawei.com/v1)
MAX_SCALERS = 1000                # HPAs of a namespace read, at most (the objects are the cluster's: bounded)

# why another replica of each kind the release makes (or the operator makes from it) cannot serve
WHY = {
    "StatefulSet": "its replicas are the servers of one instance (one HCCL world): another replica is a rank "
                   "that world does not have, pinned to a server another pod holds",
    "Deployment": "it runs one pod pinned to a node on the host network (a router, a proxy or a P/D "
                  "controller): another replica cannot bind its ports",
    lws.KIND: "each group is one instance bound to its servers: another group is a copy bound to the same ones, "
              "pinned there (it stays Pending: the first group holds their NPUs and host ports) or, with "
              "kubernetes.rank_table cluster, reading the first group's rank table",
    INSTANCE_SET: "its role is an instance's master or its other servers: another workload of the role is a "
                  "master without workers (or workers without a master), pinned to the servers the first holds",
}
GROUPS = {"StatefulSet": "apps", "Deployment": "apps", lws.KIND: lws.GROUP, INSTANCE_SET: infer_operator.GROUP}
HINT = ("{how}: deployctl's instances are bound to their servers, so their count is the inventory's (`deployctl "
        "plan` shows it); docs/kubernetes.md, \"Scaling: who owns what\"")


def targets(docs: list[dict]) -> dict[tuple[str, str], str]:
    """(kind, name) -> the instance (or component) of every object of the release a scaler could scale: its
    StatefulSets, Deployments and LeaderWorkerSets, and the InstanceSets `<iss>-<i>-<role>` the Infer Operator
    makes of its InferServiceSet (infer_operator.py)."""
    out: dict[tuple[str, str], str] = {}
    for doc in docs:
        kind, meta = doc.get("kind"), doc.get("metadata") or {}
        labels = meta.get("labels") or {}
        if kind in ("StatefulSet", "Deployment", lws.KIND):
            out[(kind, meta.get("name", ""))] = labels.get("deployctl.io/instance") or \
                labels.get("app.kubernetes.io/component", "")
        elif kind == infer_operator.KIND:
            for i in range(int((doc.get("spec") or {}).get("replicas", 1))):
                for role in infer_operator.roles(doc):
                    inst = ((role.get("metadata") or {}).get("labels") or {}).get("deployctl.io/instance", "")
                    out[(INSTANCE_SET, f"{meta.get('name')}-{i}-{role.get('name')}")] = inst
    return out


def _group(api_version: object) -> str:
    text = str(api_version or "")
    return text.rpartition("/")[0] if "/" in text else ""


def foreign_scalers(docs: list[dict], hpas: list[dict]) -> list[Problem]:
    """One problem per HorizontalPodAutoscaler whose scaleTargetRef is one of the release's workloads (``docs``:
    the rendered objects; ``hpas``: the namespace's, as the API server returned them)."""
    from deployctl.backends.k8s.readback import text

    mine = targets(docs)
    out = []
    for hpa in hpas[:MAX_SCALERS]:
        if not isinstance(hpa, dict):
            continue
        spec = hpa.get("spec") or {}
        ref = spec.get("scaleTargetRef") or {}
        key = (str(ref.get("kind") or ""), str(ref.get("name") or ""))
        if key not in mine or _group(ref.get("apiVersion")) != GROUPS[key[0]]:
            continue
        name, ns = text((hpa.get("metadata") or {}).get("name")), text((hpa.get("metadata") or {}).get("namespace"))
        bounds = f"min {text(spec.get('minReplicas', 1))}, max {text(spec.get('maxReplicas'))}"
        owner = ((hpa.get("metadata") or {}).get("labels") or {}).get("infer.huawei.com/scaling-owned-by")
        made = " (made by the Infer Operator from a role's scalingPolicy)" if owner else ""
        how = ("remove the scalingPolicy deployctl did not render from the InferServiceSet's role (`kubectl edit "
               "iss`; the operator makes the HPA again while the role has one)" if owner else
               f"delete it (`kubectl delete hpa {name}" + (f" -n {ns}" if ns else "") + "`)")
        out.append(Problem(f"HorizontalPodAutoscaler {name}{made} scales {key[0]} {text(key[1])} ({bounds}) of "
                           f"instance {text(mine[key]) or '?'}: {WHY[key[0]]}",
                           path=f"HorizontalPodAutoscaler/{name}", hint=HINT.format(how=how)))
    return out


@dataclass(frozen=True)
class Rescaled:
    """A workload of the release whose live replica count is not the rendered one."""

    kind: str
    name: str
    live: int
    rendered: int

    def line(self) -> str:
        return (f"{self.kind} {self.name} was scaled to {self.live} outside deployctl (kubectl scale or an "
                f"autoscaler): back to {self.rendered}, {WHY[self.kind]}")


def rescaled(docs: list[dict], live: list[dict]) -> list[Rescaled]:
    """The release's LeaderWorkerSets whose live spec.replicas differs from the rendered one: helm's upgrade of a
    custom resource leaves such a change (see the module's doc), where it puts a StatefulSet's or Deployment's
    back itself (a three-way strategic merge)."""
    have = {o["metadata"]["name"]: o for o in live if o.get("kind") == lws.KIND and o.get("metadata")}
    out = []
    for doc in docs:
        if doc.get("kind") != lws.KIND or doc["metadata"]["name"] not in have:
            continue
        want = int((doc.get("spec") or {}).get("replicas", 1))
        now = (have[doc["metadata"]["name"]].get("spec") or {}).get("replicas", 1)
        if isinstance(now, int) and not isinstance(now, bool) and now != want:
            out.append(Rescaled(lws.KIND, doc["metadata"]["name"], now, want))
    return out
