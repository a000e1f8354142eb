"""The Kubernetes API through the official client, reduced to what deployctl reads and deletes.

Everything returned is a plain dict in the API's own JSON shape (camelCase), so the logic that looks at
it (diff.py, rollout.py) stays pure and is tested on literal dicts. The client is imported lazily: it
is large and only `--target k8s` needs it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from deployctl.core.errors import ExecutionError, UsageError

RELEASE_LABEL = "app.kubernetes.io/instance"
# What the chart creates (namespaced): (kind, client api attribute, list method)
KINDS = (
    ("ConfigMap", "core", "list_namespaced_config_map"),
    ("Secret", "core", "list_namespaced_secret"),          # the secret env (secret-env.yaml)
    ("Service", "core", "list_namespaced_service"),
    ("ServiceAccount", "core", "list_namespaced_service_account"),
    ("StatefulSet", "apps", "list_namespaced_stateful_set"),
    ("Deployment", "apps", "list_namespaced_deployment"),
    ("PodDisruptionBudget", "policy", "list_namespaced_pod_disruption_budget"),
)
# ...and of custom resources, where the cluster serves them: (kind, group, version, plural) - the PodGroups of
# gang scheduling (kubernetes.gang: Volcano's, Kubernetes 1.36's), the workloads of kubernetes.workload lws and
# infer-operator
MAX_CUSTOM = 4096      # custom objects read of one kind: a release has one per instance
CUSTOM_KINDS = (
    ("PodGroup", "scheduling.volcano.sh", "v1beta1", "podgroups"),
    ("PodGroup", "scheduling.k8s.io", "v1alpha2", "podgroups"),
    ("LeaderWorkerSet", "leaderworkerset.x-k8s.io", "v1", "leaderworkersets"),     # kubernetes.workload lws
    ("InferServiceSet", "mindcluster.huawei.com", "v1", "inferservicesets"),       # ... infer-operator
)


@dataclass(frozen=True)
class KubeTarget:
    """Where the release goes: kubeconfig file, context, namespace and release name."""

    kubeconfig: str
    context: str | None
    namespace: str
    release: str

    def helm_args(self) -> list[str]:
        args = ["--kubeconfig", self.kubeconfig, "--namespace", self.namespace]
        return args + (["--kube-context", self.context] if self.context else [])


def kube_target(inv, inventory_dir: Path) -> KubeTarget:
    k = inv.kubernetes
    if k.kubeconfig:
        path = Path(k.kubeconfig).expanduser()
        path = path if path.is_absolute() else inventory_dir / path
    else:
        path = Path(os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or "~/.kube/config").expanduser()
    if not path.is_file():
        raise UsageError(f"kubeconfig {path} does not exist",
                         hint="set kubernetes.kubeconfig in the inventory, or KUBECONFIG, to your cluster's "
                              "kubeconfig")
    if k.kubeconfig and not exec_allowed():
        check_kubeconfig_plugins(path, k.context)
    return KubeTarget(str(path), k.context, k.namespace, inv.helm_release)


# -------------------------------------------------------------------------- credential plugins (issue 21)
# A kubeconfig user with `exec` (a credential plugin) or `auth-provider` makes the client and helm run a
# command on this machine. The operator's own kubeconfig ($KUBECONFIG, ~/.kube/config) is trusted as kubectl
# trusts it; one the inventory names (kubernetes.kubeconfig) is refused with such users unless the operator
# opts in: --allow-kubeconfig-exec, or DEPLOYCTL_ALLOW_KUBECONFIG_EXEC=1. The inventory cannot opt in itself.

ALLOW_EXEC_ENV = "DEPLOYCTL_ALLOW_KUBECONFIG_EXEC"
_allow_exec = False


def allow_kubeconfig_exec(value: bool = True) -> None:
    """The operator's opt-in (the CLI's --allow-kubeconfig-exec)."""
    global _allow_exec
    _allow_exec = bool(value)


def exec_allowed() -> bool:
    return _allow_exec or os.environ.get(ALLOW_EXEC_ENV, "").strip().lower() in ("1", "true", "yes")


def kubeconfig_plugins(doc, context: str | None) -> list[tuple[str, str, str]]:
    """(user, exec | auth-provider, the command or provider) of the users that would run code: the user of
    ``context`` (default: current-context), or every user when the context cannot be resolved."""
    if not isinstance(doc, dict):
        return []
    users = [u for u in doc.get("users") or [] if isinstance(u, dict)]
    want = context or doc.get("current-context")
    ctx = next((c for c in doc.get("contexts") or [] if isinstance(c, dict) and c.get("name") == want), None)
    name = ((ctx or {}).get("context") or {}).get("user") if isinstance(ctx, dict) else None
    if name is not None:
        users = [u for u in users if u.get("name") == name] or users
    out = []
    for u in users:
        user = u.get("user") if isinstance(u.get("user"), dict) else {}
        if user.get("exec") is not None:
            spec = user["exec"] if isinstance(user["exec"], dict) else {}
            argv = [str(spec.get("command", "?"))] + [str(a) for a in spec.get("args") or []]
            out.append((str(u.get("name", "?")), "exec", " ".join(argv)))
        if user.get("auth-provider") is not None:
            spec = user["auth-provider"] if isinstance(user["auth-provider"], dict) else {}
            cmd = (spec.get("config") or {}).get("cmd-path") if isinstance(spec.get("config"), dict) else None
            out.append((str(u.get("name", "?")), "auth-provider", str(cmd or spec.get("name", "?"))))
    return out


def check_kubeconfig_plugins(path: Path, context: str | None) -> None:
    """Refuse the inventory's kubeconfig when it would run a credential plugin (UsageError naming it)."""
    import yaml

    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, yaml.YAMLError):
        return          # the client reports an unreadable kubeconfig itself
    found = kubeconfig_plugins(doc, context)
    if found:
        what = "; ".join(f"user {u}: {kind} `{cmd}`" for u, kind, cmd in found)
        raise UsageError(f"kubeconfig {path} (kubernetes.kubeconfig) runs a credential plugin on this machine "
                         f"({what}): refused", hint="if you trust this command, pass --allow-kubeconfig-exec (or "
                         f"set {ALLOW_EXEC_ENV}=1); otherwise use a kubeconfig with a token or client certificate")


