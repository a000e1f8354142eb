"""A real Kubernetes control plane for tests: etcd, kube-apiserver, kube-controller-manager, kube-scheduler
and kwok (simulated nodes and pods), built from Go modules by scripts/k8s-test-cluster, plus the helm built
the same way. See docs/dev/k8s-test-cluster.md.

Use it as a pytest fixture (the function is a plain generator, so the scope is the user's choice):

    import pytest
    from k8scluster import cluster_fixture
    k8s_cluster = pytest.fixture(scope="session")(cluster_fixture)

    def test_something(k8s_cluster):
        k8s_cluster.add_nodes([{"name": "a3-node1", "ip": "10.201.0.2", "accelerator_type": "module-a3-16"}])
        ns = k8s_cluster.create_namespace("t-something")
        k8s_cluster.helm_run("upgrade", "--install", "rel", chart, "-n", ns, "--wait")
        subprocess.run(["deployctl", ..., ], env={**os.environ, **k8s_cluster.env()})

The fixture builds the binaries if needed (under a second when they are already built; a cold build takes
about 14 minutes on 2 cores), starts a cluster in a new temporary directory on free 127.0.0.1 ports, and on
teardown stops every process and removes the directory (it fails if something is left). A watchdog stops
the cluster by itself if the test process dies without tearing down.

The yielded KubeCluster has: kubeconfig (Path, admin user, system:masters), server (https URL), helm (Path),
version ("v1.36.3"), lws (the LeaderWorkerSet release, e.g. "v0.9.0", when started with lws=True; else
None), dir, bin_dir; add_nodes(), remove_nodes(), nodes_from_inventory(), create_namespace(),
delete_namespace(), request()/get()/create()/patch()/delete() on the API (JSON, stdlib), wait_for(), pod(),
pods(), events_for(), helm_run(), env(), and audit_mark()/writes(): the admin's writes from the API server's
audit log (what a command created, changed or deleted).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "k8s-test-cluster"
NPU = "huawei.com/Ascend910"
FAULT_LABEL = "deployctl.test/fault"        # value crash | never-ready | image-pull (scripts/k8s/stages)
FAULT_PODS = "deployctl.test/fault-pods"    # annotation "<pod name>=<fault>[,...]": one pod of a StatefulSet
# audit objectRef.resource -> kind, for what deployctl and helm write
KINDS = {"configmaps": "ConfigMap", "secrets": "Secret", "services": "Service", "serviceaccounts": "ServiceAccount",
         "statefulsets": "StatefulSet", "deployments": "Deployment", "poddisruptionbudgets": "PodDisruptionBudget",
         "pods": "Pod", "leases": "Lease", "namespaces": "Namespace", "events": "Event", "jobs": "Job",
         "replicasets": "ReplicaSet", "controllerrevisions": "ControllerRevision"}
BUILD_TIMEOUT = float(os.environ.get("DEPLOYCTL_K8S_BUILD_TIMEOUT", 4 * 3600))


def _load_tool():
    loader = importlib.machinery.SourceFileLoader("deployctl_k8s_test_cluster", str(SCRIPT))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


tool = _load_tool()          # the script's own Api, node_manifest, register_nodes, pins


class ClusterError(RuntimeError):
    pass


def _script(*args: str, timeout: float, bin_dir: Path | None = None) -> subprocess.CompletedProcess:
    cmd = [sys.executable, str(SCRIPT), *(["--bin", str(bin_dir)] if bin_dir else []), *args]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired as exc:
        raise ClusterError(f"{' '.join(cmd)} timed out after {timeout:.0f}s:\n{exc.stderr or ''}") from None


def build_binaries(bin_dir: Path | None = None) -> Path:
    """scripts/k8s-test-cluster build (a no-op taking well under a second when up to date)."""
    r = _script("build", timeout=BUILD_TIMEOUT, bin_dir=bin_dir)
    if r.returncode != 0:
        raise ClusterError("building the Kubernetes test binaries failed (scripts/k8s-test-cluster build):\n"
                           + (r.stdout + r.stderr)[-6000:])
    return (bin_dir or Path(os.environ.get("DEPLOYCTL_K8S_BIN") or tool.DEFAULT_BIN)).resolve()


class KubeCluster:
    def __init__(self, state: dict):
        self.state = state
        self.dir = Path(state["dir"])
        self.kubeconfig = Path(state["kubeconfig"])
        self.server: str = state["server"]
        self.helm = Path(state["helm"])
        self.bin_dir = Path(state["bin"])
        self.version: str = state["kubernetes_version"]
        self.startup_seconds: float = state["startup_seconds"]
        self.lws: str | None = state.get("lws")
        self.api = tool.Api(self.server, self.dir / "pki")
        self._stopped = False

    # ---- raw API (JSON) -------------------------------------------------------------------------
    def request(self, method: str, path: str, body=None, **kw) -> tuple[int, dict | str]:
        """(HTTP status, decoded JSON body) of one API call as the cluster admin."""
        return self.api.request(method, path, body, **kw)

    def get(self, path: str) -> dict | None:
        """The object at that API path, None on 404."""
        return self.api.get(path)

    def create(self, path: str, obj: dict) -> dict:
        status, body = self.request("POST", path, obj)
        if status not in (200, 201, 202):
            raise ClusterError(f"POST {path}: HTTP {status}: {body}")
        return body

    def patch(self, path: str, patch: dict, kind: str = "merge") -> dict:
        ctype = {"merge": "application/merge-patch+json", "strategic": "application/strategic-merge-patch+json",
                 "json": "application/json-patch+json"}[kind]
        status, body = self.request("PATCH", path, patch, content_type=ctype)
        if status != 200:
            raise ClusterError(f"PATCH {path}: HTTP {status}: {body}")
        return body

    def delete(self, path: str, body: dict | None = None) -> tuple[int, dict | str]:
        return self.request("DELETE", path, body)

    def wait_for(self, what: str, check: Callable[[], object], timeout: float = 180, interval: float = 0.3):
        """Poll check() until it returns something truthy (returned); ClusterError after timeout."""
        deadline = time.monotonic() + timeout
        last = None
        while True:
            last = check()
            if last:
                return last
            if time.monotonic() > deadline:
                raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
            time.sleep(interval)

    # ---- the audit log: every write of the admin user (deployctl, helm and the tests) -------------
    @property
    def audit_log(self) -> Path:
        return self.dir / "logs" / "audit.log"

    def audit_mark(self) -> int:
        """A position in the audit log: writes(since=mark) returns what was written after it."""
        time.sleep(0.5)                  # let the lines of requests answered just before land first
        return self.audit_log.stat().st_size if self.audit_log.exists() else 0

    def writes(self, since: int = 0, namespace: str | None = None, settle: float = 1.0) -> list[dict]:
        """The admin's write requests (create, update, patch, delete) since an audit_mark(), oldest first:
        dicts with verb, resource, kind, subresource, namespace, name, code, user, uri. The API server
        logs a request when it completed, which may be just after the client got its answer: ``settle``
        seconds are waited first."""
        time.sleep(settle)
        if not self.audit_log.exists():
            return []
        with self.audit_log.open("rb") as f:
            f.seek(since)
            lines = f.read().decode(errors="replace").splitlines()
        out = []
        for line in lines:
            try:
                e = json.loads(line)
            except ValueError:
                continue                  # a line still being written
            ref = e.get("objectRef") or {}
            if namespace is not None and ref.get("namespace") != namespace:
                continue
            out.append({"verb": e.get("verb"), "resource": ref.get("resource"),
                        "kind": KINDS.get(ref.get("resource", ""), ref.get("resource")),
                        "subresource": ref.get("subresource", ""), "namespace": ref.get("namespace"),
                        "name": ref.get("name"), "code": (e.get("responseStatus") or {}).get("code"),
                        "user": (e.get("user") or {}).get("username"), "uri": e.get("requestURI")})
        return out

    # ---- nodes ----------------------------------------------------------------------------------
    def add_nodes(self, nodes: Iterable[dict], timeout: float = 180) -> list[dict]:
        """Register simulated Ascend nodes and wait until kwok made them Ready (untainted).

        Each item: name, ip (or address: the InternalIP), accelerator_type ("module-910b-8" -> 8 NPUs,
        "module-a3-16" -> 16; default module-910b-8), optionally npus (override the count), labels (extra),
        allocatable (extra/overriding resources), arch (default arm64). A node of the same name is replaced.
        Returns the Node objects."""
        return tool.register_nodes(self.api, list(nodes), kube_version=self.version, timeout=timeout)

    def remove_nodes(self, names: Iterable[str], timeout: float = 60) -> None:
        names = list(names)
        for n in names:
            self.delete(f"/api/v1/nodes/{n}")
        self.wait_for(f"nodes {names} gone", lambda: all(self.get(f"/api/v1/nodes/{n}") is None for n in names),
                      timeout)

    @staticmethod
    def nodes_from_inventory(path: str | os.PathLike, skip: Iterable[str] = (), ip_of: dict | None = None) -> list[dict]:
        """add_nodes() items for the servers of a deployctl inventory (8 NPUs for a2, 16 for a3)."""
        import yaml

        inv = yaml.safe_load(Path(path).read_text())
        hw = inv.get("cluster", {}).get("hardware", "a2")
        accel = "module-a3-16" if hw == "a3" else "module-910b-8"
        return [{"name": n["name"], "ip": (ip_of or {}).get(n["name"], n["address"]), "accelerator_type": accel}
                for n in inv["nodes"] if n["name"] not in set(skip)]

    # ---- namespaces, pods, events ---------------------------------------------------------------
    def create_namespace(self, name: str, timeout: float = 120) -> str:
        """Create a namespace and wait for its default ServiceAccount (pods are refused until then)."""
        status, body = self.request("POST", "/api/v1/namespaces",
                                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        if status not in (201, 409):
            raise ClusterError(f"creating namespace {name}: HTTP {status}: {body}")
        self.wait_for(f"ServiceAccount default in {name}",
                      lambda: self.get(f"/api/v1/namespaces/{name}/serviceaccounts/default"), timeout)
        return name

    def delete_namespace(self, name: str, wait: bool = False, timeout: float = 180) -> None:
        self.delete(f"/api/v1/namespaces/{name}")
        if wait:
            self.wait_for(f"namespace {name} gone", lambda: self.get(f"/api/v1/namespaces/{name}") is None, timeout)

    def pod(self, namespace: str, name: str) -> dict | None:
        return self.get(f"/api/v1/namespaces/{namespace}/pods/{name}")

    def pods(self, namespace: str, selector: str = "") -> list[dict]:
        from urllib.parse import quote

        q = f"?labelSelector={quote(selector)}" if selector else ""
        return (self.get(f"/api/v1/namespaces/{namespace}/pods{q}") or {}).get("items", [])

    def events_for(self, namespace: str, name: str, kind: str | None = None) -> list[dict]:
        """core/v1 Events about that object (the scheduler's FailedScheduling, kwok's BackOff, ...)."""
        from urllib.parse import quote

        sel = f"involvedObject.name={name}" + (f",involvedObject.kind={kind}" if kind else "")
        return (self.get(f"/api/v1/namespaces/{namespace}/events?fieldSelector={quote(sel)}") or {}).get("items", [])

    # ---- helm and processes ---------------------------------------------------------------------
    def env(self) -> dict:
        """Environment for deployctl/helm subprocesses against this cluster."""
        return {"KUBECONFIG": str(self.kubeconfig), "DEPLOYCTL_HELM": str(self.helm)}

    def helm_env(self) -> dict:
        home = self.dir / "helm-home"
        return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "KUBECONFIG": str(self.kubeconfig),
                "HELM_CACHE_HOME": str(home / "cache"), "HELM_CONFIG_HOME": str(home / "config"),
                "HELM_DATA_HOME": str(home / "data")}

    def helm_run(self, *args, timeout: float = 300, cwd: str | os.PathLike | None = None) -> subprocess.CompletedProcess:
        """Run the built helm against this cluster (text output captured; check returncode yourself)."""
        return subprocess.run([str(self.helm), *map(str, args)], capture_output=True, text=True,
                              env=self.helm_env(), cwd=cwd or self.dir, timeout=timeout)

    def processes(self) -> list[dict]:
        return list(self.state.get("procs", [])) + ([self.state["watchdog"]] if self.state.get("watchdog") else [])

    def stop(self) -> None:
        """Stop every process of the cluster and remove its directory; ClusterError if anything is left."""
        if self._stopped:
            return
        self._stopped = True
        r = _script("down", "--dir", str(self.dir), timeout=120)
        left = [p["name"] for p in self.processes() if p.get("start") and tool.alive(p)]
        problems = []
        if r.returncode != 0:
            problems.append(f"`down` failed: {r.stderr.strip()}")
        if left:
            problems.append(f"still running: {', '.join(left)}")
        if self.dir.exists():
            problems.append(f"{self.dir} still exists")
        if problems:
            raise ClusterError("; ".join(problems))


def start_cluster(bin_dir: Path | None = None, *, build: bool = True, watch_pid: int | None = None,
                  timeout: float = 300, gang_gates: bool = False, lws: bool = False) -> KubeCluster:
    """Build if needed, then `scripts/k8s-test-cluster up` in a new temporary directory (gang_gates: with
    `--gang-gates`; lws: with `--lws`, the LeaderWorkerSet controller and its webhooks)."""
    if build:
        bin_dir = build_binaries(bin_dir)
    d = Path(tempfile.mkdtemp(prefix="deployctl-k8s-"))
    r = _script("up", "--dir", str(d), "--json", "--timeout", str(timeout),
                *(["--watch-pid", str(watch_pid)] if watch_pid else []), *(["--gang-gates"] if gang_gates else []),
                *(["--lws"] if lws else []),
                timeout=timeout * 6 + 120, bin_dir=bin_dir)
    if r.returncode != 0:
        logs = ""
        if (d / "logs").is_dir():
            logs = "\n".join(f"--- {p.name}\n" + "\n".join(p.read_text(errors="replace").splitlines()[-30:])
                             for p in sorted((d / "logs").glob("*.log")))
        _script("down", "--dir", str(d), timeout=120)
        shutil.rmtree(d, ignore_errors=True)
        raise ClusterError(f"scripts/k8s-test-cluster up failed:\n{r.stderr[-4000:]}\n{logs[-8000:]}")
    return KubeCluster(json.loads(r.stdout))


def cluster_fixture(**options) -> Iterator[KubeCluster]:
    """Generator for a pytest fixture of any scope: yields a started KubeCluster, tears it down after.
    Keyword options go to start_cluster(); a module-scoped cluster with the LeaderWorkerSet controller:

        @pytest.fixture(scope="module")
        def cluster():
            yield from cluster_fixture(lws=True)
    """
    cluster = start_cluster(watch_pid=os.getpid(), **options)
    try:
        yield cluster
    finally:
        cluster.stop()
