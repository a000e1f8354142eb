"""An in-process fake Kubernetes API server for tests (standard library only).

`FakeKubeAPI` serves the Kubernetes REST API over plain HTTP on 127.0.0.1 from a background thread, so
that the real `helm` binary and the official `kubernetes` Python client can talk to it through a
kubeconfig written by `write_kubeconfig`.

What is faked
-------------
* Discovery (/version, /api, /apis, /apis/<group>[/<version>]) for the resources in resources.py, and a
  minimal /openapi/v2 document (protobuf, no schemas) so that helm's client-side validation is a no-op.
* CRUD on every listed resource: GET, LIST (labelSelector, fieldSelector on any dotted field path, limit
  and continue), POST, PUT (resourceVersion conflicts), PATCH (merge, strategic merge approximated, JSON
  patch), DELETE (propagationPolicy Orphan/Background/Foreground, preconditions), DELETE on a collection,
  dryRun=All, WATCH (a chunked stream of ADDED/MODIFIED/DELETED events, see below). Leases
  (coordination.k8s.io/v1, deployctl's lock) are plain objects: a second create is 409 AlreadyExists, an
  update or a delete precondition with an old resourceVersion is 409 Conflict. Subresources: status
  (status is only written through it), scale, pods/log (text set by `set_pod_log`), namespaces/finalize.
* Server-side behaviour: uid, resourceVersion (one global counter), creationTimestamp, generation (bumped
  when .spec changes), defaulting of the fields helm and kubectl look at (StatefulSet/Deployment
  strategies, Service clusterIP, Secret stringData, Namespace phase, pod spec defaults), validation of
  names, labels and annotations, of selector vs template labels, of immutable fields (StatefulSet spec
  outside replicas/template/updateStrategy/..., Deployment selector, Job template, immutable ConfigMaps
  and Secrets), and, with validate=True, of the whole object against the Kubernetes 1.28 JSON schema
  (kubernetes_validate, strict: unknown fields are rejected unless the request says
  fieldValidation=Ignore or Warn). Errors are `Status` objects with the real reasons and codes.
* Namespaces: "default" and "kube-system" exist from the start; every namespace gets a "default"
  ServiceAccount and a "kube-root-ca.crt" ConfigMap, as on a real cluster. Deleting a namespace deletes
  everything in it at once (no Terminating phase is observable afterwards).
* Garbage collection through ownerReferences, synchronously, inside the DELETE request.
* Controllers, run synchronously inside the request that changed something (so a client sees the pods as
  soon as its create returns): StatefulSet (ordered or parallel pod management, RollingUpdate with
  partition, OnDelete, scaling, volumeClaimTemplates -> bound PVCs, ControllerRevisions, status),
  Deployment -> ReplicaSet -> pods (rollouts are instant: the old ReplicaSet is scaled to 0 at once), Job
  (its pod succeeds at once, or fails under a crash_loop fault).
* A scheduler and a kubelet: pods are bound to registered nodes (`add_node`) honouring nodeName,
  nodeSelector, required node affinity, taints/tolerations, host ports (hostNetwork pods use their
  container ports) and resource requests against node allocatable (extended resources such as
  huawei.com/Ascend910 a node does not declare count as 0). Without registered nodes every pod runs on
  an implicit node "fake-node" (10.0.0.10, no Node object). Bound pods are Running and Ready at once;
  pods that fit nowhere stay Pending with a FailedScheduling event worded like the real scheduler's, and
  are retried when a node is added or a pod is deleted. Pod IPs come from 10.244.0.0/16 (hostNetwork: the
  node's IP), Service cluster IPs from 10.96.0.0/16. Required pod affinity/anti-affinity is honoured too
  (preferred terms only score on a real scheduler and are ignored).
* Fault injection by pod name (exact, or a glob such as "engine-*"): `never_ready`, `crash_loop`,
  `unschedulable`, `clear_faults`; each sets the pod status and the Warning event the kubelet or
  scheduler would record.

What is not faked
-----------------
No authentication or authorization (any token is accepted), no admission webhooks, no CRDs, no
server-side apply (application/apply-patch+yaml is answered 415), no protobuf bodies, no aggregated
discovery, no Table output, no pod exec/attach/port-forward, no probes or container processes (readiness
only changes through the fault helpers), no graceful termination (deleted pods vanish at once), no
DaemonSet/CronJob/HPA controllers, no Endpoints, no preemption, no topology spread constraints. Watches
filter each event on the object after the change (for DELETED: the last state), without the
ADDED/DELETED translation a real server does for objects entering or leaving a selector, and send no
bookmarks. Unknown fields and wrong types are answered 422 Invalid here, where a real server answers
400 BadRequest (a strict decoding error) for them: treat both as "the manifest was rejected".

Using it with helm (v3.10)
--------------------------
No special flag is needed: `helm upgrade --install ... --kubeconfig FILE` works, and so do --wait
(helm polls; pods are ready at once unless a fault says otherwise), --atomic, status, get, history,
rollback and uninstall. Without the /openapi/v2 document served here helm would fail with "the server
could not find the requested resource" unless given --disable-openapi-validation.

Every request is recorded in `api.requests`; anything that made the server fail with a 500 is in
`api.errors` (the pytest fixture fails the test when that list is not empty).
"""

from __future__ import annotations

import base64
import copy
import fnmatch
import hashlib
import json
import random
import re
import socket
import threading
import time
import traceback
import uuid
from collections import Counter
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from .patch import PatchError, json_patch, merge_patch, strategic_merge_patch
from .resources import (BY_KIND, BY_PATH, KUBE_VERSION, api_group, api_group_list, api_resource_list,
                        api_versions, group_versions)
from .selectors import (SelectorError, fields_match, label_selector_object_to_requirements,
                        label_selector_object_to_string, label_value_errors, labels_match, name_errors,
                        parse_field_selector, parse_label_selector, parse_quantity, qualified_name_errors)

R_NS = BY_PATH[("v1", "namespaces")]
R_POD = BY_PATH[("v1", "pods")]
R_NODE = BY_PATH[("v1", "nodes")]
R_EVENT = BY_PATH[("v1", "events")]
R_CM = BY_PATH[("v1", "configmaps")]
R_SA = BY_PATH[("v1", "serviceaccounts")]
R_SVC = BY_PATH[("v1", "services")]
R_PVC = BY_PATH[("v1", "persistentvolumeclaims")]
R_STS = BY_PATH[("apps/v1", "statefulsets")]
R_DEPLOY = BY_PATH[("apps/v1", "deployments")]
R_RS = BY_PATH[("apps/v1", "replicasets")]
R_CR = BY_PATH[("apps/v1", "controllerrevisions")]
R_JOB = BY_PATH[("batch/v1", "jobs")]

DEFAULT_NODE = "fake-node"
DEFAULT_NODE_IP = "10.0.0.10"
SAFE_CHARS = "bcdfghjklmnpqrstvwxz2456789"   # what Kubernetes uses for generated name suffixes and hashes
PATCH_TYPES = ("application/json-patch+json", "application/merge-patch+json",
               "application/strategic-merge-patch+json")
# StatefulSet spec fields an update may change (everything else is forbidden, as in apps/v1 validation)
STS_MUTABLE = {"replicas", "ordinals", "template", "updateStrategy", "persistentVolumeClaimRetentionPolicy",
               "minReadySeconds"}
OPENAPI_CONTENT_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"


