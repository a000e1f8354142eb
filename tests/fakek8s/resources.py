"""The resource types the fake API server knows, and the discovery documents built from them.

Only what deployctl's chart, helm 3.10 and the `kubernetes` Python client need: a request for any other
group, version or resource gets a 404 `Status`, as a real server without that API would answer.
"""

from __future__ import annotations

from dataclasses import dataclass

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
SUB_VERBS = ("get", "patch", "update")

KUBE_VERSION = {
    "major": "1",
    "minor": "28",
    "gitVersion": "v1.28.4",
    "gitCommit": "bae2c62678db2b5053817bc97181fcc2e8388103",
    "gitTreeState": "clean",
    "buildDate": "2023-11-15T16:48:54Z",
    "goVersion": "go1.20.11",
    "compiler": "gc",
    "platform": "linux/arm64",
}


@dataclass(frozen=True)
class Resource:
    group: str            # "" for the core group
    version: str
    plural: str           # the URL segment, e.g. "statefulsets"
    kind: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    subresources: tuple[str, ...] = ()   # "status", "scale", "log"

    @property
    def group_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def qualified(self) -> str:
        """How error messages name the resource: `configmaps`, `statefulsets.apps`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def qualified_kind(self) -> str:
        """How Invalid errors name the kind: `ConfigMap`, `StatefulSet.apps`."""
        return f"{self.kind}.{self.group}" if self.group else self.kind


def _r(group, version, plural, kind, namespaced=True, short=(), sub=()):
    return Resource(group, version, plural, kind, namespaced, tuple(short), tuple(sub))


RESOURCES: list[Resource] = [
    # core/v1
    _r("", "v1", "configmaps", "ConfigMap", short=["cm"]),
    _r("", "v1", "endpoints", "Endpoints", short=["ep"]),
    _r("", "v1", "events", "Event", short=["ev"]),
    _r("", "v1", "limitranges", "LimitRange", short=["limits"]),
    _r("", "v1", "namespaces", "Namespace", namespaced=False, short=["ns"], sub=["status", "finalize"]),
    _r("", "v1", "nodes", "Node", namespaced=False, short=["no"], sub=["status"]),
    _r("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", short=["pvc"], sub=["status"]),
    _r("", "v1", "persistentvolumes", "PersistentVolume", namespaced=False, short=["pv"], sub=["status"]),
    _r("", "v1", "pods", "Pod", short=["po"], sub=["status", "log"]),
    _r("", "v1", "podtemplates", "PodTemplate"),
    _r("", "v1", "resourcequotas", "ResourceQuota", short=["quota"], sub=["status"]),
    _r("", "v1", "secrets", "Secret"),
    _r("", "v1", "serviceaccounts", "ServiceAccount", short=["sa"]),
    _r("", "v1", "services", "Service", short=["svc"], sub=["status"]),
    # apps/v1
    _r("apps", "v1", "controllerrevisions", "ControllerRevision"),
    _r("apps", "v1", "daemonsets", "DaemonSet", short=["ds"], sub=["status"]),
    _r("apps", "v1", "deployments", "Deployment", short=["deploy"], sub=["status", "scale"]),
    _r("apps", "v1", "replicasets", "ReplicaSet", short=["rs"], sub=["status", "scale"]),
    _r("apps", "v1", "statefulsets", "StatefulSet", short=["sts"], sub=["status", "scale"]),
    # batch/v1
    _r("batch", "v1", "cronjobs", "CronJob", short=["cj"], sub=["status"]),
    _r("batch", "v1", "jobs", "Job", sub=["status"]),
    # policy/v1
    _r("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget", short=["pdb"], sub=["status"]),
    # rbac.authorization.k8s.io/v1
    _r("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", namespaced=False),
    _r("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", namespaced=False),
    _r("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    _r("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    # networking.k8s.io/v1
    _r("networking.k8s.io", "v1", "ingressclasses", "IngressClass", namespaced=False),
    _r("networking.k8s.io", "v1", "ingresses", "Ingress", short=["ing"], sub=["status"]),
    _r("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", short=["netpol"]),
    # autoscaling/v2
    _r("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler", short=["hpa"], sub=["status"]),
    # storage.k8s.io/v1
    _r("storage.k8s.io", "v1", "storageclasses", "StorageClass", namespaced=False, short=["sc"]),
    # coordination.k8s.io/v1 (leader election; deployctl's deployment lock)
    _r("coordination.k8s.io", "v1", "leases", "Lease"),
]

BY_PATH: dict[tuple[str, str], Resource] = {(r.group_version, r.plural): r for r in RESOURCES}
BY_KIND: dict[tuple[str, str], Resource] = {(r.group_version, r.kind): r for r in RESOURCES}


def group_versions() -> dict[str, list[str]]:
    """{group: [versions]} for the named groups, in the order they are declared."""
    groups: dict[str, list[str]] = {}
    for r in RESOURCES:
        if r.group and r.version not in groups.setdefault(r.group, []):
            groups[r.group].append(r.version)
    return groups


def api_versions(server_address: str) -> dict:
    return {"kind": "APIVersions", "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}]}


def api_group(group: str) -> dict:
    versions = [{"groupVersion": f"{group}/{v}", "version": v} for v in group_versions()[group]]
    return {"kind": "APIGroup", "apiVersion": "v1", "name": group, "versions": versions,
            "preferredVersion": versions[0]}


def api_group_list() -> dict:
    groups = [api_group(g) for g in group_versions()]
    for g in groups:
        del g["kind"], g["apiVersion"]
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_resource_list(group_version: str) -> dict | None:
    resources = []
    for r in RESOURCES:
        if r.group_version != group_version:
            continue
        entry = {"name": r.plural, "singularName": r.kind.lower(), "namespaced": r.namespaced, "kind": r.kind,
                 "verbs": list(ALL_VERBS if r.plural != "namespaces" else
                               [v for v in ALL_VERBS if v != "deletecollection"])}
        if r.short_names:
            entry["shortNames"] = list(r.short_names)
        resources.append(entry)
        for sub in r.subresources:
            s = {"name": f"{r.plural}/{sub}", "singularName": "", "namespaced": r.namespaced, "kind": r.kind,
                 "verbs": list(SUB_VERBS)}
            if sub == "scale":
                s.update(group="autoscaling", version="v1", kind="Scale")
            elif sub == "log":
                s["verbs"] = ["get"]
            elif sub == "finalize":
                s["verbs"] = ["update"]
            resources.append(s)
    if not resources:
        return None
    return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}