class KubeApi:
    """A connected client for one target."""

    def __init__(self, target: KubeTarget):
        try:
            from kubernetes import client, config
        except ImportError:
            raise UsageError("the Kubernetes Python client is not installed",
                             hint="pip install 'deployctl[k8s]' (or: pip install kubernetes)") from None

        self.target = target
        try:
            self.client = config.new_client_from_config(config_file=target.kubeconfig, context=target.context)
        except Exception as exc:  # noqa: BLE001 - the client raises several kinds for a bad kubeconfig
            raise UsageError(f"cannot load kubeconfig {target.kubeconfig}: {exc}",
                             hint="check the file and kubernetes.context") from None
        self.core = client.CoreV1Api(self.client)
        self.apps = client.AppsV1Api(self.client)
        self.policy = client.PolicyV1Api(self.client)
        self.coordination = client.CoordinationV1Api(self.client)
        self._served: dict[tuple[str, str], bool] = {}     # discovery answers (serves)

    def _call(self, what: str, fn, *args, **kwargs):
        return self._maybe(what, (), fn, *args, **kwargs)

    def _maybe(self, what: str, absent: tuple[int, ...], fn, *args, **kwargs):
        """Call the client; an API answer with a status in ``absent`` (404 not found, 409 already exists or
        modified meanwhile) returns None, any other failure raises an ExecutionError."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return fn(*args, **kwargs)
        except ApiException as exc:
            if exc.status in absent:
                return None
            raise ExecutionError(f"Kubernetes API: {what} failed: {exc.status} {exc.reason}",
                                 hint="check the namespace and your permissions (kubectl auth can-i)") from None
        except (HTTPError, OSError) as exc:
            raise ExecutionError(f"Kubernetes API: {what}: cannot reach {self.client.configuration.host} ({exc})",
                                 hint="check the kubeconfig's server and that the API server is up") from None

    def _plain(self, obj) -> dict:
        return self.client.sanitize_for_serialization(obj)

    def _items(self, what: str, method, *args, **selectors) -> list[dict]:
        """One LIST call, its items as plain dicts."""
        return self._plain(self._call(what, method, *args, **selectors)).get("items", [])

    def _namespaced(self, what: str, method, selector: str | None = None) -> list[dict]:
        t = self.target
        return self._items(what, method, t.namespace, label_selector=selector or f"{RELEASE_LABEL}={t.release}")

    def nodes(self) -> list[dict]:
        return self._items("list nodes", self.core.list_node)

    def release_objects(self) -> list[dict]:
        """Every object of the release's kinds in the namespace, labelled with the release (the custom kinds
        the cluster serves included)."""
        out = [{"kind": kind, **item} for kind, api, method in KINDS
               for item in self._namespaced(f"list {kind}s", getattr(getattr(self, api), method))]
        for kind, group, version, plural in CUSTOM_KINDS:
            if self.serves(f"{group}/{version}", kind):
                out += [{**item, "kind": kind} for item in self.custom_objects(group, version, plural)]
        # what a controller made from them (a LeaderWorkerSet's StatefulSets and Service) is not the release's own
        return [o for o in out if not any(isinstance(r, dict) and r.get("controller")
                                          for r in (o.get("metadata") or {}).get("ownerReferences") or [])]

    def statefulsets(self, selector: str | None = None) -> list[dict]:
        """The release's StatefulSets (or those matching a label selector)."""
        return self._namespaced("list StatefulSets", self.apps.list_namespaced_stateful_set, selector)

    def serves(self, group_version: str, kind: str) -> bool:
        """Whether the API server serves ``kind`` in ``group_version`` (discovery: GET /apis/<group>/<version>;
        not served answers 404); asked once per client."""
        key = (group_version, kind)
        if key not in self._served:
            self._served[key] = self._discover(group_version, kind)
        return self._served[key]

    def _discover(self, group_version: str, kind: str) -> bool:
        from kubernetes import client

        group, _, version = group_version.partition("/")
        found = self._maybe(f"discover {group_version}", (404, 503),
                            client.CustomObjectsApi(self.client).get_api_resources, group, version)
        resources = self._plain(found).get("resources") if found is not None else None
        return any(isinstance(r, dict) and r.get("kind") == kind for r in (resources or [])[:1000])

    def custom_objects(self, group: str, version: str, plural: str) -> list[dict]:
        """The release's objects of a custom resource (e.g. PodGroups), each with its kind."""
        return self._custom(group, version, plural, f"{RELEASE_LABEL}={self.target.release}", (404,)) or []

    def readable_custom_objects(self, group: str, version: str, plural: str, selector: str) -> list[dict] | None:
        """The namespace's objects of a custom resource matching a label selector (what a controller made, without
        the release's label); None when the API server does not serve them (404) or lets this user not list them
        (403)."""
        return self._custom(group, version, plural, selector, (403, 404))

    def _custom(self, group: str, version: str, plural: str, selector: str,
                absent: tuple[int, ...]) -> list[dict] | None:
        from kubernetes import client

        doc = self._maybe(f"list {plural}", absent, client.CustomObjectsApi(self.client).list_namespaced_custom_object,
                          group, version, self.target.namespace, plural, label_selector=selector)
        if doc is None:
            return None
        items = doc.get("items") if isinstance(doc, dict) else None
        return [i for i in (items if isinstance(items, list) else [])[:MAX_CUSTOM] if isinstance(i, dict)]

    def horizontal_pod_autoscalers(self) -> list[dict] | None:
        """Every HorizontalPodAutoscaler (autoscaling/v2) of the namespace, whoever made it; None when the API
        server does not serve them (404) or lets this user not list them (403)."""
        from kubernetes import client

        got = self._maybe("list HorizontalPodAutoscalers", (403, 404), client.AutoscalingV2Api(
            self.client).list_namespaced_horizontal_pod_autoscaler, self.target.namespace)
        return None if got is None else self._plain(got).get("items", [])[:MAX_CUSTOM]

    def scale_custom(self, group: str, version: str, plural: str, name: str, replicas: int) -> bool:
        """Set a custom resource's replicas through its /scale subresource (as kubectl scale and an HPA do);
        False when the object is gone."""
        from kubernetes import client

        return self._maybe(f"scale {plural} {name}", (404,), client.CustomObjectsApi(
            self.client).patch_namespaced_custom_object_scale, group, version, self.target.namespace, plural, name,
            {"spec": {"replicas": replicas}}, _content_type="application/merge-patch+json") is not None

    def ensure_namespace(self) -> bool:
        """Create the namespace if missing, labelled for Pod Security Admission's privileged level (the pods
        use hostNetwork and hostPath). Returns whether it was created. An existing one is left as it is."""
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException

        name = self.target.namespace
        try:
            self.core.read_namespace(name)
            return False
        except ApiException as exc:
            if exc.status != 404:
                raise ExecutionError(f"Kubernetes API: read namespace {name} failed: {exc.status} {exc.reason}",
                                     hint="check your permissions (kubectl auth can-i get namespaces)") from None
        labels = {f"pod-security.kubernetes.io/{mode}": "privileged" for mode in ("enforce", "audit", "warn")}
        body = client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels))
        self._call(f"create namespace {name}", self.core.create_namespace, body)
        return True

    def pods(self, selector: str | None = None) -> list[dict]:
        """The release's pods (or those matching a label selector)."""
        return self._namespaced("list pods", self.core.list_namespaced_pod, selector)

    def pod_events(self, pod: str) -> list[dict]:
        return self._items(f"events of pod {pod}", self.core.list_namespaced_event, self.target.namespace,
                           field_selector=f"involvedObject.name={pod}")

    def delete_pods(self, selector: str) -> list[str]:
        """Delete every pod matching the label selector at once (their controllers recreate them)."""
        names = [p["metadata"]["name"] for p in self.pods(selector)]
        for name in names:
            self._call(f"delete pod {name}", self.core.delete_namespaced_pod, name, self.target.namespace)
        return names

    def delete_statefulset(self, name: str) -> bool:
        """Delete a StatefulSet and, first, its pods (foreground): False when it was already gone."""
        from kubernetes import client

        body = client.V1DeleteOptions(propagation_policy="Foreground")
        return self._maybe(f"delete StatefulSet {name}", (404,), self.apps.delete_namespaced_stateful_set, name,
                           self.target.namespace, body=body) is not None

    def replicasets(self) -> list[dict]:
        return self._namespaced("list ReplicaSets", self.apps.list_namespaced_replica_set)

    # -- Leases (deployctl's lock, see lease.py) and ConfigMaps by name (the run notes, see history.py).
    # None/False: absent (404) or refused by a conflict (409: it exists, or it changed since it was read).

    def get_lease(self, name: str) -> dict | None:
        ns = self.target.namespace
        got = self._maybe(f"read Lease {name}", (404,), self.coordination.read_namespaced_lease, name, ns)
        return None if got is None else self._plain(got)

    def create_lease(self, body: dict) -> dict | None:
        ns, name = self.target.namespace, body["metadata"]["name"]
        got = self._maybe(f"create Lease {name}", (409,), self.coordination.create_namespaced_lease, ns, body)
        return None if got is None else self._plain(got)

    def replace_lease(self, name: str, body: dict) -> dict | None:
        ns = self.target.namespace
        got = self._maybe(f"update Lease {name}", (404, 409), self.coordination.replace_namespaced_lease, name,
                          ns, body)
        return None if got is None else self._plain(got)

    def delete_lease(self, name: str, resource_version: str | None = None) -> bool:
        """Delete the Lease; with resource_version, only if nobody changed it since (else False)."""
        ns = self.target.namespace
        body = {"preconditions": {"resourceVersion": resource_version}} if resource_version else None
        got = self._maybe(f"delete Lease {name}", (404, 409), self.coordination.delete_namespaced_lease, name, ns,
                          body=body)
        return got is not None

    def get_config_map(self, name: str) -> dict | None:
        ns = self.target.namespace
        got = self._maybe(f"read ConfigMap {name}", (404,), self.core.read_namespaced_config_map, name, ns)
        return None if got is None else self._plain(got)

    def create_config_map(self, body: dict) -> dict | None:
        ns, name = self.target.namespace, body["metadata"]["name"]
        got = self._maybe(f"create ConfigMap {name}", (409,), self.core.create_namespaced_config_map, ns, body)
        return None if got is None else self._plain(got)

    def replace_config_map(self, name: str, body: dict) -> dict | None:
        ns = self.target.namespace
        got = self._maybe(f"update ConfigMap {name}", (404, 409), self.core.replace_namespaced_config_map, name,
                          ns, body)
        return None if got is None else self._plain(got)

    def delete_config_map(self, name: str) -> bool:
        ns = self.target.namespace
        return self._maybe(f"delete ConfigMap {name}", (404,), self.core.delete_namespaced_config_map, name,
                           ns) is not None
