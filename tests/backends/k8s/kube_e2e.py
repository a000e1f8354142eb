"""Helpers of the `--target k8s` end-to-end tests: example inventories pointed at the real test cluster
(tests/k8scluster.py, fixtures k8s_cluster and k8s_ns in tests/conftest.py), its simulated nodes, the
deployctl CLI with the cluster's kubeconfig and the helm built from modules, and what the API server's
audit log says was written."""

from __future__ import annotations

from pathlib import Path

import yaml

from conftest import EXAMPLES, run_cli
from k8scluster import FAULT_PODS, NPU, KubeCluster  # noqa: F401 - FAULT_PODS, NPU: for the tests


READY = "120"      # --ready-timeout of the runs that must succeed: pods are Ready in about a second
WAIT = 240         # seconds for anything the tests wait for themselves: the machine is small and may be busy


def inventory(tmp_path: Path, stem: str, cluster: KubeCluster, ns: str, values: dict | None = None,
              extra: str = "", name: str | None = None) -> Path:
    """The example inventory with kubernetes.namespace/kubeconfig of the test cluster (and
    kubernetes.values, e.g. {"podAnnotations": {FAULT_PODS: "<pod>=never-ready"}})."""
    text = (EXAMPLES / f"{stem}.yaml").read_text().replace("hccn/", str(EXAMPLES / "hccn") + "/")
    block = {"namespace": ns, "kubeconfig": str(cluster.kubeconfig)}
    if values:
        block["values"] = values
    path = tmp_path / f"{name or stem}.yaml"
    path.write_text(text + "\n" + yaml.safe_dump({"kubernetes": block}, sort_keys=False) + extra)
    return path


def servers(cluster: KubeCluster, stem: str, skip: tuple[str, ...] = (), ip_of: dict | None = None,
            npus: dict | None = None) -> list[dict]:
    """Register the example's servers as simulated Nodes (replacing earlier nodes of the same names, so
    each test gets the IPs and NPUs it asks for); the ones in ``skip`` are removed if present."""
    gone = [n for n in skip if cluster.get(f"/api/v1/nodes/{n}") is not None]
    if gone:
        cluster.remove_nodes(gone)
    items = cluster.nodes_from_inventory(EXAMPLES / f"{stem}.yaml", skip=skip, ip_of=ip_of)
    for item in items:
        if item["name"] in (npus or {}):
            item["npus"] = npus[item["name"]]
    return cluster.add_nodes(items)


def cli(tmp_path: Path, cluster: KubeCluster, *args: str):
    """deployctl as users run it, with the test cluster's kubeconfig and helm."""
    return run_cli(*args, cwd=tmp_path, env={"HOME": str(tmp_path / "home"), **cluster.env()})


IGNORED = ("Secret", "Pod", "Namespace", "Event", "Lease")


def created(writes: list[dict]) -> set[tuple[str, str]]:
    """(kind, name) of every object created (HTTP 201) in these audit-log writes, helm's release Secrets,
    pods, the namespace and deployctl's Lease (its lock) aside."""
    return {(w["kind"], w["name"]) for w in writes
            if w["verb"] == "create" and w["code"] == 201 and not w["subresource"] and w["kind"] not in IGNORED}


def rendered_objects(tmp_path: Path, cluster: KubeCluster, inv: Path) -> set[tuple[str, str]]:
    res = cli(tmp_path, cluster, "render", "-t", "helm", "-i", str(inv), "-o", str(tmp_path / "r"), "--force")
    assert res.returncode == 0, res.stderr
    docs = [d for d in yaml.safe_load_all((tmp_path / "r" / "manifests.yaml").read_text()) if d]
    return {(d["kind"], d["metadata"]["name"]) for d in docs
            if "helm.sh/hook" not in (d["metadata"].get("annotations") or {})}


PATHS = {"ConfigMap": "/api/v1/namespaces/{ns}/configmaps", "Secret": "/api/v1/namespaces/{ns}/secrets",
         "Service": "/api/v1/namespaces/{ns}/services", "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
         "Pod": "/api/v1/namespaces/{ns}/pods", "StatefulSet": "/apis/apps/v1/namespaces/{ns}/statefulsets",
         "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments",
         "PodDisruptionBudget": "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
         "Lease": "/apis/coordination.k8s.io/v1/namespaces/{ns}/leases",
         "LeaderWorkerSet": "/apis/leaderworkerset.x-k8s.io/v1/namespaces/{ns}/leaderworkersets",
         "InferServiceSet": "/apis/mindcluster.huawei.com/v1/namespaces/{ns}/inferservicesets",
         "PodGroup": "/apis/scheduling.volcano.sh/v1beta1/namespaces/{ns}/podgroups"}