class ApiError(Exception):
    """An error answered as a `Status` body."""

    def __init__(self, code: int, reason: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.code, self.reason, self.message, self.details = code, reason, message, details

    def status(self) -> dict:
        body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": self.message, "reason": self.reason, "code": self.code}
        if self.details is not None:
            body["details"] = self.details
        return body


def _not_found(res, name) -> ApiError:
    details = {"name": name, "kind": res.plural}
    if res.group:
        details["group"] = res.group
    return ApiError(404, "NotFound", f'{res.qualified} "{name}" not found', details)


def _conflict(res, name, why="the object has been modified; please apply your changes to the latest "
                             "version and try again") -> ApiError:
    details = {"name": name, "kind": res.plural}
    if res.group:
        details["group"] = res.group
    return ApiError(409, "Conflict", f'Operation cannot be fulfilled on {res.qualified} "{name}": {why}', details)


def _invalid(res, name, causes: list[tuple[str, str]]) -> ApiError:
    """causes: [(field, detail)], detail like 'Invalid value: "x": must be ...' or 'Required value'."""
    text = ", ".join(f"{field}: {detail}" for field, detail in causes)
    if len(causes) > 1:
        text = f"[{text}]"
    details = {"name": name, "kind": res.kind,
               "causes": [{"reason": "FieldValueInvalid", "message": detail, "field": field}
                          for field, detail in causes]}
    if res.group:
        details["group"] = res.group
    return ApiError(422, "Invalid", f'{res.qualified_kind} "{name}" is invalid: {text}', details)


def _bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def _method_not_allowed() -> ApiError:
    return ApiError(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")


def _go_repr(value) -> str:
    """How Go's %v-ish rendering of an invalid value looks in messages (close enough)."""
    return json.dumps(value) if isinstance(value, str) else json.dumps(value, separators=(",", ":"))


def _is_ready(pod: dict | None) -> bool:
    if not pod:
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _controller_ref(obj: dict) -> dict | None:
    return next((r for r in obj.get("metadata", {}).get("ownerReferences") or [] if r.get("controller")), None)


def _without_nulls(value):
    """A copy without null map entries: the server decodes into Go structs, so `resources: null` in a
    manifest is simply absent from the stored object."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _omit_zero(status: dict, keys) -> dict:
    return {k: v for k, v in status.items() if not (k in keys and not v)}


# ---------------------------------------------------------------------------------------- HTTP plumbing

class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-kube-apiserver"
    sys_version = ""

    def setup(self):
        super().setup()
        # headers and body go out in separate writes: without TCP_NODELAY every response waits ~40 ms
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.connections.add(self.connection)

    def finish(self):
        try:
            super().finish()
        finally:
            self.server.connections.discard(self.connection)

    def do_GET(self):
        self.server.api._serve(self)

    do_POST = do_PUT = do_PATCH = do_DELETE = do_HEAD = do_GET

    def log_message(self, format, *args):   # noqa: A002 - keep test output clean
        pass


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, api):
        self.api = api
        self.connections: set[socket.socket] = set()
        super().__init__(("127.0.0.1", 0), _Handler)

    def handle_error(self, request, client_address):
        pass  # a client hanging up mid-watch is not an error


class _Stream:
    """Returned by a handler that has already written its own (streamed) response."""


# ---------------------------------------------------------------------------------------- the fake

class FakeKubeAPI:
    """A fake kube-apiserver. Use as a context manager or call start()/stop().

    validate: check POST/PUT/PATCH bodies of built-in kinds against the Kubernetes JSON schema
        (kubernetes_validate, strict) and answer 422 Invalid when they do not conform.
    kube_version: the schema version used for that check.
    seed: generated names, uids and hashes are drawn from random.Random(seed), so a test that makes the
        same requests in the same order gets the same names.
    clock: a function returning an aware datetime, for deterministic timestamps (default: now, UTC).
    """

    def __init__(self, *, validate: bool = True, kube_version: str = "1.28.0", seed: int = 0, clock=None):
        self.validate = validate
        self.kube_version = kube_version
        self.clock = clock or (lambda: datetime.now(timezone.utc))
        self.requests: list[dict] = []
        self.errors: list[str] = []
        self.pod_logs: dict[tuple[str, str], str] = {}
        self._rng = random.Random(seed)
        self._cond = threading.Condition(threading.RLock())
        self._store: dict[tuple[str, str, str, str], dict] = {}
        self._log: list[tuple[int, str, object, dict]] = []   # (resourceVersion, event type, resource, object)
        self._rv = 0
        self._faults: list[dict] = []
        self._emitted: set[tuple[str, str, str]] = set()      # (involved uid, reason, message) of recorded events
        self._pod_ip = 0
        self._svc_ip = 10
        self._node_port = 30000
        self._stopping = False
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._validator = None
        with self._cond:
            for ns in ("default", "kube-system"):
                self._create(R_NS, None, {"metadata": {"name": ns}}, {}, internal=True)
            self._create(R_SVC, "default", {
                "metadata": {"name": "kubernetes", "labels": {"component": "apiserver", "provider": "kubernetes"}},
                "spec": {"clusterIP": "10.96.0.1", "ports": [{"name": "https", "port": 443, "targetPort": 6443}]},
            }, {}, internal=True)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeKubeAPI:
        if self.validate and self._validator is None:
            try:
                import kubernetes_validate
            except ImportError as e:  # pragma: no cover - the test venv has it
                raise RuntimeError("FakeKubeAPI(validate=True) needs the kubernetes-validate package "
                                   "(pip install kubernetes-validate), or pass validate=False") from e
            self._validator = kubernetes_validate
        self._stopping = False
        self._httpd = _HTTPServer(self)
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="fake-kube-apiserver",
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is None:
            return
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        self._httpd.shutdown()
        for conn in list(self._httpd.connections):
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._httpd.server_close()
        self._thread.join(timeout=5)
        self._httpd = None

    def __enter__(self) -> FakeKubeAPI:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "FakeKubeAPI is not started"
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def write_kubeconfig(self, path, namespace: str | None = None) -> Path:
        """Write a kubeconfig for this server (plain http, a dummy bearer token, current-context "fake").

        It is JSON, which is valid YAML for both helm (--kubeconfig) and
        kubernetes.config.load_kube_config(config_file=...). Mode 0600 keeps helm from warning about it.
        """
        context = {"cluster": "fake", "user": "fake"}
        if namespace:
            context["namespace"] = namespace
        config = {
            "apiVersion": "v1", "kind": "Config", "preferences": {},
            "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
            "users": [{"name": "fake", "user": {"token": "fake-token"}}],
            "contexts": [{"name": "fake", "context": context}],
            "current-context": "fake",
        }
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(config, indent=2) + "\n")
        path.chmod(0o600)
        return path

    # ------------------------------------------------------------------ helpers for tests

    def objects(self, plural: str, namespace: str | None = None) -> list[dict]:
        """Stored objects of a resource (plural, e.g. "pods", "statefulsets"), optionally of one namespace,
        sorted by namespace and name. Copies: changing them changes nothing."""
        with self._cond:
            return [copy.deepcopy(obj) for key, obj in sorted(self._store.items())
                    if key[1] == plural and (namespace is None or key[2] == namespace)]

    def get_object(self, plural: str, namespace: str | None, name: str) -> dict | None:
        with self._cond:
            for key, obj in self._store.items():
                if key[1] == plural and key[2] == (namespace or "") and key[3] == name:
                    return copy.deepcopy(obj)
        return None

    def requests_to(self, method: str | None = None, path_contains: str = "") -> list[dict]:
        """Recorded requests with that method (any if None) whose path contains the given text."""
        return [r for r in list(self.requests)
                if (method is None or r["method"] == method) and path_contains in r["path"]]

    def add_node(self, name: str, ip: str, labels: dict | None = None, allocatable: dict | None = None, *,
                 taints: list | None = None, unschedulable: bool = False, arch: str = "arm64") -> dict:
        """Register a Ready Node. allocatable adds to/overrides cpu 192, memory 1536Gi, pods 110, e.g.
        {"huawei.com/Ascend910": "8"}; capacity equals allocatable. Pending pods are rescheduled."""
        alloc = {"cpu": "192", "ephemeral-storage": "1000Gi", "hugepages-1Gi": "0", "hugepages-2Mi": "0",
                 "memory": "1536Gi", "pods": "110"}
        alloc.update({k: str(v) for k, v in (allocatable or {}).items()})
        now = self._now()
        node = {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {
                "beta.kubernetes.io/arch": arch, "beta.kubernetes.io/os": "linux", "kubernetes.io/arch": arch,
                "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", **(labels or {})}},
            "spec": {**({"taints": taints} if taints else {}), **({"unschedulable": True} if unschedulable else {})},
            "status": {
                "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": name}],
                "allocatable": alloc, "capacity": dict(alloc),
                "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                "message": "kubelet is posting ready status", "lastHeartbeatTime": now,
                                "lastTransitionTime": now}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
                "nodeInfo": {"architecture": arch, "bootID": str(self._uuid()), "containerRuntimeVersion":
                             "containerd://1.7.2", "kernelVersion": "5.10.0-182.0.0.95.oe2203sp3.aarch64",
                             "kubeProxyVersion": KUBE_VERSION["gitVersion"], "kubeletVersion":
                             KUBE_VERSION["gitVersion"], "machineID": self._hex(32), "operatingSystem": "linux",
                             "osImage": "openEuler 22.03 (LTS-SP3)", "systemUUID": str(self._uuid())},
            },
        }
        with self._cond:
            self._create(R_NODE, None, node, {}, internal=True, keep_status=True)
            self._reschedule_pending()
            return self.get_object("nodes", None, name)

    def never_ready(self, pod_name: str, reason: str = "Readiness probe failed: HTTP probe failed with "
                                                        "statuscode: 503", *, namespace: str | None = None):
        """Pods with that name (exact or glob) run but never pass readiness: Ready False, containers
        running with ready false, and a Warning "Unhealthy" event with `reason` as its message."""
        self._add_fault(pod_name, namespace, kind="never_ready", message=reason)

    def crash_loop(self, pod_name: str, exit_code: int = 1, message: str = "", *, container: str | None = None,
                   restart_count: int = 5, namespace: str | None = None):
        """Pods with that name (exact or glob) crash-loop: the container (default: the first) waits in
        CrashLoopBackOff, lastState.terminated has exit_code and message, restartCount is restart_count,
        and a Warning "BackOff" event is recorded. A Job's pod fails instead (phase Failed)."""
        self._add_fault(pod_name, namespace, kind="crash_loop", exit_code=exit_code, message=message,
                        container=container, restart_count=restart_count)

    def unschedulable(self, pod_name: str, message: str = "0/4 nodes are available: 4 Insufficient "
                                                          "huawei.com/Ascend910.", *, namespace: str | None = None):
        """Pods with that name (exact or glob) stay Pending: PodScheduled False, reason Unschedulable, and
        a Warning "FailedScheduling" event with `message`."""
        self._add_fault(pod_name, namespace, kind="unschedulable", message=message)

    def clear_faults(self, pod_name: str | None = None) -> None:
        """Remove the faults registered for that pattern (all faults if None): the pods recover."""
        with self._cond:
            removed = [f for f in self._faults if pod_name is None or f["pattern"] == pod_name]
            self._faults = [f for f in self._faults if f not in removed]
            for fault in removed:
                self._refresh_matching(fault)

    def set_pod_log(self, namespace: str, pod_name: str, text: str) -> None:
        """What GET .../pods/<name>/log answers (tailLines is honoured)."""
        self.pod_logs[(namespace, pod_name)] = text

    # ------------------------------------------------------------------ small utilities

    def _now(self) -> str:
        return self.clock().astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

    def _uuid(self) -> uuid.UUID:
        return uuid.UUID(int=self._rng.getrandbits(128), version=4)

    def _hex(self, n: int) -> str:
        return "".join(self._rng.choice("0123456789abcdef") for _ in range(n))

    def _suffix(self, n: int = 5) -> str:
        return "".join(self._rng.choice(SAFE_CHARS) for _ in range(n))

    @staticmethod
    def _hash(value) -> str:
        digest = hashlib.sha256(json.dumps(value, sort_keys=True).encode()).digest()
        return "".join(SAFE_CHARS[b % len(SAFE_CHARS)] for b in digest[:10])

    # ------------------------------------------------------------------ store primitives (hold self._cond)

    @staticmethod
    def _key(res, ns, name):
        return (res.group_version, res.plural, ns or "", name)

    def _load(self, res, ns, name) -> dict | None:
        obj = self._store.get(self._key(res, ns, name))
        return copy.deepcopy(obj) if obj is not None else None

    def _iter(self, res, ns=None):
        for key, obj in sorted(self._store.items()):
            if key[0] == res.group_version and key[1] == res.plural and (ns is None or key[2] == ns):
                yield copy.deepcopy(obj)

    def _save(self, res, obj, event="MODIFIED") -> dict:
        self._rv += 1
        obj["metadata"]["resourceVersion"] = str(self._rv)
        stored = copy.deepcopy(obj)
        self._store[self._key(res, obj["metadata"].get("namespace"), obj["metadata"]["name"])] = stored
        self._log.append((self._rv, event, res, stored))
        self._cond.notify_all()
        return obj

    def _drop(self, res, obj) -> None:
        meta = obj["metadata"]
        self._store.pop(self._key(res, meta.get("namespace"), meta["name"]), None)
        self._rv += 1
        gone = copy.deepcopy(obj)
        gone["metadata"]["resourceVersion"] = str(self._rv)
        self._log.append((self._rv, "DELETED", res, gone))
        self._cond.notify_all()

    def _owned(self, res, ns, owner_uid) -> list[dict]:
        return [o for o in self._iter(res, ns)
                if any(r.get("uid") == owner_uid for r in o["metadata"].get("ownerReferences") or [])]

    def _set_status(self, res, obj, status) -> None:
        current = self._load(res, obj["metadata"].get("namespace"), obj["metadata"]["name"])
        if current is not None and current.get("status") != status:
            current["status"] = status
            self._save(res, current)

    @staticmethod
    def _owner_ref(res, owner) -> dict:
        return {"apiVersion": res.group_version, "kind": res.kind, "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}

    # ------------------------------------------------------------------ HTTP dispatch

    def _serve(self, handler: BaseHTTPRequestHandler) -> None:
        url = urlsplit(handler.path)
        path = "/" + url.path.strip("/")
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        content_type = (handler.headers.get("Content-Type") or "").split(";")[0].strip()
        raw = self._read_body(handler)
        record = {"method": handler.command, "path": path, "query": query, "content_type": content_type or None,
                  "body": None}
        parse_error = None
        if raw:
            try:
                record["body"] = json.loads(raw)
            except ValueError as e:
                parse_error = e
                record["body"] = raw.decode(errors="replace")
        self.requests.append(record)
        warnings: list[str] = []
        try:
            if parse_error is not None and not (handler.command == "PATCH" and content_type not in PATCH_TYPES):
                raise _bad_request(f"the body of the request could not be decoded as JSON: {parse_error}")
            with self._cond:
                result = self._route(handler, handler.command, path, query, content_type, record["body"], warnings)
        except ApiError as e:
            result = (e.code, e.status())
        except Exception:  # a bug in the fake: answer 500 and keep the traceback for the test
            self.errors.append(f"{handler.command} {handler.path}\n{traceback.format_exc()}")
            result = (500, ApiError(500, "InternalError", "fake API server error, see FakeKubeAPI.errors").status())
        if isinstance(result, _Stream):
            record["status"] = 200
            return
        code, payload = result[0], result[1]
        record["status"] = code
        content = result[2] if len(result) > 2 else "application/json"
        data = payload if isinstance(payload, bytes) else (
            payload.encode() if isinstance(payload, str) else json.dumps(payload).encode())
        try:
            handler.send_response(code)
            handler.send_header("Content-Type", content)
            handler.send_header("Content-Length", str(len(data)))
            for w in warnings:
                handler.send_header("Warning", f'299 - "{w}"')
            handler.end_headers()
            if handler.command != "HEAD":
                handler.wfile.write(data)
        except OSError:
            pass

    @staticmethod
    def _read_body(handler) -> bytes:
        if (handler.headers.get("Transfer-Encoding") or "").lower() == "chunked":
            chunks = []
            while True:
                size = int(handler.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    handler.rfile.readline()
                    return b"".join(chunks)
                chunks.append(handler.rfile.read(size))
                handler.rfile.readline()
        length = int(handler.headers.get("Content-Length") or 0)
        return handler.rfile.read(length) if length else b""

    def _route(self, handler, method, path, query, content_type, body, warnings):
        if path in ("/healthz", "/livez", "/readyz"):
            return 200, "ok", "text/plain; charset=utf-8"
        if method != "GET" and path in ("/version", "/api", "/apis", "/openapi/v2"):
            raise _method_not_allowed()
        if path == "/version":
            return 200, KUBE_VERSION
        if path == "/api":
            return 200, api_versions(f"127.0.0.1:{self.port}")
        if path == "/apis":
            return 200, api_group_list()
        if path == "/openapi/v2":
            return 200, _OPENAPI_V2, OPENAPI_CONTENT_TYPE
        parts = path.strip("/").split("/")
        if parts[0] == "api" and len(parts) >= 2 and parts[1] == "v1":
            group_version, rest = "v1", parts[2:]
        elif parts[0] == "apis" and len(parts) == 2 and parts[1] in group_versions():
            return 200, api_group(parts[1])
        elif parts[0] == "apis" and len(parts) >= 3 and parts[2] in group_versions().get(parts[1], []):
            group_version, rest = f"{parts[1]}/{parts[2]}", parts[3:]
        else:
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        if not rest:
            if method != "GET":
                raise _method_not_allowed()
            return 200, api_resource_list(group_version)

        ns = None
        if rest[0] == "namespaces" and len(rest) >= 3 and rest[2] not in ("status", "finalize"):
            ns, rest = rest[1], rest[2:]
        plural, name, sub = rest[0], (rest[1] if len(rest) > 1 else None), (rest[2] if len(rest) > 2 else None)
        res = BY_PATH.get((group_version, plural))
        if (res is None or len(rest) > 3 or (ns is not None and not res.namespaced)
                or (ns is None and res.namespaced and name is not None)
                or (sub is not None and sub not in res.subresources)):
            raise ApiError(404, "NotFound", "the server could not find the requested resource", {})
        dry_run = query.get("dryRun")
        if dry_run not in (None, "All"):
            raise _bad_request(f'Invalid dry run value: unsupported dry run value "{dry_run}"')
        if ns is not None and name is None and method == "POST" and not self._store.get(self._key(R_NS, None, ns)):
            raise _not_found(R_NS, ns)

        if name is None:
            if method == "GET":
                if query.get("watch") in ("1", "true", "True"):
                    self._watch(handler, res, ns, query)
                    return _Stream()
                return 200, self._list(res, ns, query)
            if method == "POST":
                code, obj = self._create(res, ns, body, query, warnings=warnings)
                return code, obj
            if method == "DELETE":
                return 200, self._delete_collection(res, ns, query, body)
        elif sub is None:
            if method == "GET":
                return 200, self._get(res, ns, name)
            if method == "PUT":
                return self._update(res, ns, name, body, query, warnings=warnings)
            if method == "PATCH":
                return self._patch(res, ns, name, body, content_type, query, warnings=warnings)
            if method == "DELETE":
                return self._delete(res, ns, name, query, body)
        elif sub == "log" and method == "GET":
            self._get(res, ns, name)
            text = self.pod_logs.get((ns, name), "")
            if query.get("tailLines"):
                lines = text.splitlines(keepends=True)
                text = "".join(lines[-int(query["tailLines"]):]) if int(query["tailLines"]) > 0 else ""
            return 200, text, "text/plain"
        elif sub == "scale":
            if method == "GET":
                return 200, self._scale_of(res, self._get(res, ns, name))
            if method in ("PUT", "PATCH"):
                return self._set_scale(res, ns, name, body, content_type, method, query)
        elif sub in ("status", "finalize"):
            if method == "GET":
                return 200, self._get(res, ns, name)
            if method == "PUT":
                return self._update(res, ns, name, body, query, sub=sub, warnings=warnings)
            if method == "PATCH" and sub == "status":
                return self._patch(res, ns, name, body, content_type, query, sub="status", warnings=warnings)
        raise _method_not_allowed()

    # ------------------------------------------------------------------ read

    def _get(self, res, ns, name) -> dict:
        obj = self._load(res, ns, name)
        if obj is None:
            raise _not_found(res, name)
        return obj

    def _selected(self, res, ns, query) -> list[dict]:
        try:
            labels = parse_label_selector(query.get("labelSelector"))
            fields = parse_field_selector(query.get("fieldSelector"))
        except SelectorError as e:
            raise _bad_request(str(e)) from None
        return [o for o in self._iter(res, ns)
                if labels_match(labels, o["metadata"].get("labels")) and fields_match(fields, o)]

    def _list(self, res, ns, query) -> dict:
        items = self._selected(res, ns, query)
        meta = {"resourceVersion": str(self._rv)}
        try:
            start = int(base64.b64decode(query["continue"]).decode()) if query.get("continue") else 0
            limit = int(query.get("limit") or 0)
        except ValueError:
            raise _bad_request("invalid limit or continue parameter") from None
        if limit > 0:
            rest = items[start + limit:]
            items = items[start:start + limit]
            if rest:
                meta["continue"] = base64.b64encode(str(start + limit).encode()).decode()
                meta["remainingItemCount"] = len(rest)
        else:
            items = items[start:]
        return {"kind": f"{res.kind}List", "apiVersion": res.group_version, "metadata": meta, "items": items}

    # ------------------------------------------------------------------ write

    def _normalize(self, res, ns, url_name, body) -> dict:
        """Check and complete apiVersion/kind/namespace/name of a request body; returns a copy."""
        if not isinstance(body, dict):
            raise _bad_request(f"the request body must be a JSON {res.kind} object")
        api_version, kind = body.get("apiVersion"), body.get("kind")
        if api_version and api_version != res.group_version:
            raise _bad_request(f"the API version in the data ({api_version}) does not match the expected API "
                               f"version ({res.group_version})")
        if kind and kind != res.kind:
            raise _bad_request(f"the kind in the data ({kind}) does not match the expected kind ({res.kind})")
        meta = body.get("metadata") if body.get("metadata") is not None else {}
        if not isinstance(meta, dict):
            raise _bad_request("metadata must be an object")
        obj = {"apiVersion": res.group_version, "kind": res.kind, "metadata": _without_nulls(meta)}
        obj.update({k: _without_nulls(v) for k, v in body.items()
                    if k not in ("apiVersion", "kind", "metadata") and v is not None})
        meta = obj["metadata"]
        if res.namespaced:
            if meta.get("namespace") and meta["namespace"] != ns:
                raise _bad_request("the namespace of the provided object does not match the namespace sent on "
                                   "the request")
            meta["namespace"] = ns
        else:
            meta.pop("namespace", None)
        if url_name is not None:
            if meta.get("name") and meta["name"] != url_name:
                raise _bad_request(f"the name of the object ({meta['name']}) does not match the name on the URL "
                                   f"({url_name})")
            meta["name"] = url_name
        return obj

    def _check_metadata(self, res, obj) -> None:
        meta = obj["metadata"]
        name = meta["name"]
        causes = []
        style = {"namespaces": "label", "services": "dns1035"}.get(res.plural, "subdomain")
        for err in name_errors(name, style):
            causes.append(("metadata.name", f"Invalid value: {_go_repr(name)}: {err}"))
        for field in ("labels", "annotations"):
            values = meta.get(field)
            if values is None:
                continue
            if not isinstance(values, dict):
                causes.append((f"metadata.{field}", f"Invalid value: {_go_repr(values)}: must be a map"))
                continue
            for key, value in values.items():
                for err in qualified_name_errors(key):
                    causes.append((f"metadata.{field}", f"Invalid value: {_go_repr(key)}: {err}"))
                if field == "labels":
                    for err in label_value_errors(value):
                        causes.append(("metadata.labels", f"Invalid value: {_go_repr(value)}: {err}"))
                elif not isinstance(value, str):
                    causes.append((f"metadata.annotations.{key}", f"Invalid value: {_go_repr(value)}: "
                                                                  "must be a string"))
        if causes:
            raise _invalid(res, name, causes)

    def _check_schema(self, res, obj, query, warnings) -> None:
        if self._validator is None:
            return
        kv = self._validator
        mode = query.get("fieldValidation") or "Strict"
        try:
            kv.validate(obj, self.kube_version, strict=True)
            return
        except kv.SchemaNotFoundError:
            return
        except kv.ValidationError as e:
            strict_error = e
        if mode in ("Ignore", "Warn"):
            try:
                kv.validate(obj, self.kube_version, strict=False)
            except kv.ValidationError as e:
                raise self._schema_invalid(res, obj, e) from None
            if mode == "Warn":
                warnings.append(self._schema_cause(strict_error)[1])
            return
        raise self._schema_invalid(res, obj, strict_error)

    @staticmethod
    def _schema_cause(error) -> tuple[str, str]:
        field = ""
        for part in error.absolute_path:
            field += f"[{part}]" if isinstance(part, int) else (f".{part}" if field else str(part))
        if error.validator == "additionalProperties":
            unknown = re.findall(r"'([^']+)'", error.message.split("(")[-1])
            name = f"{field}.{unknown[0]}" if field and unknown else (unknown[0] if unknown else field)
            return name, f'unknown field "{name}"'
        if error.validator == "required":
            return field or "<root>", f"Required value: {error.message}"
        return field or "<root>", f"Invalid value: {_go_repr(error.instance)}: {error.message}"

    def _schema_invalid(self, res, obj, error) -> ApiError:
        return _invalid(res, obj["metadata"].get("name", ""), [self._schema_cause(error)])

    def _create(self, res, ns, body, query, *, internal=False, keep_status=False, warnings=None):
        """POST. internal=True: an object made by the fake itself (no schema check, status kept if
        keep_status). Returns (201, object)."""
        obj = self._normalize(res, ns, None, body)
        meta = obj["metadata"]
        if not meta.get("name"):
            if meta.get("generateName"):
                meta["name"] = meta["generateName"] + self._suffix()
            else:
                raise _invalid(res, "", [("metadata.name", "Required value: name or generateName is required")])
        name = meta["name"]
        if res.namespaced and not self._store.get(self._key(R_NS, None, ns)):
            raise _not_found(R_NS, ns)
        if self._key(res, ns, name) in self._store:
            details = {"name": name, "kind": res.plural}
            if res.group:
                details["group"] = res.group
            raise ApiError(409, "AlreadyExists", f'{res.qualified} "{name}" already exists', details)
        self._check_metadata(res, obj)
        if not internal:
            self._check_schema(res, obj, query, warnings if warnings is not None else [])
        for field in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp",
                      "deletionGracePeriodSeconds", "generation"):
            meta.pop(field, None)
        if "status" in res.subresources and not keep_status:
            obj.pop("status", None)
        self._default(res, obj, None)
        meta["uid"] = str(self._uuid())
        meta["creationTimestamp"] = self._now()
        meta["generation"] = 1
        obj["metadata"] = {k: meta[k] for k in sorted(meta, key=_meta_rank)}
        if res is R_POD:
            self._start_pod(obj)
        if query.get("dryRun") == "All":
            return 201, obj
        self._save(res, obj, "ADDED")
        result = copy.deepcopy(obj)
        self._after_write(res, obj, None)
        return 201, result

    def _update(self, res, ns, name, body, query, *, sub=None, warnings=None):
        """PUT (sub: None, "status" or "finalize")."""
        old = self._get(res, ns, name)
        obj = self._normalize(res, ns, name, body)
        rv = obj["metadata"].get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise _conflict(res, name)
        return self._replace(res, old, obj, query, sub, warnings)

    def _replace(self, res, old, obj, query, sub, warnings):
        meta, old_meta = obj["metadata"], old["metadata"]
        if sub is not None:                        # status (or namespaces/finalize: spec) only
            field = "spec" if sub == "finalize" else "status"
            new = copy.deepcopy(old)
            new[field] = obj.get(field)
            if new[field] is None:
                new.pop(field)
            obj = new
        else:
            for field in ("uid", "creationTimestamp", "generation", "deletionTimestamp"):
                if field in old_meta:
                    meta[field] = old_meta[field]
                else:
                    meta.pop(field, None)
            meta.pop("resourceVersion", None)
            self._check_metadata(res, obj)
            self._check_schema(res, obj, query, warnings if warnings is not None else [])
            if "status" in res.subresources:
                if "status" in old:
                    obj["status"] = copy.deepcopy(old["status"])
                else:
                    obj.pop("status", None)
            self._default(res, obj, old)
            if obj.get("spec") != old.get("spec"):
                meta["generation"] = old_meta.get("generation", 1) + 1
            obj["metadata"] = {k: meta[k] for k in sorted(meta, key=_meta_rank)}
        comparable = copy.deepcopy(obj)
        comparable["metadata"]["resourceVersion"] = old_meta["resourceVersion"]
        if comparable == old:                      # a no-op write changes nothing, not even resourceVersion
            return 200, old
        if query.get("dryRun") == "All":
            obj["metadata"]["resourceVersion"] = old_meta["resourceVersion"]
            return 200, obj
        self._save(res, obj)
        result = copy.deepcopy(obj)
        if sub is None:
            self._after_write(res, obj, old)
        return 200, result

    def _apply_patch(self, res, name, target, patch, content_type):
        try:
            if content_type == "application/json-patch+json":
                return json_patch(target, patch)
            if not isinstance(patch, dict):
                raise _bad_request("a merge patch must be a JSON object")
            if content_type == "application/merge-patch+json":
                return merge_patch(target, patch)
            if content_type == "application/strategic-merge-patch+json":
                return strategic_merge_patch(target, patch)
        except PatchError as e:
            raise _invalid(res, name, [("<patch>", f"Invalid value: {e}")]) from None
        raise ApiError(415, "UnsupportedMediaType",
                       f"the body of the request was in an unknown format - accepted media types include: "
                       f"{', '.join(PATCH_TYPES)}")

    def _patch(self, res, ns, name, body, content_type, query, *, sub=None, warnings=None):
        if content_type not in PATCH_TYPES:
            self._apply_patch(res, name, {}, body, content_type)   # raises 415
        old = self._get(res, ns, name)
        patched = self._apply_patch(res, name, old, body, content_type)
        if not isinstance(patched, dict):
            raise _bad_request("the patch did not produce an object")
        rv = (patched.get("metadata") or {}).get("resourceVersion")
        if rv and rv != old["metadata"]["resourceVersion"]:
            raise _conflict(res, name)
        patched.setdefault("metadata", {})
        patched["metadata"]["name"] = name
        obj = self._normalize(res, ns, name, patched)
        return self._replace(res, old, obj, query, sub, warnings)

    def _scale_of(self, res, obj) -> dict:
        meta = obj["metadata"]
        return {"kind": "Scale", "apiVersion": "autoscaling/v1",
                "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion", "creationTimestamp")
                             if k in meta},
                "spec": {"replicas": obj["spec"].get("replicas", 1)},
                "status": {"replicas": (obj.get("status") or {}).get("replicas", 0),
                           "selector": label_selector_object_to_string(obj["spec"].get("selector"))}}

    def _set_scale(self, res, ns, name, body, content_type, method, query):
        old = self._get(res, ns, name)
        scale = self._scale_of(res, old)
        if method == "PATCH":
            if content_type not in PATCH_TYPES:
                self._apply_patch(res, name, {}, body, content_type)
            scale = self._apply_patch(res, name, scale, body, content_type)
        else:
            if not isinstance(body, dict):
                raise _bad_request("the request body must be a JSON Scale object")
            scale = body
        replicas = (scale.get("spec") or {}).get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise _invalid(res, name, [("spec.replicas", f"Invalid value: {_go_repr(replicas)}: must be greater "
                                                         "than or equal to 0")])
        new = copy.deepcopy(old)
        new["spec"]["replicas"] = replicas
        if query.get("dryRun") != "All" and new != old:
            new["metadata"]["generation"] = old["metadata"].get("generation", 1) + 1
            self._save(res, new)
            self._after_write(res, new, old)
        return 200, self._scale_of(res, self._load(res, ns, name) or new)

    # ------------------------------------------------------------------ delete

    def _delete(self, res, ns, name, query, body):
        options = body if isinstance(body, dict) else {}
        obj = self._get(res, ns, name)
        pre = options.get("preconditions") or {}
        if pre.get("uid") and pre["uid"] != obj["metadata"]["uid"]:
            raise _conflict(res, name, f"Precondition failed: UID in precondition: {pre['uid']}, UID in object "
                                       f"meta: {obj['metadata']['uid']}")
        if pre.get("resourceVersion") and pre["resourceVersion"] != obj["metadata"]["resourceVersion"]:
            raise _conflict(res, name, f"Precondition failed: ResourceVersion in precondition: "
                                       f"{pre['resourceVersion']}, ResourceVersion in object meta: "
                                       f"{obj['metadata']['resourceVersion']}")
        policy = query.get("propagationPolicy") or options.get("propagationPolicy")
        if policy is None and (query.get("orphanDependents") == "true" or options.get("orphanDependents")):
            policy = "Orphan"
        if policy not in (None, "Orphan", "Background", "Foreground"):
            raise _bad_request(f'Unsupported propagation policy "{policy}"')
        dry = query.get("dryRun") == "All" or options.get("dryRun") == ["All"]
        if not dry:
            self._delete_object(res, obj, policy or "Background")
        if res is R_POD or res is R_NS:
            obj["metadata"]["deletionTimestamp"] = self._now()
            if res is R_POD:
                obj["metadata"]["deletionGracePeriodSeconds"] = obj["spec"].get("terminationGracePeriodSeconds", 30)
            else:
                obj["status"] = {"phase": "Terminating"}
            return 200, obj
        details = {"name": name, "kind": res.plural, "uid": obj["metadata"]["uid"]}
        if res.group:
            details["group"] = res.group
        return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}

    def _delete_collection(self, res, ns, query, body):
        items = self._selected(res, ns, query)
        if query.get("dryRun") != "All":
            for obj in items:
                if self._load(res, obj["metadata"].get("namespace"), obj["metadata"]["name"]) is not None:
                    self._delete_object(res, obj, query.get("propagationPolicy") or "Background")
        return {"kind": f"{res.kind}List", "apiVersion": res.group_version,
                "metadata": {"resourceVersion": str(self._rv)}, "items": items}

    def _delete_object(self, res, obj, policy, *, reconcile=True) -> None:
        """Remove obj, its namespace's contents (for a Namespace) and its dependents (unless Orphan)."""
        self._drop(res, obj)
        uid = obj["metadata"]["uid"]
        if res is R_NS:
            for key in sorted(k for k in self._store if k[2] == obj["metadata"]["name"]):
                if key in self._store:
                    self._drop(BY_PATH[(key[0], key[1])], self._store[key])
        for key, dependent in sorted(self._store.items()):
            refs = dependent["metadata"].get("ownerReferences") or []
            if not any(r.get("uid") == uid for r in refs) or key not in self._store:
                continue
            dep_res = BY_PATH[(key[0], key[1])]
            if policy == "Orphan":
                orphan = copy.deepcopy(dependent)
                orphan["metadata"]["ownerReferences"] = [r for r in refs if r.get("uid") != uid]
                if not orphan["metadata"]["ownerReferences"]:
                    del orphan["metadata"]["ownerReferences"]
                self._save(dep_res, orphan)
            else:
                self._delete_object(dep_res, copy.deepcopy(dependent), policy, reconcile=False)
        if reconcile:
            self._reconcile_owner(obj)        # a controller replaces what it owns (pods, ReplicaSets, ...)
            if res is R_POD:
                self._reschedule_pending()

    # ------------------------------------------------------------------ defaulting and update rules

    def _default(self, res, obj, old) -> None:
        spec = obj.get("spec")
        name = obj["metadata"]["name"]
        if res is R_NS:
            obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = name
            obj["spec"] = {"finalizers": ["kubernetes"]}
            obj["status"] = {"phase": "Active"}
        elif res is R_STS and isinstance(spec, dict):
            spec.setdefault("replicas", 1)
            spec.setdefault("podManagementPolicy", "OrderedReady")
            strategy = spec.setdefault("updateStrategy", {})
            strategy.setdefault("type", "RollingUpdate")
            if strategy["type"] == "RollingUpdate":
                strategy.setdefault("rollingUpdate", {}).setdefault("partition", 0)
            elif strategy.get("rollingUpdate") is not None:
                raise _invalid(res, name, [("spec.updateStrategy.rollingUpdate",
                                            f"Invalid value: {_go_repr(strategy['rollingUpdate'])}: only allowed for "
                                            "updateStrategy 'RollingUpdate'")])
            spec.setdefault("revisionHistoryLimit", 10)
            spec.setdefault("persistentVolumeClaimRetentionPolicy", {"whenDeleted": "Retain", "whenScaled": "Retain"})
            self._check_selector(res, obj)
            if old is not None:
                before = {k: v for k, v in old["spec"].items() if k not in STS_MUTABLE}
                after = {k: v for k, v in spec.items() if k not in STS_MUTABLE}
                if before != after:
                    raise _invalid(res, name, [("spec", "Forbidden: updates to statefulset spec for fields other "
                                                        "than 'replicas', 'ordinals', 'template', 'updateStrategy', "
                                                        "'persistentVolumeClaimRetentionPolicy' and "
                                                        "'minReadySeconds' are forbidden")])
        elif res is R_DEPLOY and isinstance(spec, dict):
            spec.setdefault("replicas", 1)
            strategy = spec.setdefault("strategy", {})
            strategy.setdefault("type", "RollingUpdate")
            if strategy["type"] == "RollingUpdate":
                rolling = strategy.setdefault("rollingUpdate", {})
                rolling.setdefault("maxUnavailable", "25%")
                rolling.setdefault("maxSurge", "25%")
            elif strategy.get("rollingUpdate") is not None:
                raise _invalid(res, name, [("spec.strategy.rollingUpdate", "Forbidden: may not be specified when "
                                                                           "strategy `type` is 'Recreate'")])
            spec.setdefault("revisionHistoryLimit", 10)
            spec.setdefault("progressDeadlineSeconds", 600)
            self._check_selector(res, obj)
            if old is not None and old["spec"].get("selector") != spec.get("selector"):
                raise _invalid(res, name, [("spec.selector", f"Invalid value: {_go_repr(spec.get('selector'))}: "
                                                             "field is immutable")])
        elif res is R_RS and isinstance(spec, dict):
            spec.setdefault("replicas", 1)
            self._check_selector(res, obj)
        elif res is R_JOB and isinstance(spec, dict):
            for field, value in (("parallelism", 1), ("completions", 1), ("backoffLimit", 6),
                                 ("completionMode", "NonIndexed"), ("suspend", False)):
                spec.setdefault(field, value)
            if old is not None and old["spec"].get("template") != spec.get("template"):
                raise _invalid(res, name, [("spec.template", "Invalid value: core.PodTemplateSpec{...}: field is "
                                                             "immutable")])
        elif res is R_SVC and isinstance(spec, dict):
            self._default_service(obj, old)
        elif res.plural == "secrets":
            obj.setdefault("type", "Opaque")
            for key, value in (obj.get("data") or {}).items():
                try:
                    base64.b64decode(value if isinstance(value, str) else "", validate=True)
                except ValueError:
                    raise _bad_request(f'Secret in version "v1" cannot be handled as a Secret: illegal base64 data '
                                       f'in data["{key}"]') from None
            if isinstance(obj.get("stringData"), dict):
                data = obj.setdefault("data", {})
                for k, v in obj.pop("stringData").items():
                    data[k] = base64.b64encode(str(v).encode()).decode()
            if old is not None and old.get("type") != obj.get("type"):
                raise _invalid(res, name, [("type", f"Invalid value: {_go_repr(obj.get('type'))}: field is immutable")])
        if res.plural in ("secrets", "configmaps") and old is not None and old.get("immutable"):
            if any(old.get(k) != obj.get(k) for k in ("data", "binaryData", "immutable")):
                raise _invalid(res, name, [("data", "Forbidden: field is immutable when `immutable` is set")])
        if res is R_POD and isinstance(spec, dict) and old is None:
            self._default_pod_spec(spec)

    def _check_selector(self, res, obj) -> None:
        spec = obj["spec"]
        selector = spec.get("selector")
        labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
        if not selector or not (selector.get("matchLabels") or selector.get("matchExpressions")):
            raise _invalid(res, obj["metadata"]["name"], [("spec.selector", f"Invalid value: {_go_repr(selector)}: "
                                                                            "empty selector is invalid for "
                                                                            f"{res.kind.lower()}")])
        try:
            requirements = label_selector_object_to_requirements(selector)
        except SelectorError as e:
            raise _invalid(res, obj["metadata"]["name"], [("spec.selector", f"Invalid value: {e}")]) from None
        if not labels_match(requirements, labels):
            raise _invalid(res, obj["metadata"]["name"], [("spec.template.metadata.labels",
                                                           f"Invalid value: {_go_repr(labels)}: `selector` does not "
                                                           "match template `labels`")])

    def _default_service(self, obj, old) -> None:
        spec = obj["spec"]
        old_spec = (old or {}).get("spec") or {}
        spec.setdefault("type", "ClusterIP")
        if "clusterIP" not in spec and old_spec.get("clusterIP"):
            spec["clusterIP"] = old_spec["clusterIP"]
        if old_spec.get("clusterIP") and spec.get("clusterIP") != old_spec["clusterIP"]:
            raise _invalid(R_SVC, obj["metadata"]["name"], [
                ("spec.clusterIPs[0]", f"Invalid value: {_go_repr(spec.get('clusterIP'))}: may not change once set")])
        if spec["type"] == "ExternalName":
            return
        if not spec.get("clusterIP"):
            spec["clusterIP"] = f"10.96.{self._svc_ip // 256}.{self._svc_ip % 256}"
            self._svc_ip += 1
        spec["clusterIPs"] = [spec["clusterIP"]]
        if spec["clusterIP"] != "None":
            spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        spec.setdefault("sessionAffinity", "None")
        spec.setdefault("internalTrafficPolicy", "Cluster")
        old_ports = {p.get("port"): p for p in old_spec.get("ports") or []}
        for port in spec.get("ports") or []:
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
            if spec["type"] in ("NodePort", "LoadBalancer") and "nodePort" not in port:
                port["nodePort"] = old_ports.get(port.get("port"), {}).get("nodePort") or self._next_node_port()

    def _next_node_port(self) -> int:
        self._node_port += 1
        return self._node_port

    @staticmethod
    def _default_pod_spec(spec) -> None:
        for field, value in (("restartPolicy", "Always"), ("dnsPolicy", "ClusterFirst"),
                             ("schedulerName", "default-scheduler"), ("terminationGracePeriodSeconds", 30),
                             ("serviceAccountName", "default"), ("securityContext", {}),
                             ("enableServiceLinks", True), ("preemptionPolicy", "PreemptLowerPriority"),
                             ("priority", 0)):
            spec.setdefault(field, value)
        spec.setdefault("serviceAccount", spec["serviceAccountName"])
        for container in (spec.get("initContainers") or []) + (spec.get("containers") or []):
            image = container.get("image", "")
            tag = image.rsplit("/", 1)[-1].partition(":")[2] if "@" not in image else "digest"
            container.setdefault("imagePullPolicy", "Always" if tag in ("", "latest") else "IfNotPresent")
            container.setdefault("terminationMessagePath", "/dev/termination-log")
            container.setdefault("terminationMessagePolicy", "File")
            resources = container.setdefault("resources", {})
            if resources.get("limits"):
                requests = resources.setdefault("requests", {})
                for k, v in resources["limits"].items():
                    requests.setdefault(k, v)
            for port in container.get("ports") or []:
                port.setdefault("protocol", "TCP")

    # ------------------------------------------------------------------ controllers

    def _after_write(self, res, obj, old) -> None:
        ns, name = obj["metadata"].get("namespace"), obj["metadata"]["name"]
        if res is R_STS:
            self._reconcile_statefulset(ns, name)
        elif res is R_DEPLOY:
            self._reconcile_deployment(ns, name)
        elif res is R_RS:
            self._reconcile_replicaset(ns, name)
        elif res is R_JOB:
            self._reconcile_job(ns, name)
        elif res is R_POD and old is None:
            self._pod_events(obj)
        elif res is R_NS and old is None:
            self._create(R_SA, name, {"metadata": {"name": "default"}}, {}, internal=True)
            self._create(R_CM, name, {"metadata": {"name": "kube-root-ca.crt", "annotations": {
                "kubernetes.io/description": "Contains a CA bundle that can be used to verify the kube-apiserver "
                                            "when using internal endpoints such as the internal service IP or "
                                            "kubernetes.default.svc. No other usage is guaranteed across "
                                            "distributions of Kubernetes clusters."}},
                "data": {"ca.crt": "-----BEGIN CERTIFICATE-----\nZmFrZS1rdWJlLWNh\n-----END CERTIFICATE-----\n"}},
                {}, internal=True)

    def _reconcile_owner(self, obj) -> None:
        ref = _controller_ref(obj)
        if not ref:
            return
        res = BY_KIND.get((ref.get("apiVersion"), ref.get("kind")))
        ns = obj["metadata"].get("namespace")
        owner = self._load(res, ns, ref["name"]) if res else None
        if owner is None or owner["metadata"]["uid"] != ref.get("uid"):
            return
        {R_STS: self._reconcile_statefulset, R_RS: self._reconcile_replicaset, R_DEPLOY: self._reconcile_deployment,
         R_JOB: self._reconcile_job}.get(res, lambda *a: None)(ns, ref["name"])

    def _create_controlled_pod(self, owner_res, owner, name, template, labels, spec_extra=None) -> dict | None:
        ns = owner["metadata"]["namespace"]
        tmeta = template.get("metadata") or {}
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": name, "namespace": ns, "labels": {**(tmeta.get("labels") or {}), **labels},
                            "ownerReferences": [self._owner_ref(owner_res, owner)]},
               "spec": {**copy.deepcopy(template.get("spec") or {}), **(spec_extra or {})}}
        if tmeta.get("annotations"):
            pod["metadata"]["annotations"] = copy.deepcopy(tmeta["annotations"])
        if owner_res is R_STS:
            pod["metadata"]["generateName"] = owner["metadata"]["name"] + "-"
        try:
            return self._create(R_POD, ns, pod, {}, internal=True)[1]
        except ApiError as e:
            self._record_event(owner_res, owner, "Warning", "FailedCreate",
                               f"create Pod {name} in {owner_res.kind} {owner['metadata']['name']} failed error: "
                               f"{e.message}", f"{owner_res.kind.lower()}-controller", dedupe=False)
            return None

    def _ensure_revision(self, sts, revision, template) -> None:
        ns = sts["metadata"]["namespace"]
        if self._load(R_CR, ns, revision) is not None:
            return
        numbers = [cr.get("revision", 0) for cr in self._owned(R_CR, ns, sts["metadata"]["uid"])]
        cr = {"metadata": {"name": revision, "namespace": ns,
                           "labels": {**(((template.get("metadata") or {}).get("labels")) or {}),
                                      "controller.kubernetes.io/hash": revision.rsplit("-", 1)[1]},
                           "ownerReferences": [self._owner_ref(R_STS, sts)]},
              "data": {"spec": {"template": {**copy.deepcopy(template), "$patch": "replace"}}},
              "revision": max(numbers, default=0) + 1}
        self._create(R_CR, ns, cr, {}, internal=True)

    def _reconcile_statefulset(self, ns, name) -> None:
        sts = self._load(R_STS, ns, name)
        if sts is None:
            return
        spec = sts["spec"]
        template = spec.get("template") or {}
        revision = f"{name}-{self._hash(template)}"
        self._ensure_revision(sts, revision, template)
        replicas = spec.get("replicas", 1)
        strategy = spec.get("updateStrategy") or {}
        partition = (strategy.get("rollingUpdate") or {}).get("partition", 0)
        parallel = spec.get("podManagementPolicy") == "Parallel"
        uid = sts["metadata"]["uid"]

        def ordinal(pod):
            return int(pod["metadata"]["name"].rsplit("-", 1)[1])

        for pod in sorted(self._owned(R_POD, ns, uid), key=ordinal, reverse=True):
            if ordinal(pod) >= replicas:
                self._delete_object(R_POD, pod, "Background", reconcile=False)

        def create(i):
            extra = {"hostname": f"{name}-{i}"}
            if spec.get("serviceName"):
                extra["subdomain"] = spec["serviceName"]
            volumes = [v for v in (template.get("spec") or {}).get("volumes") or []]
            for claim in spec.get("volumeClaimTemplates") or []:
                claim_name = f"{claim['metadata']['name']}-{name}-{i}"
                self._ensure_pvc(sts, claim, claim_name)
                volumes = [v for v in volumes if v.get("name") != claim["metadata"]["name"]]
                volumes.append({"name": claim["metadata"]["name"], "persistentVolumeClaim": {"claimName": claim_name}})
            if volumes:
                extra["volumes"] = volumes
            labels = {"apps.kubernetes.io/pod-index": str(i), "controller-revision-hash": revision,
                      "statefulset.kubernetes.io/pod-name": f"{name}-{i}"}
            return self._create_controlled_pod(R_STS, sts, f"{name}-{i}", template, labels, extra)

        for i in range(replicas):
            pod = self._load(R_POD, ns, f"{name}-{i}")
            if pod is None:
                pod = create(i)
                if pod is None:
                    break
            if not parallel and not _is_ready(pod):
                break
        if strategy.get("type", "RollingUpdate") == "RollingUpdate":
            for i in range(replicas - 1, partition - 1, -1):
                pod = self._load(R_POD, ns, f"{name}-{i}")
                if pod is None:
                    continue
                if pod["metadata"].get("labels", {}).get("controller-revision-hash") != revision:
                    self._delete_object(R_POD, pod, "Background", reconcile=False)
                    pod = create(i)
                    if not _is_ready(pod):
                        break
                elif not _is_ready(pod):
                    break
        self._statefulset_status(ns, name, revision)

    def _ensure_pvc(self, sts, claim, claim_name) -> None:
        ns = sts["metadata"]["namespace"]
        if self._load(R_PVC, ns, claim_name) is not None:
            return
        claim_spec = copy.deepcopy(claim.get("spec") or {})
        claim_spec.setdefault("volumeMode", "Filesystem")
        claim_spec["volumeName"] = f"pvc-{self._uuid()}"
        labels = {**((claim.get("metadata") or {}).get("labels") or {}),
                  **((sts["spec"].get("selector") or {}).get("matchLabels") or {})}
        pvc = {"metadata": {"name": claim_name, "namespace": ns, "labels": labels}, "spec": claim_spec,
               "status": {"phase": "Bound", "accessModes": claim_spec.get("accessModes", []),
                          "capacity": {"storage": ((claim_spec.get("resources") or {}).get("requests") or {})
                                       .get("storage", "1Gi")}}}
        self._create(R_PVC, ns, pvc, {}, internal=True, keep_status=True)

    def _statefulset_status(self, ns, name, revision) -> None:
        sts = self._load(R_STS, ns, name)
        pods = self._owned(R_POD, ns, sts["metadata"]["uid"])
        old = sts.get("status") or {}
        updated = [p for p in pods if p["metadata"]["labels"].get("controller-revision-hash") == revision]
        current = old.get("currentRevision") or revision
        if len(updated) == len(pods) == sts["spec"].get("replicas", 1):
            current = revision
        ready = sum(_is_ready(p) for p in pods)
        status = {
            "observedGeneration": sts["metadata"].get("generation", 1),
            "replicas": len(pods),
            "readyReplicas": ready,
            "currentReplicas": sum(p["metadata"]["labels"].get("controller-revision-hash") == current for p in pods),
            "updatedReplicas": len(updated),
            "currentRevision": current,
            "updateRevision": revision,
            "collisionCount": 0,
            "availableReplicas": ready,
        }
        self._set_status(R_STS, sts, _omit_zero(status, ("readyReplicas", "currentReplicas", "updatedReplicas")))

    def _reconcile_deployment(self, ns, name) -> None:
        dep = self._load(R_DEPLOY, ns, name)
        if dep is None:
            return
        spec = dep["spec"]
        template = spec.get("template") or {}
        template_hash = self._hash(template)
        rs_name = f"{name}-{template_hash}"
        owned = self._owned(R_RS, ns, dep["metadata"]["uid"])
        desired = spec.get("replicas", 1)
        new_rs = self._load(R_RS, ns, rs_name)
        if new_rs is None:
            revision = 1 + max((int(rs["metadata"].get("annotations", {}).get("deployment.kubernetes.io/revision", 0))
                                for rs in owned), default=0)
            rs_template = copy.deepcopy(template)
            rs_template.setdefault("metadata", {}).setdefault("labels", {})["pod-template-hash"] = template_hash
            selector = copy.deepcopy(spec.get("selector") or {})
            selector.setdefault("matchLabels", {})["pod-template-hash"] = template_hash
            rs = {"metadata": {"name": rs_name, "namespace": ns, "labels": rs_template["metadata"]["labels"],
                               "annotations": {"deployment.kubernetes.io/desired-replicas": str(desired),
                                               "deployment.kubernetes.io/max-replicas": str(desired + 1),
                                               "deployment.kubernetes.io/revision": str(revision)},
                               "ownerReferences": [self._owner_ref(R_DEPLOY, dep)]},
                  "spec": {"replicas": desired, "selector": selector, "template": rs_template}}
            if spec.get("minReadySeconds"):
                rs["spec"]["minReadySeconds"] = spec["minReadySeconds"]
            self._create(R_RS, ns, rs, {}, internal=True)
        elif new_rs["spec"].get("replicas") != desired:
            self._scale_replicaset(new_rs, desired)
        for rs in owned:
            if rs["metadata"]["name"] != rs_name and rs["spec"].get("replicas") != 0:
                self._scale_replicaset(rs, 0)
        self._deployment_status(ns, name)

    def _scale_replicaset(self, rs, replicas) -> None:
        old = copy.deepcopy(rs)
        rs["spec"]["replicas"] = replicas
        rs["metadata"]["generation"] = rs["metadata"].get("generation", 1) + 1
        self._save(R_RS, rs)
        self._after_write(R_RS, rs, old)

    def _reconcile_replicaset(self, ns, name) -> None:
        rs = self._load(R_RS, ns, name)
        if rs is None:
            return
        desired = rs["spec"].get("replicas", 1)
        template = rs["spec"].get("template") or {}
        pods = sorted(self._owned(R_POD, ns, rs["metadata"]["uid"]),
                      key=lambda p: (p["metadata"]["creationTimestamp"], int(p["metadata"]["resourceVersion"])))
        while len(pods) < desired:
            pod = self._create_controlled_pod(R_RS, rs, f"{name}-{self._suffix()}", template, {})
            if pod is None:
                break
            pods.append(pod)
        if len(pods) > desired:
            by_preference = sorted(pods, key=lambda p: (_is_ready(p), p["metadata"]["creationTimestamp"]))
            doomed = by_preference[:len(pods) - desired]
            for pod in doomed:
                self._delete_object(R_POD, pod, "Background", reconcile=False)
            pods = [p for p in pods if p not in doomed]
        ready = sum(_is_ready(p) for p in pods)
        status = {"replicas": len(pods), "fullyLabeledReplicas": len(pods), "readyReplicas": ready,
                  "availableReplicas": ready, "observedGeneration": rs["metadata"].get("generation", 1)}
        self._set_status(R_RS, rs, _omit_zero(status, ("fullyLabeledReplicas", "readyReplicas", "availableReplicas")))
        ref = _controller_ref(rs)
        if ref and ref.get("kind") == "Deployment":
            self._deployment_status(ns, ref["name"])

    def _deployment_status(self, ns, name) -> None:
        dep = self._load(R_DEPLOY, ns, name)
        if dep is None:
            return
        spec = dep["spec"]
        rs_name = f"{name}-{self._hash(spec.get('template') or {})}"
        all_pods, new_pods = [], []
        for rs in self._owned(R_RS, ns, dep["metadata"]["uid"]):
            pods = self._owned(R_POD, ns, rs["metadata"]["uid"])
            all_pods += pods
            if rs["metadata"]["name"] == rs_name:
                new_pods = pods
        desired = spec.get("replicas", 1)
        ready = sum(_is_ready(p) for p in all_pods)
        max_unavailable = ((spec.get("strategy") or {}).get("rollingUpdate") or {}).get("maxUnavailable", 0)
        if isinstance(max_unavailable, str) and max_unavailable.endswith("%"):
            max_unavailable = desired * int(max_unavailable[:-1]) // 100
        available = ready >= desired - int(max_unavailable or 0)
        complete = len(new_pods) == desired and ready == desired == len(all_pods)
        old_conditions = {c["type"]: c for c in (dep.get("status") or {}).get("conditions") or []}

        def condition(kind, ok, reason, message):
            now = self._now()
            previous = old_conditions.get(kind)
            status = "True" if ok else "False"
            if previous and previous["status"] == status and previous["reason"] == reason:
                return previous
            transition = previous["lastTransitionTime"] if previous and previous["status"] == status else now
            return {"type": kind, "status": status, "lastUpdateTime": now, "lastTransitionTime": transition,
                    "reason": reason, "message": message}

        status = {
            "observedGeneration": dep["metadata"].get("generation", 1),
            "replicas": len(all_pods), "updatedReplicas": len(new_pods), "readyReplicas": ready,
            "availableReplicas": ready, "unavailableReplicas": max(desired - ready, 0),
            "conditions": [
                condition("Available", available,
                          "MinimumReplicasAvailable" if available else "MinimumReplicasUnavailable",
                          "Deployment has minimum availability." if available else
                          "Deployment does not have minimum availability."),
                condition("Progressing", True, "NewReplicaSetAvailable" if complete else "ReplicaSetUpdated",
                          f'ReplicaSet "{rs_name}" has successfully progressed.' if complete else
                          f'ReplicaSet "{rs_name}" is progressing.'),
            ],
        }
        self._set_status(R_DEPLOY, dep, _omit_zero(status, ("replicas", "updatedReplicas", "readyReplicas",
                                                            "availableReplicas", "unavailableReplicas")))

    def _reconcile_job(self, ns, name) -> None:
        job = self._load(R_JOB, ns, name)
        if job is None:
            return
        uid = job["metadata"]["uid"]
        pods = self._owned(R_POD, ns, uid)
        if not pods and not (job.get("status") or {}).get("conditions"):
            labels = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
                      "controller-uid": uid, "job-name": name}
            pod = self._create_controlled_pod(R_JOB, job, f"{name}-{self._suffix()}", job["spec"].get("template") or {},
                                              labels)
            pods = [pod] if pod else []
        now = self._now()
        old = job.get("status") or {}
        succeeded = sum((p.get("status") or {}).get("phase") == "Succeeded" for p in pods)
        failed = sum((p.get("status") or {}).get("phase") == "Failed" for p in pods)
        status = {"startTime": old.get("startTime", now), "active": len(pods) - succeeded - failed,
                  "succeeded": succeeded, "failed": failed, "ready": sum(_is_ready(p) for p in pods)}
        if succeeded >= job["spec"].get("completions", 1):
            status["completionTime"] = old.get("completionTime", now)
            status["conditions"] = old.get("conditions") or [
                {"type": "Complete", "status": "True", "lastProbeTime": now, "lastTransitionTime": now}]
        elif failed:
            status["conditions"] = old.get("conditions") or [
                {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
                 "message": "Job has reached the specified backoff limit", "lastProbeTime": now,
                 "lastTransitionTime": now}]
        self._set_status(R_JOB, job, _omit_zero(status, ("active", "succeeded", "failed")))

    # ------------------------------------------------------------------ scheduler and kubelet

    def _fault_for(self, pod) -> dict | None:
        name, ns = pod["metadata"]["name"], pod["metadata"].get("namespace")
        for fault in reversed(self._faults):
            if fault["namespace"] not in (None, ns):
                continue
            if fault["pattern"] == name or fnmatch.fnmatchcase(name, fault["pattern"]):
                return fault
        return None

    def _add_fault(self, pattern, namespace, **fault) -> None:
        with self._cond:
            fault.update(pattern=pattern, namespace=namespace)
            self._faults.append(fault)
            self._refresh_matching(fault)

    def _refresh_matching(self, fault) -> None:
        for pod in self._iter(R_POD, fault["namespace"]):
            name = pod["metadata"]["name"]
            if fault["pattern"] == name or fnmatch.fnmatchcase(name, fault["pattern"]):
                self._refresh_pod(pod)

    def _refresh_pod(self, pod) -> None:
        """Recompute a pod's placement and status (after a fault change or a node addition)."""
        old = copy.deepcopy(pod)
        fault = self._fault_for(pod)
        if fault and fault["kind"] == "unschedulable":
            pod["spec"].pop("nodeName", None)
        self._start_pod(pod)
        if pod != old:
            self._save(R_POD, pod)
            self._pod_events(pod)
            self._reconcile_owner(pod)

    def _reschedule_pending(self) -> None:
        for pod in self._iter(R_POD):
            if not pod["spec"].get("nodeName") and (pod.get("status") or {}).get("phase") == "Pending":
                self._refresh_pod(pod)

    def _nodes(self) -> list[dict]:
        return list(self._iter(R_NODE))

    @staticmethod
    def _node_ip(node) -> str:
        return next((a["address"] for a in node["status"]["addresses"] if a["type"] == "InternalIP"), "")

    @staticmethod
    def _pod_requests(pod) -> dict:
        total: dict = {}
        for container in pod["spec"].get("containers") or []:
            resources = container.get("resources") or {}
            wanted = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
            for k, v in wanted.items():
                try:
                    total[k] = total.get(k, 0) + parse_quantity(v)
                except ValueError:
                    pass
        return total

    @staticmethod
    def _host_ports(pod) -> set:
        ports = set()
        for container in pod["spec"].get("containers") or []:
            for port in container.get("ports") or []:
                host_port = port.get("hostPort")
                if not host_port and pod["spec"].get("hostNetwork"):
                    host_port = port.get("containerPort")
                if host_port:
                    ports.add((port.get("protocol", "TCP"), host_port))
        return ports

    def _node_misfits(self, node, pod, bound) -> list[str]:
        """Why pod cannot go to node (empty: it fits), in the order the scheduler's filters run."""
        spec = pod["spec"]
        labels = node["metadata"].get("labels") or {}
        if node.get("spec", {}).get("unschedulable"):
            return ["node(s) were unschedulable"]
        tolerations = spec.get("tolerations") or []
        for taint in node.get("spec", {}).get("taints") or []:
            if taint.get("effect") not in ("NoSchedule", "NoExecute"):
                continue
            tolerated = any((t.get("key") in (None, "", taint["key"]))
                            and (t.get("operator") == "Exists" or t.get("value", "") == taint.get("value", ""))
                            and t.get("effect") in (None, "", taint["effect"]) for t in tolerations)
            if not tolerated:
                shown = f"{taint['key']}: {taint['value']}" if taint.get("value") else taint["key"]
                return [f"node(s) had untolerated taint {{{shown}}}"]
        selector_ok = all(labels.get(k) == v for k, v in (spec.get("nodeSelector") or {}).items())
        terms = (((spec.get("affinity") or {}).get("nodeAffinity") or {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
        if terms is not None and not any(self._term_matches(node, term) for term in terms):
            selector_ok = False
        if not selector_ok:
            return ["node(s) didn't match Pod's node affinity/selector"]
        node_name = node["metadata"]["name"]
        on_node = [p for p in bound if p["spec"].get("nodeName") == node_name]
        used_ports = set().union(*(self._host_ports(p) for p in on_node)) if on_node else set()
        if self._host_ports(pod) & used_ports:
            return ["node(s) didn't have free ports for the requested pod ports"]
        allocatable = node["status"].get("allocatable") or {}
        reasons = []
        if len(on_node) + 1 > int(parse_quantity(allocatable.get("pods", "110"))):
            reasons.append("Too many pods")
        used: dict = {}
        for p in on_node:
            for k, v in self._pod_requests(p).items():
                used[k] = used.get(k, 0) + v
        for resource, amount in sorted(self._pod_requests(pod).items()):
            if amount == 0:
                continue
            if resource not in allocatable:
                if "/" in resource or resource.startswith("hugepages-"):
                    reasons.append(f"Insufficient {resource}")
                continue
            if used.get(resource, 0) + amount > parse_quantity(allocatable[resource]):
                reasons.append(f"Insufficient {resource}")
        if reasons:
            return reasons
        return self._inter_pod_misfits(node, pod, bound)

    def _inter_pod_misfits(self, node, pod, bound) -> list[str]:
        """Required pod affinity and anti-affinity (preferred terms are ignored, as they only score)."""
        nodes = {n["metadata"]["name"]: n for n in self._nodes()}

        def topology(node_name, key):
            return ((nodes.get(node_name) or {}).get("metadata", {}).get("labels") or {}).get(key)

        def term_selects(term, owner_ns, candidate) -> bool:
            namespaces = term.get("namespaces") or ([] if term.get("namespaceSelector") is not None else [owner_ns])
            if namespaces and candidate["metadata"].get("namespace") not in namespaces:
                return False
            try:
                requirements = label_selector_object_to_requirements(term.get("labelSelector"))
            except SelectorError:
                return False
            return term.get("labelSelector") is not None and labels_match(requirements,
                                                                           candidate["metadata"].get("labels"))

        def required(p, kind):
            return (((p["spec"].get("affinity") or {}).get(kind) or {})
                    .get("requiredDuringSchedulingIgnoredDuringExecution") or [])

        node_name = node["metadata"]["name"]
        ns = pod["metadata"].get("namespace")
        for term in required(pod, "podAntiAffinity"):
            value = topology(node_name, term.get("topologyKey"))
            if value is not None and any(topology(p["spec"]["nodeName"], term.get("topologyKey")) == value
                                         and term_selects(term, ns, p) for p in bound):
                return ["node(s) didn't match pod anti-affinity rules"]
        for p in bound:
            for term in required(p, "podAntiAffinity"):
                value = topology(node_name, term.get("topologyKey"))
                if (value is not None and topology(p["spec"]["nodeName"], term.get("topologyKey")) == value
                        and term_selects(term, p["metadata"].get("namespace"), pod)):
                    return ["node(s) didn't satisfy existing pods anti-affinity rules"]
        for term in required(pod, "podAffinity"):
            value = topology(node_name, term.get("topologyKey"))
            matching = [p for p in bound if term_selects(term, ns, p)]
            if not matching and term_selects(term, ns, pod):
                continue   # the first pod of a group that wants to be together may go anywhere
            if value is None or not any(topology(p["spec"]["nodeName"], term.get("topologyKey")) == value
                                        for p in matching):
                return ["node(s) didn't match pod affinity rules"]
        return []

    @staticmethod
    def _term_matches(node, term) -> bool:
        labels = node["metadata"].get("labels") or {}
        expressions = [(e, labels) for e in term.get("matchExpressions") or []]
        expressions += [(e, {"metadata.name": node["metadata"]["name"]}) for e in term.get("matchFields") or []]
        if not expressions:
            return False
        for expr, values in expressions:
            op, key, wanted = expr.get("operator"), expr.get("key"), expr.get("values") or []
            have = values.get(key)
            if op == "In" and have not in wanted:
                return False
            if op == "NotIn" and have in wanted:
                return False
            if op == "Exists" and key not in values:
                return False
            if op == "DoesNotExist" and key in values:
                return False
            if op in ("Gt", "Lt"):
                try:
                    if not (int(have) > int(wanted[0]) if op == "Gt" else int(have) < int(wanted[0])):
                        return False
                except (TypeError, ValueError, IndexError):
                    return False
        return True

    def _schedule(self, pod) -> tuple[str | None, str]:
        """(node name, "") or (None, the FailedScheduling message)."""
        nodes = self._nodes()
        if not nodes:
            return DEFAULT_NODE, ""
        bound = [p for p in self._iter(R_POD)
                 if p["spec"].get("nodeName") and p["metadata"]["uid"] != pod["metadata"].get("uid")
                 and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
        histogram: Counter = Counter()
        fits = []
        for node in nodes:
            reasons = self._node_misfits(node, pod, bound)
            histogram.update(reasons)
            if not reasons:
                fits.append(node)
        if not fits:
            parts = sorted(f"{n} {reason}" for reason, n in histogram.items())
            return None, f"0/{len(nodes)} nodes are available: {', '.join(parts)}."
        load = Counter(p["spec"]["nodeName"] for p in bound)
        best = min(fits, key=lambda n: load[n["metadata"]["name"]])
        return best["metadata"]["name"], ""

    def _start_pod(self, pod) -> None:
        """Schedule the pod if needed and set its status as the kubelet would (honouring faults)."""
        spec = pod["spec"]
        fault = self._fault_for(pod)
        now = self._now()
        old_status = pod.get("status") or {}
        qos = self._qos(pod)
        message = ""
        if fault and fault["kind"] == "unschedulable":
            message = fault["message"]
        elif not spec.get("nodeName"):
            node_name, message = self._schedule(pod)
            if node_name:
                spec["nodeName"] = node_name
        if not spec.get("nodeName"):
            previous = next((c for c in old_status.get("conditions") or [] if c["type"] == "PodScheduled"), None)
            pod["status"] = {"phase": "Pending", "conditions": [
                {"type": "PodScheduled", "status": "False", "lastProbeTime": None,
                 "lastTransitionTime": previous["lastTransitionTime"] if previous else now,
                 "reason": "Unschedulable", "message": message}], "qosClass": qos}
            return
        node = self._load(R_NODE, None, spec["nodeName"])
        host_ip = self._node_ip(node) if node else DEFAULT_NODE_IP
        if spec.get("hostNetwork"):
            pod_ip = host_ip
        elif old_status.get("podIP"):
            pod_ip = old_status["podIP"]
        else:
            self._pod_ip += 1
            pod_ip = f"10.244.{self._pod_ip // 250}.{self._pod_ip % 250 + 2}"
        started = old_status.get("startTime") or now
        ref = _controller_ref(pod)
        is_job = bool(ref and ref.get("kind") == "Job")
        old_ids = {c["name"]: c.get("containerID") for c in old_status.get("containerStatuses") or []}
        statuses = []
        containers = spec.get("containers") or []
        crash_target = None
        if fault and fault["kind"] == "crash_loop" and containers:
            crash_target = fault.get("container") or containers[0]["name"]
        for c in containers:
            image = c.get("image", "")
            repo = image.split("@")[0]
            if ":" in repo.rsplit("/", 1)[-1]:
                repo = repo.rsplit(":", 1)[0]
            container_id = old_ids.get(c["name"]) or f"containerd://{self._hex(64)}"
            status = {"name": c["name"], "image": image,
                      "imageID": f"{repo}@sha256:{hashlib.sha256(image.encode()).hexdigest()}",
                      "containerID": container_id, "ready": True, "started": True, "restartCount": 0,
                      "state": {"running": {"startedAt": started}}, "lastState": {}}
            if is_job:
                failed = c["name"] == crash_target
                status.update(ready=False, started=False, state={"terminated": {
                    "exitCode": fault["exit_code"] if failed else 0, "reason": "Error" if failed else "Completed",
                    **({"message": fault["message"]} if failed and fault["message"] else {}),
                    "startedAt": started, "finishedAt": now, "containerID": container_id}})
            elif c["name"] == crash_target:
                terminated = {"exitCode": fault["exit_code"], "reason": "Error", "startedAt": started,
                              "finishedAt": now, "containerID": container_id}
                if fault["message"]:
                    terminated["message"] = fault["message"]
                status.update(ready=False, started=False, restartCount=fault["restart_count"],
                              state={"waiting": {"reason": "CrashLoopBackOff", "message":
                                                 f"back-off 5m0s restarting failed container={c['name']} "
                                                 f"pod={pod['metadata']['name']}_{pod['metadata']['namespace']}"
                                                 f"({pod['metadata'].get('uid', '')})"}},
                              lastState={"terminated": terminated})
            elif fault and fault["kind"] == "never_ready":
                status["ready"] = False
            statuses.append(status)
        unready = [s["name"] for s in statuses if not s["ready"]]
        phase = "Running"
        if is_job:
            phase = "Failed" if crash_target else "Succeeded"

        def condition(kind, ok, reason=None, message=None):
            previous = next((c for c in old_status.get("conditions") or [] if c["type"] == kind), None)
            value = "True" if ok else "False"
            c = {"type": kind, "status": value, "lastProbeTime": None,
                 "lastTransitionTime": previous["lastTransitionTime"] if previous and previous["status"] == value
                 else now}
            if not ok and reason:
                c.update(reason=reason, message=message)
            return c

        not_ready = ("PodCompleted", "") if is_job else (
            "ContainersNotReady", f"containers with unready status: [{' '.join(unready)}]")
        pod["status"] = {
            "phase": phase,
            "conditions": [condition("Initialized", True),
                           condition("Ready", not unready, *not_ready),
                           condition("ContainersReady", not unready, *not_ready),
                           condition("PodScheduled", True)],
            "hostIP": host_ip, "podIP": pod_ip, "podIPs": [{"ip": pod_ip}], "startTime": started,
            "containerStatuses": statuses, "qosClass": qos,
        }

    @staticmethod
    def _qos(pod) -> str:
        containers = pod["spec"].get("containers") or []
        resources = [c.get("resources") or {} for c in containers]
        if not any(r.get("limits") or r.get("requests") for r in resources):
            return "BestEffort"
        guaranteed = all((r.get("limits") or {}).get(k) is not None
                         and (r.get("requests") or {}).get(k, (r.get("limits") or {}).get(k)) == r["limits"][k]
                         for r in resources for k in ("cpu", "memory"))
        return "Guaranteed" if guaranteed else "Burstable"

    # ------------------------------------------------------------------ events

    def _record_event(self, res, involved, type_, reason, message, component, *, host=None, count=1,
                      field_path=None, dedupe=True) -> None:
        meta = involved["metadata"]
        ns = meta.get("namespace") or "default"
        if dedupe:
            if (meta["uid"], reason, message) in self._emitted:
                return
            self._emitted.add((meta["uid"], reason, message))
        now = self._now()
        ref = {"kind": res.kind, "namespace": meta.get("namespace"), "name": meta["name"], "uid": meta["uid"],
               "apiVersion": res.group_version, "resourceVersion": meta.get("resourceVersion")}
        if field_path:
            ref["fieldPath"] = field_path
        event = {"metadata": {"name": f"{meta['name']}.{self._hex(16)}", "namespace": ns},
                 "involvedObject": {k: v for k, v in ref.items() if v is not None},
                 "reason": reason, "message": message,
                 "source": {"component": component, **({"host": host} if host else {})},
                 "firstTimestamp": now, "lastTimestamp": now, "count": count, "type": type_,
                 "eventTime": None, "reportingComponent": component, "reportingInstance": host or ""}
        if self._store.get(self._key(R_NS, None, ns)):
            self._create(R_EVENT, ns, event, {}, internal=True)

    def _pod_events(self, pod) -> None:
        meta, spec, status = pod["metadata"], pod["spec"], pod.get("status") or {}
        node = spec.get("nodeName")
        scheduled = next((c for c in status.get("conditions") or [] if c["type"] == "PodScheduled"), {})
        if scheduled.get("status") == "False":
            self._record_event(R_POD, pod, "Warning", "FailedScheduling", scheduled.get("message", ""),
                               "default-scheduler")
            return
        if node:
            self._record_event(R_POD, pod, "Normal", "Scheduled",
                               f"Successfully assigned {meta['namespace']}/{meta['name']} to {node}",
                               "default-scheduler")
        fault = self._fault_for(pod)
        if not fault or not spec.get("containers"):
            return
        if fault["kind"] == "never_ready":
            container = spec["containers"][0]["name"]
            self._record_event(R_POD, pod, "Warning", "Unhealthy", fault["message"], "kubelet", host=node,
                               field_path=f"spec.containers{{{container}}}")
        elif fault["kind"] == "crash_loop":
            container = fault.get("container") or spec["containers"][0]["name"]
            self._record_event(R_POD, pod, "Warning", "BackOff",
                               f"Back-off restarting failed container {container} in pod "
                               f"{meta['name']}_{meta['namespace']}({meta['uid']})",
                               "kubelet", host=node, count=fault["restart_count"],
                               field_path=f"spec.containers{{{container}}}")

    # ------------------------------------------------------------------ watch

    def _watch(self, handler, res, ns, query) -> None:
        """Stream watch events as chunked JSON lines until timeoutSeconds, the client leaves, or stop()."""
        try:
            labels = parse_label_selector(query.get("labelSelector"))
            fields = parse_field_selector(query.get("fieldSelector"))
            timeout = float(query.get("timeoutSeconds") or 1800)
            rv = int(query.get("resourceVersion") or 0)
        except (SelectorError, ValueError) as e:
            raise _bad_request(str(e)) from None
        if rv == 0:      # no resourceVersion: the current objects first, as ADDED events
            initial = [("ADDED", o) for o in self._iter(res, ns)]
            position = len(self._log)
        else:
            initial = []
            position = next((i for i, entry in enumerate(self._log) if entry[0] > rv), len(self._log))

        def wanted(event_res, obj):
            return (event_res is res and (ns is None or obj["metadata"].get("namespace") == ns)
                    and labels_match(labels, obj["metadata"].get("labels")) and fields_match(fields, obj))

        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.end_headers()

        def send(events) -> bool:
            try:
                for kind, obj in events:
                    data = json.dumps({"type": kind, "object": obj}).encode() + b"\n"
                    handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                handler.wfile.flush()
                return True
            except OSError:
                return False

        end = time.monotonic() + (timeout if timeout > 0 else 1800)
        self._cond.release()   # _serve holds the lock: let writers in while we stream
        try:
            ok = send([(k, o) for k, o in initial if wanted(res, o)])
            while ok:
                with self._cond:
                    while position >= len(self._log) and not self._stopping and time.monotonic() < end:
                        self._cond.wait(timeout=min(0.5, max(end - time.monotonic(), 0.01)))
                    events = [(kind, copy.deepcopy(obj)) for _, kind, r, obj in self._log[position:] if wanted(r, obj)]
                    position = len(self._log)
                    finished = self._stopping or time.monotonic() >= end
                if events:
                    ok = send(events)
                if finished:
                    break
            try:
                handler.wfile.write(b"0\r\n\r\n")
                handler.wfile.flush()
            except OSError:
                pass
        finally:
            self._cond.acquire()


def _meta_rank(key: str) -> int:
    return _META_ORDER.index(key) if key in _META_ORDER else len(_META_ORDER)


_META_ORDER = ["name", "generateName", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp",
               "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations", "ownerReferences",
               "finalizers"]


def _openapi_v2_document() -> bytes:
    """A minimal gnostic openapi_v2.Document in protobuf: swagger "2.0", an info block, no paths and no
    definitions. kubectl's validator skips kinds it has no schema for, so helm's client-side validation
    accepts everything and the server's own validation is what rejects bad objects."""
    def field(number: int, payload: bytes) -> bytes:    # length-delimited field (wire type 2)
        return bytes([(number << 3) | 2]) + _varint(len(payload)) + payload

    info = field(1, b"Kubernetes") + field(2, KUBE_VERSION["gitVersion"].encode())
    return field(1, b"2.0") + field(2, info)


def _varint(n: int) -> bytes:
    out = b""
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out += bytes([byte | 0x80])
        else:
            return out + bytes([byte])


_OPENAPI_V2 = _openapi_v2_document()