def contains(live, want, path: str = "") -> list[str]:
    """Where ``live`` (what the API server returned) differs from ``want`` (what was rendered), fields the server
    added aside: a field pruned or changed is a difference."""
    if isinstance(want, dict):
        if not isinstance(live, dict):
            return [f"{path}: {live!r} is not a mapping"]
        return [d for k, v in want.items() for d in contains(live.get(k, ...), v, f"{path}.{k}")]
    if isinstance(want, list):
        if not isinstance(live, list) or len(live) != len(want):
            return [f"{path}: {live!r} != {want!r}"]
        return [d for i, (a, b) in enumerate(zip(live, want)) for d in contains(a, b, f"{path}[{i}]")]
    return [] if live == want else [f"{path}: {live!r} != {want!r}"]


def accepted(cluster: KubeCluster, ns: str, docs: list[dict]) -> list[str]:
    """Each rendered object sent to the API server as a server-side dry run with strict field validation (admission
    webhooks included): the problems, empty when every object is accepted and comes back with every rendered field
    as rendered."""
    problems = []
    for doc in docs:
        path = PATHS[doc["kind"]].format(ns=ns) + "?dryRun=All&fieldValidation=Strict"
        status, body = cluster.request("POST", path, doc)
        name = f"{doc['kind']} {doc['metadata']['name']}"
        if status not in (200, 201):
            problems.append(f"{name}: HTTP {status}: {str(body)[:600]}")
            continue
        problems += [f"{name}{d}" for d in contains(body, {k: v for k, v in doc.items() if k != "status"})]
    return problems


def objects(cluster: KubeCluster, kind: str, ns: str) -> list[dict]:
    return (cluster.get(PATHS[kind].format(ns=ns)) or {}).get("items", [])


def get(cluster: KubeCluster, kind: str, ns: str, name: str) -> dict | None:
    return cluster.get(PATHS[kind].format(ns=ns) + "/" + name)


def leases(cluster: KubeCluster, ns: str) -> list[dict]:
    return objects(cluster, "Lease", ns)


def helm_revisions(cluster: KubeCluster, ns: str) -> list[int]:
    """helm's release records (Secrets sh.helm.release.v1.<release>.v<N>, label owner=helm)."""
    return sorted(int(s["metadata"]["labels"]["version"]) for s in objects(cluster, "Secret", ns)
                  if (s["metadata"].get("labels") or {}).get("owner") == "helm")


def resource_versions(cluster: KubeCluster, ns: str) -> dict[tuple[str, str], tuple[str, int | None]]:
    """(kind, name) -> (resourceVersion, generation) of everything deployctl and helm write in the namespace."""
    out = {}
    for kind in ("ConfigMap", "Secret", "Service", "ServiceAccount", "StatefulSet", "Deployment",
                 "PodDisruptionBudget", "Lease"):
        for o in objects(cluster, kind, ns):
            out[(kind, o["metadata"]["name"])] = (o["metadata"]["resourceVersion"], o["metadata"].get("generation"))
    return out


CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def install_crds(cluster: KubeCluster, path: Path) -> list[str]:
    """Create the CRDs of a file that are missing, wait until they are established and served: their names."""
    names = []
    for crd in yaml.safe_load_all(path.read_text()):
        name = crd["metadata"]["name"]
        if cluster.get(f"{CRD_PATH}/{name}") is None:
            cluster.create(CRD_PATH, crd)
        names.append(name)
    for name in names:
        cluster.wait_for(f"CRD {name} established", lambda name=name: any(
            c["type"] == "Established" and c["status"] == "True"
            for c in ((cluster.get(f"{CRD_PATH}/{name}") or {}).get("status") or {}).get("conditions") or []),
            timeout=60)
    for crd in yaml.safe_load_all(path.read_text()):      # served: a new CRD's storage answers 429 for a moment
        spec = crd["spec"]
        url = f"/apis/{spec['group']}/{spec['versions'][0]['name']}/{spec['names']['plural']}"
        cluster.wait_for(f"{url} served", lambda url=url: cluster.request("GET", url)[0] == 200, timeout=60)
    return names


def remove_crds(cluster: KubeCluster, names: list[str]) -> None:
    """Delete these CRDs and wait until they are gone."""
    for name in names:
        cluster.delete(f"{CRD_PATH}/{name}")
    for name in names:
        cluster.wait_for(f"CRD {name} gone", lambda name=name: cluster.get(f"{CRD_PATH}/{name}") is None, timeout=120)


def engine_pods(cluster: KubeCluster, ns: str) -> dict[str, dict]:
    """The engine pods of the namespace (not the router, proxy or MindIE-MS), by name."""
    return {p["metadata"]["name"]: p for p in objects(cluster, "Pod", ns)
            if (p["metadata"].get("labels") or {}).get("app.kubernetes.io/component") == "engine"}


def is_ready(pod: dict) -> bool:
    """Ready, and not being deleted."""
    return not pod["metadata"].get("deletionTimestamp") and any(
        c["type"] == "Ready" and c["status"] == "True" for c in (pod.get("status") or {}).get("conditions") or [])
