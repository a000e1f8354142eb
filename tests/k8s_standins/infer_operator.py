"""A stand-in for MindCluster's Infer Operator (InferServiceSet, mindcluster.huawei.com/v1), written from its source.

The real operator (Ascend/mind-cluster component/infer-operator, Go module ``infer-operator`` with a local
``ascend-common`` replace) cannot be fetched from the module proxy, so it is not built for the test control plane.
This module reconciles the same objects against the real API server, so that the real kube-controller-manager makes
pods of the workloads, kwok runs them, and the real garbage collector removes everything with the InferServiceSet.

Every behaviour cites the upstream source at Ascend/mind-cluster@22bb3d987bc0208c3eb7395e222b661276133c58 (the API is
identical to tag v26.1.0), paths relative to component/infer-operator/:

  ISS   pkg/controller/v1/inferserviceset_controller.go      IS    pkg/controller/v1/inferservice_controller.go
  IST   pkg/controller/v1/instanceset_controller.go          WR    pkg/controller/workload/workload_reconciler.go
  STS   pkg/controller/workload/statefulset_handler.go       DEP   pkg/controller/workload/deployment_handler.go
  PG    pkg/controller/workload/podgroup_manager.go          UT    pkg/common/utils.go
  C     pkg/common/constant.go                               RES   pkg/common/utils/resource.go
  SCH   pkg/controller/schedule/priority_scheduling.go       CRD   pkg/common/client-go/crd.go
  SM    pkg/controller/scaling/scaling_manager.go            MAIN  main.go

Use::

    op = InferOperator(cluster_or_kubeconfig, namespace).start()   # a KubeCluster (its .kubeconfig) or a path
    ...
    op.stop()

A thread polls every ``interval`` seconds (0.2) and reconciles, in this order, every InferServiceSet, InferService
and InstanceSet of the namespace (upstream: three controller-runtime controllers, one per kind, ISS/IS/IST
SetupWithManager). ``op.errors`` keeps the last reconcile errors (what upstream would log and requeue).

What the real operator writes, and this stand-in too:
  InferServiceSet ``<iss>`` -> InferService ``<iss>-<i>`` for i < spec.replicas (ISS L404-416), labels
      infer.huawei.com/inferserviceset-name, infer.huawei.com/inferservice-index, spec = spec.template;
  InferService ``<is>`` -> InstanceSet ``<is>-<role>`` per role (IS L478-527), labels = role metadata.labels +
      infer.huawei.com/inferservice-name=<is>, infer.huawei.com/instanceset-name=<role>,
      infer.huawei.com/priority-scheduling-strategy=<schedulingStrategy.type or Parallel>; spec = the role;
  InstanceSet -> per instance idx < role.replicas: the workload ``<is>-<role>-<idx>`` (StatefulSet or Deployment,
      STS L157-226, DEP L179-242), the per-instance Service ``service-<is>-<role>-<idx>`` (STS L228-266 headless, always;
      DEP L244-277 ClusterIP, only when the role has no services), a Volcano PodGroup ``pg-<is>-<role>-<idx>`` when
      the InstanceSet's label infer.huawei.com/gang-schedule is "true" (WR L75-96, PG L109-138); and per role
      service the Service ``<svc.name>-<is>-<role>`` (IST L190-237);
  a role's scalingPolicy of type HPA -> the HorizontalPodAutoscaler ``<instanceset>-scaler`` (autoscaling/v2, served
      by the test API server: MAIN L173-178) targeting the InstanceSet, its spec the policy's, labelled like the
      InstanceSet plus infer.huawei.com/scaling-owned-by, put back when edited and deleted with the policy
      (IST L101-115, SM L57-239); such an InstanceSet keeps its replicas (what the HPA set through its /scale) when
      its role changes (IS L383-391, L407-429).
  status (Ready condition, replicas, readyReplicas, observedGeneration) on all three kinds (ISS L268-313,
      IS L306-352, IST L362-398).
  Every child has one owner reference with controller: true and blockOwnerDeletion: true (controllerutil.
  SetControllerReference in ISS L386 and IS L456, metav1.NewControllerRef everywhere else).

Not done (the tests do not need them; upstream does them):
  - of scalingPolicy: the status fields (status.labelSelector, scalingResourceStatus: IST L286-318) and the labels
    added to an External metric's selector (SM L241-283);
  - schedulingStrategy Priority (SCH shouldScheduleWithPriority): an InstanceSet labelled Priority is reported as an
    error and gets no workloads (the Parallel default is done);
  - rescheduling of faulty pods and fault-scheduling external-* pod deletion (pkg/controller/rescheduling/,
    pkg/controller/workload/workload_common.go);
  - container snapshots (label infer.huawei.com/container-snapshot: ConfigMaps, volumes, env, the ``active`` Service
    selector; pkg/snapshot/, STS L192-199, L235-238);
  - the node pod cleaner (pkg/controller/nodepodcleaner/) and the operator's ConfigMap (pkg/configManager/);
  - the InstanceSet's workload handlers other than apps/v1 Deployment and StatefulSet (MAIN L228-246 registers
    only those two, so nothing is missing here).
Like upstream, existing workloads, PodGroups and Services are never updated: a changed role reaches the InstanceSet's
spec (IS L369-405) but a workload that exists is left as it is (STS L111-155, DEP L120-151 only create); only new
instances (a higher role.replicas, or a deleted workload) are created from the new spec. Likewise an InstanceSet's
labels and annotations are set when it is created (IS L478-527) and never updated, and a role's services are created
once (IST L190-237) and removed only with their InstanceSet. The operator sets no spec.selector and no
podManagementPolicy: both come from the role's spec unchanged (a role without a selector gets a workload the API
server refuses, retried); it does overwrite a StatefulSet's serviceName (STS L190).

Differences of form: upstream reacts to watch events, this polls (the same level-triggered result); upstream's event
recorder aggregates repeated events into one Event's count, this sends each (object, reason, message) once.
"""

from __future__ import annotations

import copy
import datetime
import json
import re
import secrets
import threading
from decimal import Decimal
from pathlib import Path
from urllib.parse import quote

GROUP, VERSION = "mindcluster.huawei.com", "v1"         # pkg/api/v1/groupversion_info.go L27
API_VERSION = f"{GROUP}/{VERSION}"

# label and annotation keys (C L29-64, L117, L172-175, L185; ascend-common api/consts.go L226, L241)
PREFIX = "infer.huawei.com/"
OPERATOR_LABEL = PREFIX + "ascend-infer-operator"                       # C L31
INFERSERVICE_NAME_LABEL = PREFIX + "inferservice-name"                  # C L50
INSTANCESET_NAME_LABEL = PREFIX + "instanceset-name"                    # C L52 (the role name)
INSTANCE_INDEX_LABEL = PREFIX + "instanceset-index"                     # C L54
GANG_SCHEDULE_LABEL = PREFIX + "gang-schedule"                          # C L56
GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"                  # C L58
INFERSERVICESET_NAME_LABEL = PREFIX + "inferserviceset-name"            # C L60
INFERSERVICE_INDEX_LABEL = PREFIX + "inferservice-index"                # C L62
SCHEDULING_STRATEGY_LABEL = PREFIX + "priority-scheduling-strategy"     # C L175
INFERSERVICE_ID_LABEL = "inferserviceid"                                # C L117
FAULT_SCHEDULING_LABEL = "fault-scheduling"                             # C L185
SCALING_OWNED_BY_LABEL = PREFIX + "scaling-owned-by"                    # SM L40
SCALING_POLICY_HPA = "HPA"                                              # C L179-180
HPAS = "/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers"
SCHEDULE_POLICY_ANNOTATION = "huawei.com/schedule_policy"               # ascend-common/api/consts.go L226
SUPERPOD_POLICY_SUFFIX = "-sp"                                          # ascend-common/api/consts.go L241
# env added to every container of the pod template (C L67-73, UT L112-138)
ENV_INSTANCE_INDEX, ENV_INSTANCE_ROLE = "INSTANCE_INDEX", "INSTANCE_ROLE"
ENV_INFER_SERVICE_INDEX, ENV_INFER_SERVICE_NAME = "INFER_SERVICE_INDEX", "INFER_SERVICE_NAME"

VOLCANO_PODGROUP_CRD = "podgroups.scheduling.volcano.sh"                # C L33
MAX_INFER_SERVICE_REPLICAS, MAX_ROLE_TYPE_COUNT, MAX_ROLE_REPLICAS = 64, 32, 256   # C L164-168
DEFAULT_PORT_NAME, DEFAULT_PORT = "infer", 8080                         # C L99-101
PARALLEL, PRIORITY = "Parallel", "Priority"                             # C L173-174
INSTANCESET_CONTROLLER = "instanceset-controller"                       # C L41: the events' source
VALIDATE_ERROR_REASON = "ValidateError"                                 # C L76
SERVICE_CREATE_REASON = "ServiceCreateError"                            # C L78

WORKLOADS = {"StatefulSet": "statefulsets", "Deployment": "deployments"}   # MAIN L228-246: the two handlers
_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


class ApiError(Exception):
    def __init__(self, status: int, body):
        super().__init__(f"HTTP {status}: {body}")
        self.status, self.body = status, body


class RequeueError(Exception):
    """Upstream's common.RequeueError (pkg/common/common.go L31-47): the InstanceSet's status is still written."""


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")   # metav1.Time, seconds


def _labels(meta: dict) -> dict:
    return dict((meta or {}).get("labels") or {})


def add_labels_from_indexer(labels: dict | None, service: str, role: str, index: str) -> dict:
    """UT L62-70: a copy of labels plus the four indexer labels (index "" where upstream's indexer has none yet)."""
    out = dict(labels or {})
    out.update({INFERSERVICE_NAME_LABEL: service, INSTANCESET_NAME_LABEL: role, INSTANCE_INDEX_LABEL: index,
                OPERATOR_LABEL: "true"})
    return out


def workload_name(service: str, role: str, index: str) -> str:
    return f"{service}-{role}-{index}"                   # UT L80-82


def instance_service_name(service: str, role: str, index: str) -> str:
    return f"service-{service}-{role}-{index}"           # UT L85-87


def podgroup_name(service: str, role: str, index: str) -> str:
    return f"pg-{service}-{role}-{index}"                # UT L90-92


def controller_ref(owner: dict) -> dict:
    """metav1.NewControllerRef / controllerutil.SetControllerReference: controller and blockOwnerDeletion true."""
    return {"apiVersion": owner["apiVersion"], "kind": owner["kind"], "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True}


def set_status_condition(conditions: list, new: dict) -> list:
    """apimachinery meta.SetStatusCondition: lastTransitionTime changes only with the status; reason and message
    always follow the new condition."""
    out = [dict(c) for c in conditions]
    for c in out:
        if c.get("type") == new["type"]:
            if c.get("status") != new["status"]:
                c["status"] = new["status"]
                c["lastTransitionTime"] = new["lastTransitionTime"]
            c["reason"], c["message"] = new["reason"], new["message"]
            c.pop("observedGeneration", None)          # the new condition has none (0: omitted)
            return out
    out.append(dict(new))
    return out


def _hpa_managed(spec: dict) -> bool:
    """IS L419-421: an InstanceSet (spec) whose scalingPolicy is of type HPA."""
    return ((spec.get("scalingPolicy") or {}).get("type")) == SCALING_POLICY_HPA


def _within(want, have) -> bool:
    """Every field of ``want`` has its value in ``have`` (what the API server added aside): the stand-in updates an
    HPA only when it differs, where upstream updates it on every reconcile (SM L162-177), to poll without writes."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all(_within(v, have.get(k)) for k, v in want.items())
    if isinstance(want, list):
        return isinstance(have, list) and len(want) == len(have) and all(map(_within, want, have))
    return want == have


def _omit_empty(status: dict) -> dict:
    """The status as the API server returns it: Go's omitempty drops zero counts and empty lists/strings."""
    return {k: v for k, v in status.items() if v not in (0, "", None, [], {})}


def is_condition_true(obj: dict, ctype: str = "Ready") -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True"
               for c in ((obj.get("status") or {}).get("conditions") or []))


# ---- quantities (RES L23-81: PodGroup minResources) ----------------------------------------------------------------
_SUFFIX = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60, "n": Decimal("1e-9"),
           "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12,
           "P": 10**15, "E": 10**18}


def _parse_quantity(q) -> tuple[Decimal, bool]:
    """(value, binary suffix) of a resource.Quantity string."""
    m = re.fullmatch(r"([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)", str(q).strip())
    if not m or m.group(2) not in _SUFFIX:
        raise ValueError(f"quantity {q!r}")
    return Decimal(m.group(1)) * Decimal(_SUFFIX[m.group(2)]), m.group(2).endswith("i")


def _format_quantity(value: Decimal, binary: bool) -> str:
    """resource.Quantity's canonical form (BinarySI for a whole multiple of 1024 when the first operand was binary,
    else DecimalSI with the largest exact suffix, milli for fractions)."""
    if binary and value == value.to_integral_value():
        for suf in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            if value % _SUFFIX[suf] == 0 and value >= _SUFFIX[suf]:
                return f"{int(value // _SUFFIX[suf])}{suf}"
        if value < 1024:
            return str(int(value))
    if value == value.to_integral_value():
        v, exp = int(value), 0
        while v and v % 1000 == 0 and exp < 18:
            v, exp = v // 1000, exp + 3
        return f"{v}{ {0: '', 3: 'k', 6: 'M', 9: 'G', 12: 'T', 15: 'P', 18: 'E'}[exp]}"
    milli = value * 1000
    if milli == milli.to_integral_value():
        return f"{int(milli)}m"
    return f"{int((value * 10**9).to_integral_value())}n"


def calc_min_resources(replicas: int, pod_spec: dict) -> dict | None:
    """RES L23-54: per-pod container requests (limits for a resource without a request) times replicas; None
    when replicas <= 0 or nothing is requested."""
    if replicas <= 0:
        return None
    single: dict[str, tuple[Decimal, bool]] = {}
    for c in pod_spec.get("containers") or []:
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        for name, q in [*req.items(), *((n, q) for n, q in lim.items() if n not in req)]:
            v, binary = _parse_quantity(q)
            if name in single:
                single[name] = (single[name][0] + v, single[name][1])   # Quantity.Add keeps the first one's format
            else:
                single[name] = (v, binary)
    if not single:
        return None
    return {name: _format_quantity(v * replicas, binary) for name, (v, binary) in single.items()}


# ---- the REST client -----------------------------------------------------------------------------------------------
class _Api:
    """JSON over the kubernetes client's ApiClient (the project's dependency), for a kubeconfig."""

    def __init__(self, kubeconfig: str | Path):
        from kubernetes import config

        self.client = config.new_client_from_config(config_file=str(kubeconfig))

    def request(self, method: str, path: str, body=None, content_type: str = "application/json"):
        headers = {"Content-Type": content_type, "Accept": "application/json"}
        if hasattr(self.client, "param_serialize"):       # kubernetes >= 35 (openapi-generator 7)
            m, url, hdrs, data, _ = self.client.param_serialize(method, path, header_params=headers, body=body,
                                                                auth_settings=["BearerToken"])
            resp = self.client.call_api(m, url, header_params=hdrs, body=data, _request_timeout=30)
            resp.read()
            status, raw = resp.status, resp.data
        else:
            from kubernetes.client.exceptions import ApiException

            try:
                resp = self.client.call_api(path, method, header_params=headers, body=body,
                                            auth_settings=["BearerToken"], _preload_content=False,
                                            _return_http_data_only=True, _request_timeout=30)
                status, raw = resp.status, resp.data
            except ApiException as e:
                status, raw = e.status, e.body
        try:
            decoded = json.loads(raw) if raw else None
        except ValueError:
            decoded = raw
        if not 200 <= status < 300:
            raise ApiError(status, decoded)
        return decoded

    def get(self, path: str) -> dict | None:
        try:
            return self.request("GET", path)
        except ApiError as e:
            if e.status == 404:
                return None
            raise

    def list(self, path: str, selector: dict | None = None) -> list[dict]:
        if selector:
            path += "?labelSelector=" + quote(",".join(f"{k}={v}" for k, v in sorted(selector.items())))
        return (self.get(path) or {}).get("items") or []


class InferOperator:
    def __init__(self, cluster_or_kubeconfig, namespace: str, interval: float = 0.2):
        kubeconfig = getattr(cluster_or_kubeconfig, "kubeconfig", cluster_or_kubeconfig)
        self.api = _Api(kubeconfig)
        self.ns = namespace
        self.interval = interval
        self.errors: list[str] = []
        self.support_podgroup = False
        self._events_sent: set[tuple] = set()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # ---- lifecycle --------------------------------------------------------------------------------------------
    def start(self) -> "InferOperator":
        # IST L479-487, CRD L33-45: PodGroups are supported when Volcano's PodGroup CRD exists and is Established
        # when the operator starts (not re-checked later).
        crd = self.api.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{VOLCANO_PODGROUP_CRD}")
        self.support_podgroup = bool(crd) and any(
            c.get("type") == "Established" and c.get("status") == "True"
            for c in (crd.get("status") or {}).get("conditions") or [])
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name=f"infer-operator-{self.ns}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(timeout=30)
            self._thread = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.reconcile_once()
            self._stop.wait(self.interval)

    def _error(self, what: str, err: Exception) -> None:
        self.errors = (self.errors + [f"{what}: {err}"])[-50:]

    def reconcile_once(self) -> None:
        for kind, plural, fn in (("InferServiceSet", "inferservicesets", self.reconcile_inferserviceset),
                                 ("InferService", "inferservices", self.reconcile_inferservice),
                                 ("InstanceSet", "instancesets", self.reconcile_instanceset)):
            try:
                objs = self.api.list(self._crs(plural))
            except Exception as e:          # noqa: BLE001 - the API server is going away at teardown
                self._error(f"list {plural}", e)
                continue
            for obj in objs:
                if obj["metadata"].get("deletionTimestamp"):
                    continue                # ISS L120-123, IS L174-177, IST L84-87
                try:
                    fn(obj)
                except Exception as e:      # noqa: BLE001 - upstream logs and requeues
                    self._error(f"{kind} {obj['metadata']['name']}", e)

    # ---- paths ------------------------------------------------------------------------------------------------
    def _crs(self, plural: str, name: str = "") -> str:
        return f"/apis/{GROUP}/{VERSION}/namespaces/{self.ns}/{plural}" + (f"/{name}" if name else "")

    def _core(self, plural: str, name: str = "") -> str:
        return f"/api/v1/namespaces/{self.ns}/{plural}" + (f"/{name}" if name else "")

    def _apps(self, plural: str, name: str = "") -> str:
        return f"/apis/apps/v1/namespaces/{self.ns}/{plural}" + (f"/{name}" if name else "")

    def _create(self, path: str, obj: dict) -> dict | None:
        """Create; None when it already exists (ISS L393-395, IS L465-468 skip it)."""
        try:
            return self.api.request("POST", path, obj)
        except ApiError as e:
            if e.status == 409:
                return None
            raise

    def _delete(self, path: str) -> None:
        try:
            self.api.request("DELETE", path)
        except ApiError as e:
            if e.status != 404:
                raise

    def _write_status(self, plural: str, name: str, status: dict, keep: tuple = ()) -> None:
        """Get the latest object, set its status, PUT the status subresource, again on a conflict
        (retry.RetryOnConflict in ISS L315-328, IS L354-367, IST L337-359; ``keep``: fields upstream preserves)."""
        for _ in range(5):
            latest = self.api.get(self._crs(plural, name))
            if latest is None:
                return
            old = latest.get("status") or {}
            new = dict(status)
            for k in keep:
                if k in old:
                    new[k] = old[k]
            latest["status"] = new
            try:
                self.api.request("PUT", self._crs(plural, name) + "/status", latest)
                return
            except ApiError as e:
                if e.status != 409:
                    raise
        raise RuntimeError(f"status of {plural}/{name}: conflicts")

    def _event(self, obj: dict, etype: str, reason: str, message: str) -> None:
        """record.EventRecorder.Eventf(obj, ...) of the instanceset-controller (IST L453), once per object,
        reason and message (the real recorder aggregates repeats into one Event's count)."""
        key = (obj["metadata"]["uid"], reason, message)
        if key in self._events_sent:
            return
        self._events_sent.add(key)
        now = _now()
        meta = obj["metadata"]
        self._create(self._core("events"), {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{secrets.token_hex(8)}", "namespace": self.ns},
            "involvedObject": {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"],
                               "namespace": self.ns, "uid": meta["uid"],
                               "resourceVersion": meta.get("resourceVersion", "")},
            "reason": reason, "message": message, "type": etype, "count": 1,
            "firstTimestamp": now, "lastTimestamp": now,
            "source": {"component": INSTANCESET_CONTROLLER}, "reportingComponent": INSTANCESET_CONTROLLER})

    # ==== InferServiceSet (ISS) ======================================================================================
    def reconcile_inferserviceset(self, iss: dict) -> None:
        name = iss["metadata"]["name"]
        spec = iss.get("spec") or {}
        replicas = spec.get("replicas")
        if replicas is None:
            replicas = 1                                             # ISS L130-133
        if replicas > MAX_INFER_SERVICE_REPLICAS or replicas < 1:   # ISS L134-139: error, no status
            raise ValueError(f"inferServiceSet {self.ns}/{name} replicas {replicas} exceeds max "
                             f"{MAX_INFER_SERVICE_REPLICAS} or less than 1")
        selector = {INFERSERVICESET_NAME_LABEL: name}               # ISS L148-150
        existing: dict[int, dict] = {}
        for svc in self.api.list(self._crs("inferservices"), selector):   # ISS L162-179: by the index label
            try:
                existing[int(_labels(svc["metadata"])[INFERSERVICE_INDEX_LABEL])] = svc
            except (KeyError, ValueError):
                continue
        template = spec.get("template") or {}
        to_create, to_update = [], []
        for i in range(replicas):                                    # ISS L189-199
            if i in existing:
                if (existing.pop(i).get("spec") or {}) != template:      # ISS L355-363
                    to_update.append(f"{name}-{i}")
            else:
                to_create.append(i)
        for svc in existing.values():                                # ISS L201-210, L365-379: the rest is deleted
            self._delete(self._crs("inferservices", svc["metadata"]["name"]))
        for is_name in to_update:                                    # ISS L330-353: spec = the template
            self._update_spec("inferservices", is_name, template)
        for i in to_create:                                          # ISS L381-416
            self._create(self._crs("inferservices"), {
                "apiVersion": API_VERSION, "kind": "InferService",
                "metadata": {"name": f"{name}-{i}", "namespace": self.ns,
                             "labels": {INFERSERVICESET_NAME_LABEL: name, INFERSERVICE_INDEX_LABEL: str(i)},
                             "ownerReferences": [controller_ref(iss)]},
                "spec": template})
        # status (ISS L236-313)
        children = self.api.list(self._crs("inferservices"), selector)
        ready = sum(1 for c in children if is_condition_true(c))    # ISS L283-291
        if ready >= replicas:
            cond = {"type": "Ready", "status": "True", "reason": "AllInferServicesReady",
                    "message": "All InferService replicas are ready"}
        else:
            cond = {"type": "Ready", "status": "False", "reason": "ReplicasNotReady",
                    "message": f"{ready} of {replicas} InferService replicas are ready"}
        self._set_status("inferservicesets", iss, {"replicas": replicas, "observedGeneration":
                                                   iss["metadata"].get("generation", 0), "readyReplicas": ready}, cond)

    def _update_spec(self, plural: str, name: str, spec: dict) -> None:
        """Get the latest, replace its spec, Update (with retry on conflict): ISS L335-346, IS L374-395; an
        HPA-managed InstanceSet keeps the latest's replicas (IS L383-391)."""
        for _ in range(5):
            latest = self.api.get(self._crs(plural, name))
            if latest is None:
                return
            keep = plural == "instancesets" and _hpa_managed(latest.get("spec") or {})
            replicas = (latest.get("spec") or {}).get("replicas")
            latest["spec"] = copy.deepcopy(spec)
            if keep:
                latest["spec"]["replicas"] = replicas
            try:
                self.api.request("PUT", self._crs(plural, name), latest)
                return
            except ApiError as e:
                if e.status != 409:
                    raise
        raise RuntimeError(f"update of {plural}/{name}: conflicts")

    def _set_status(self, plural: str, obj: dict, fields: dict, cond: dict, keep: tuple = ()) -> None:
        """newStatus = a copy of the status with fields set and the Ready condition set (meta.SetStatusCondition),
        written only when it differs (reflect.DeepEqual in ISS L261, IS L299, IST L333)."""
        old = obj.get("status") or {}
        new = dict(old)
        new.update(fields)
        new["conditions"] = set_status_condition(old.get("conditions") or [], {**cond, "lastTransitionTime": _now()})
        new = _omit_empty(new)
        if new != _omit_empty(old):
            self._write_status(plural, obj["metadata"]["name"], new, keep)

    # ==== InferService (IS) ==========================================================================================
    def _validate_roles(self, svc: dict) -> None:
        """IS L76-116."""
        spec = svc.get("spec") or {}
        roles = spec.get("roles") or []
        if len(roles) > MAX_ROLE_TYPE_COUNT:
            raise ValueError(f"number of roles {len(roles)} exceeds maximum allowed {MAX_ROLE_TYPE_COUNT}")
        seen = set()
        priority = (spec.get("schedulingStrategy") or {}).get("type") == PRIORITY
        for i, role in enumerate(roles):
            rname = role.get("name") or ""
            if not rname:
                raise ValueError(f"role at index {i} has empty name")
            if rname in seen:
                raise ValueError(f"duplicate role name {rname}")
            seen.add(rname)
            if len(rname) > 63 or not _DNS1123_LABEL.match(rname):
                raise ValueError(f"role name {rname} is invalid")
            p = role.get("priority")
            if priority and p is not None and not 1 <= p <= MAX_ROLE_REPLICAS:
                raise ValueError(f"role {rname} priority {p} is out of valid range [1, {MAX_ROLE_REPLICAS}]")

    def reconcile_inferservice(self, svc: dict) -> None:
        self._validate_roles(svc)                                     # IS L183-191: error, no status
        name = svc["metadata"]["name"]
        spec = svc.get("spec") or {}
        roles = spec.get("roles") or []
        selector = {INFERSERVICE_NAME_LABEL: name}                   # IS L196-198
        existing = {}
        for ist in self.api.list(self._crs("instancesets"), selector):   # IS L210-223: by the role label
            role = _labels(ist["metadata"]).get(INSTANCESET_NAME_LABEL)
            if role is not None:
                existing[role] = ist
        to_create, to_update = [], []
        for role in roles:                                           # IS L231-243
            if role["name"] in existing:
                ist = existing.pop(role["name"])
                have = ist.get("spec") or {}
                if _hpa_managed(have):                               # IS L412-413, L423-429: replicas aside
                    if {**have, "replicas": None} != {**role, "replicas": None}:
                        to_update.append((ist["metadata"]["name"], role))
                elif have != role:                                   # IS L416 (no HPA: plain DeepEqual)
                    to_update.append((ist["metadata"]["name"], role))
            else:
                to_create.append(role)
        for ist in existing.values():                                # IS L245-248, L431-449
            self._delete(self._crs("instancesets", ist["metadata"]["name"]))
        for ist_name, role in to_update:                             # IS L369-405: only the spec, not the labels
            self._update_spec("instancesets", ist_name, role)
        for role in to_create:                                       # IS L451-476
            self._create(self._crs("instancesets"), self._new_instanceset(svc, role))
        # status (IS L274-352)
        children = self.api.list(self._crs("instancesets"), selector)
        total = len(roles)                                           # IS L310: replicas = the number of roles
        ready = sum(1 for c in children if is_condition_true(c))    # IS L322-331
        if ready >= total and total > 0:                             # IS L335
            cond = {"type": "Ready", "status": "True", "reason": "AllInstanceSetsReady",
                    "message": "All InstanceSet replicas are ready"}
        else:
            cond = {"type": "Ready", "status": "False", "reason": "ReplicasNotReady",
                    "message": f"{ready} of {total} InstanceSet replicas are ready"}
        self._set_status("inferservices", svc, {"replicas": total, "readyReplicas": ready,
                                                "observedGeneration": svc["metadata"].get("generation", 0)}, cond)

    def _new_instanceset(self, svc: dict, role: dict) -> dict:
        """IS L478-527."""
        spec = svc.get("spec") or {}
        rmeta = role.get("metadata") or {}
        labels = dict(rmeta.get("labels") or {})
        labels[INFERSERVICE_NAME_LABEL] = svc["metadata"]["name"]
        labels[INSTANCESET_NAME_LABEL] = role["name"]
        strategy = (spec.get("schedulingStrategy") or {}).get("type") or ""
        labels[SCHEDULING_STRATEGY_LABEL] = strategy or PARALLEL    # IS L487-496
        annotations = dict(rmeta.get("annotations") or {})
        template_meta = ((role.get("spec") or {}).get("template") or {}).get("metadata") or {}
        if SCHEDULE_POLICY_ANNOTATION not in annotations:            # IS L504-509: from the pod template
            policy = (template_meta.get("annotations") or {}).get(SCHEDULE_POLICY_ANNOTATION)
            if policy is not None:
                annotations[SCHEDULE_POLICY_ANNOTATION] = policy
        policy = annotations.get(SCHEDULE_POLICY_ANNOTATION, "")
        if (len(policy) > len(SUPERPOD_POLICY_SUFFIX) and policy.endswith(SUPERPOD_POLICY_SUFFIX)   # IS L510-543
                and INFERSERVICE_ID_LABEL not in labels
                and INFERSERVICE_ID_LABEL not in (template_meta.get("labels") or {})):
            labels[INFERSERVICE_ID_LABEL] = svc["metadata"]["uid"]
        return {"apiVersion": API_VERSION, "kind": "InstanceSet",
                "metadata": {"name": f"{svc['metadata']['name']}-{role['name']}", "namespace": self.ns,
                             "labels": labels, "annotations": annotations,
                             "ownerReferences": [controller_ref(svc)]},
                "spec": role}

    # ==== InstanceSet (IST) ==========================================================================================
    def _validate_instanceset(self, ist: dict) -> str | None:
        """IST L239-284: the error message (also sent as a Warning event ValidateError), None when valid."""
        labels = _labels(ist["metadata"])
        spec = ist.get("spec") or {}
        if labels.get(GANG_SCHEDULE_LABEL) == "true" and not self.support_podgroup:
            return ("label gang-schedule is true, but PodGroup not supported now, please check if "
                    "volcano installed in k8s")
        replicas = spec.get("replicas")
        if replicas is None:
            return "jobSpec is not valid: replicas cannot be nil"
        if replicas < 0:
            return f"jobSpec is not valid: replicas can not be negative num, but but got {replicas}"
        for key in (INFERSERVICE_NAME_LABEL, INSTANCESET_NAME_LABEL):
            if key not in labels:
                return f"label <{key}> is missing"
        for s in spec.get("services") or []:                         # IST L400-414
            if (s.get("spec") or {}).get("type") == "NodePort":
                if any(not p.get("nodePort") for p in s["spec"].get("ports") or []):
                    return f"nodePort of service<{s.get('name', '')}> should config as non-zero"
        wl = spec.get("workload") or {}                              # WR L51-61, L142-154
        if wl.get("apiVersion") != "apps/v1" or wl.get("kind") not in WORKLOADS:
            return f"can not find workload handler for GVK {wl.get('apiVersion', '')}, Kind={wl.get('kind', '')}"
        if "spec" not in spec:                                       # STS L458-469, DEP: an empty RawExtension
            return "raw extension is empty"
        return None

    def reconcile_instanceset(self, ist: dict) -> None:
        msg = self._validate_instanceset(ist)
        if msg:                                                      # IST L90-94: event, no status, no requeue
            self._event(ist, "Warning", VALIDATE_ERROR_REASON, msg)
            return
        labels = _labels(ist["metadata"])
        service, role = labels[INFERSERVICE_NAME_LABEL], labels[INSTANCESET_NAME_LABEL]
        try:
            self._reconcile_scaler(ist)                               # IST L101-115: logged, workloads anyway
        except Exception as e:                                        # noqa: BLE001 - upstream logs it
            self._error(f"InstanceSet {ist['metadata']['name']} (scaling)", e)
        try:
            self._reconcile_workloads(ist, service, role)             # IST L117-118
        except RequeueError as e:                                    # IST L119-134: status anyway, requeue
            self._error(f"InstanceSet {ist['metadata']['name']} (requeue)", e)
        # other errors propagate: IST L136-143 returns without writing the status
        self._update_instanceset_status(ist, service, role)

    def _reconcile_scaler(self, ist: dict) -> None:
        """SM L57-239: the InstanceSet's HPA from its scalingPolicy, or none."""
        name = ist["metadata"]["name"]
        path = HPAS.format(ns=self.ns)
        policy = (ist.get("spec") or {}).get("scalingPolicy")
        if policy is None:                                           # SM L62-63, L199-225: remove its HPAs
            for hpa in self.api.list(path, {SCALING_OWNED_BY_LABEL: name}):
                self._delete(f"{path}/{hpa['metadata']['name']}")
            return
        if policy.get("type") != SCALING_POLICY_HPA:                 # SM L66-77: only a status message
            return
        spec = copy.deepcopy(policy.get("spec") or {})              # SM L84-93
        spec["scaleTargetRef"] = {"apiVersion": API_VERSION, "kind": "InstanceSet", "name": name}   # SM L95-99
        hpa_name = f"{name}-scaler"                                  # SM L227-229
        live = self.api.get(f"{path}/{hpa_name}")
        if live is None:                                             # SM L112-113, L119-160
            obj = {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
                   "metadata": {"name": hpa_name, "namespace": self.ns,
                                "labels": {**_labels(ist["metadata"]), SCALING_OWNED_BY_LABEL: name,
                                           OPERATOR_LABEL: ""},     # SM L231-239
                                "ownerReferences": [controller_ref(ist)]},
                   "spec": spec}
            if ist["metadata"].get("annotations"):                   # SM L130
                obj["metadata"]["annotations"] = dict(ist["metadata"]["annotations"])
            self._create(path, obj)
        elif not _within(spec, live.get("spec") or {}):              # SM L162-197: the spec put back
            live["spec"] = spec
            self.api.request("PUT", f"{path}/{hpa_name}", live)

    def _workload_path(self, ist: dict, name: str = "") -> str:
        return self._apps(WORKLOADS[ist["spec"]["workload"]["kind"]], name)

    def _reconcile_workloads(self, ist: dict, service: str, role: str) -> None:
        """IST L146-168, L593-604."""
        spec = ist["spec"]
        replicas = spec["replicas"]
        kind = spec["workload"]["kind"]
        # 1. delete workloads (and their per-instance Services) of an index >= replicas (STS L268-306, DEP L279-317)
        base = add_labels_from_indexer({}, service, role, "")
        del base[INSTANCE_INDEX_LABEL]
        for wl in self.api.list(self._workload_path(ist), base):
            try:
                idx = int(_labels(wl["metadata"]).get(INSTANCE_INDEX_LABEL, ""))
            except ValueError:
                continue
            if not 0 <= idx < replicas:
                self._delete(self._workload_path(ist, wl["metadata"]["name"]))
        for s in self.api.list(self._core("services"), base):       # STS L331-373, DEP L342-385
            try:
                idx = int(_labels(s["metadata"]).get(INSTANCE_INDEX_LABEL, ""))
            except ValueError:
                continue                                             # the role services: index label ""
            if not 0 <= idx < replicas:
                try:
                    self._delete(self._core("services", s["metadata"]["name"]))
                except ApiError as e:
                    raise RequeueError(str(e)) from None
        # 2. the role's services (IST L584-591, L190-237): created once, never updated
        for s in spec.get("services") or []:
            self._check_or_create_role_service(ist, s, service, role)
        # 3. the scheduling strategy (SCH L38-48)
        strategy = _labels(ist["metadata"]).get(SCHEDULING_STRATEGY_LABEL)
        if strategy != PARALLEL:
            raise ValueError(f"unknown scheduling strategy {strategy}" if strategy != PRIORITY else
                             "schedulingStrategy Priority is not done by the stand-in")
        # 4. each instance (WR L64-104)
        for idx in range(replicas):
            index = str(idx)
            if _labels(ist["metadata"]).get(GANG_SCHEDULE_LABEL) == "true":
                self._get_or_create_podgroup(ist, service, role, index)
            if kind == "StatefulSet":
                self._check_or_create_statefulset(ist, service, role, index)
            else:
                self._check_or_create_deployment(ist, service, role, index)

    def _check_or_create_role_service(self, ist: dict, svc_spec: dict, service: str, role: str) -> None:
        name = f"{svc_spec.get('name', '')}-{service}-{role}"            # IST L196
        if self.api.get(self._core("services", name)) is not None:
            return
        body = copy.deepcopy(svc_spec.get("spec") or {})
        if body.get("type") == "NodePort":                              # IST L203-208, L417-440
            offset = int(service.split("-")[-1])
            for p in body.get("ports") or []:
                p["nodePort"] = p["nodePort"] + offset
        obj = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": name, "namespace": self.ns,
                            # the InstanceSet's labels plus the indexer's, whose instance index is "" here
                            "labels": add_labels_from_indexer(_labels(ist["metadata"]), service, role, ""),
                            "ownerReferences": [controller_ref(ist)]},
               "spec": body}
        if ist["metadata"].get("annotations"):
            obj["metadata"]["annotations"] = dict(ist["metadata"]["annotations"])
        try:
            self._create(self._core("services"), obj)
        except ApiError as e:                                           # IST L229-234
            self._event(ist, "Warning", SERVICE_CREATE_REASON,
                        f"Failed to create service {svc_spec.get('name', '')}: {e}")
            raise

    def _get_or_create_podgroup(self, ist: dict, service: str, role: str, index: str) -> None:
        """WR L75-96, PG L91-138 (Volcano scheduling.volcano.sh/v1beta1, written as volcano.sh/apis v1.7.0 does:
        minMember and minResources only, go.mod L14)."""
        name = podgroup_name(service, role, index)
        path = f"/apis/scheduling.volcano.sh/v1beta1/namespaces/{self.ns}/podgroups"
        try:
            if self.api.get(f"{path}/{name}") is not None:
                return
        except ApiError as e:
            raise RequeueError(str(e)) from None
        wspec = ist["spec"]["spec"]
        replicas = wspec.get("replicas", 1)                              # STS L405-417, DEP L417-429: default 1
        if wspec.get("replicas") is None:
            raise ValueError("replicas is nil")                          # STS L426-428 (GetMinResources)
        pg_spec: dict = {"minMember": replicas}
        min_res = calc_min_resources(replicas, ((wspec.get("template") or {}).get("spec") or {}))
        if min_res:
            pg_spec["minResources"] = min_res
        labels = _labels(ist["metadata"])
        labels.pop(INFERSERVICE_ID_LABEL, None)                          # PG L115-117
        obj = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
               "metadata": {"name": name, "namespace": self.ns,
                            "labels": add_labels_from_indexer(labels, service, role, index),
                            "ownerReferences": [controller_ref(ist)]},
               "spec": pg_spec}
        if ist["metadata"].get("annotations"):
            obj["metadata"]["annotations"] = dict(ist["metadata"]["annotations"])
        self._create(path, obj)

    def _workload_object(self, ist: dict, service: str, role: str, index: str) -> dict:
        """STS L157-226 / DEP L179-242: the workload built from the role's spec."""
        meta, spec = ist["metadata"], ist["spec"]
        wspec = copy.deepcopy(spec["spec"])
        role_meta = spec.get("metadata") or {}
        labels = _labels(meta)
        labels.update(role_meta.get("labels") or {})
        labels = add_labels_from_indexer(labels, service, role, index)
        template = wspec.setdefault("template", {})
        tmeta = template.setdefault("metadata", {})
        if FAULT_SCHEDULING_LABEL in (tmeta.get("labels") or {}):        # STS L172-175, DEP L195-198
            labels[FAULT_SCHEDULING_LABEL] = tmeta["labels"][FAULT_SCHEDULING_LABEL]
        annotations = dict(meta.get("annotations") or {})
        annotations.update(role_meta.get("annotations") or {})
        # pod template: the indexer labels added over the user's (STS L181, DEP L204), inferserviceid (UT L94-110),
        # annotations at least {} and the PodGroup's name when gang-scheduled (STS L183-189, DEP L206-212)
        tmeta["labels"] = add_labels_from_indexer(tmeta.get("labels"), service, role, index)
        sid = _labels(meta).get(INFERSERVICE_ID_LABEL)
        if sid and INFERSERVICE_ID_LABEL not in tmeta["labels"]:
            tmeta["labels"][INFERSERVICE_ID_LABEL] = sid
        tmeta["annotations"] = dict(tmeta.get("annotations") or {})
        if _labels(meta).get(GANG_SCHEDULE_LABEL) == "true":
            tmeta["annotations"][GROUP_NAME_ANNOTATION] = podgroup_name(service, role, index)
        if spec["workload"]["kind"] == "StatefulSet":
            wspec["serviceName"] = instance_service_name(service, role, index)   # STS L190: always overwritten
        # env appended to every container, not to init containers (UT L112-138)
        parts = service.split("-")
        for c in (template.setdefault("spec", {}).get("containers") or []):
            env = c.setdefault("env", [])
            env += [{"name": ENV_INSTANCE_INDEX, "value": index}, {"name": ENV_INSTANCE_ROLE, "value": role}]
            if len(parts) < 2:
                break                                   # UT L124-128: returns, later containers get nothing
            env += [{"name": ENV_INFER_SERVICE_INDEX, "value": parts[-1]},
                    {"name": ENV_INFER_SERVICE_NAME, "value": "-".join(parts[:-1])}]
        obj = {"apiVersion": "apps/v1", "kind": spec["workload"]["kind"],
               "metadata": {"name": workload_name(service, role, index), "namespace": self.ns,
                            "labels": labels, "ownerReferences": [controller_ref(ist)]},
               "spec": wspec}
        if annotations:
            obj["metadata"]["annotations"] = annotations
        return obj

    def _check_or_create_statefulset(self, ist: dict, service: str, role: str, index: str) -> None:
        """STS L111-155: the headless Service, then the StatefulSet if none has the indexer labels."""
        self._ensure_instance_service(ist, service, role, index, headless=True)      # STS L228-266
        self._check_or_create_workload(ist, service, role, index)

    def _check_or_create_deployment(self, ist: dict, service: str, role: str, index: str) -> None:
        """DEP L120-177: the per-instance Service only when the role has no services, then the Deployment."""
        if not ist["spec"].get("services"):
            self._ensure_instance_service(ist, service, role, index, headless=False)  # DEP L244-277
        self._check_or_create_workload(ist, service, role, index)

    def _ensure_instance_service(self, ist: dict, service: str, role: str, index: str, headless: bool) -> None:
        """The Service service-<is>-<role>-<idx> selecting the instance's pods by the indexer labels, created when
        missing and never updated: headless for a StatefulSet (STS L228-266), a ClusterIP with targetPort for a
        Deployment (DEP L244-277); the InstanceSet's annotations copied."""
        sname = instance_service_name(service, role, index)
        try:
            if self.api.get(self._core("services", sname)) is not None:
                return
            sel = add_labels_from_indexer({}, service, role, index)
            port = {"name": DEFAULT_PORT_NAME, "port": DEFAULT_PORT}
            spec = {"clusterIP": "None", "selector": dict(sel), "ports": [port]} if headless else \
                {"selector": dict(sel), "ports": [{**port, "targetPort": DEFAULT_PORT}]}
            obj = {"apiVersion": "v1", "kind": "Service",
                   "metadata": {"name": sname, "namespace": self.ns, "labels": sel,
                                "ownerReferences": [controller_ref(ist)]}, "spec": spec}
            if ist["metadata"].get("annotations"):
                obj["metadata"]["annotations"] = dict(ist["metadata"]["annotations"])
            self.api.request("POST", self._core("services"), obj)
        except ApiError as e:
            raise RequeueError(str(e)) from None

    def _check_or_create_workload(self, ist: dict, service: str, role: str, index: str) -> None:
        """STS L135-149, DEP L131-145: list by the four indexer labels, create when there is none; an existing
        workload is never updated."""
        try:
            found = self.api.list(self._workload_path(ist), add_labels_from_indexer({}, service, role, index))
        except ApiError as e:
            raise RequeueError(str(e)) from None
        if found:
            return
        obj = self._workload_object(ist, service, role, index)
        if obj["spec"].get("replicas") is None:
            raise ValueError("replicas is nil")                          # STS L214-216, DEP L230-232
        try:
            self.api.request("POST", self._workload_path(ist), obj)
        except ApiError as e:
            raise RequeueError(str(e)) from None                         # STS L220-224, DEP L236-240

    def _update_instanceset_status(self, ist: dict, service: str, role: str) -> None:
        """IST L320-398."""
        sel = add_labels_from_indexer({}, service, role, "")
        del sel[INSTANCE_INDEX_LABEL]
        kind = ist["spec"]["workload"]["kind"]
        ready_fn = statefulset_ready if kind == "StatefulSet" else deployment_ready
        ready = sum(1 for wl in self.api.list(self._workload_path(ist), sel) if ready_fn(wl))   # STS L308-329
        replicas = ist["spec"]["replicas"]
        if ready >= replicas:
            cond = {"type": "Ready", "status": "True", "reason": "AllWorkLoadReady",        # C L87-90
                    "message": "All WorkLoad replicas are ready"}
        else:                                                                                 # IST L386-395 (sic)
            cond = {"type": "Ready", "status": "False", "reason": "ReplicasNotReady",
                    "message": f"{ready} of {replicas} InferService replicas are ready"}
        self._set_status("instancesets", ist, {"replicas": replicas, "readyReplicas": ready,
                                               "observedGeneration": ist["metadata"].get("generation", 0)}, cond,
                         keep=("labelSelector", "scalingResourceStatus"))   # IST L345-350


def statefulset_ready(sts: dict) -> bool:
    """STS L433-456."""
    spec, st = sts.get("spec") or {}, sts.get("status") or {}
    desired = spec.get("replicas", 1)
    gen = sts["metadata"].get("generation", 0)
    if gen > 0 and st.get("observedGeneration", 0) < gen:
        return False
    if st.get("readyReplicas", 0) != desired or st.get("updatedReplicas", 0) != desired:
        return False
    cur, upd = st.get("currentRevision", ""), st.get("updateRevision", "")
    return not (cur and upd and cur != upd)


def deployment_ready(dep: dict) -> bool:
    """DEP L445-480: counts, then the Available and Progressing conditions True."""
    spec, st = dep.get("spec") or {}, dep.get("status") or {}
    desired = spec.get("replicas", 1)
    gen = dep["metadata"].get("generation", 0)
    if gen > 0 and st.get("observedGeneration", 0) < gen:
        return False
    if any(st.get(k, 0) != desired for k in ("readyReplicas", "availableReplicas", "updatedReplicas")):
        return False
    conds = {c.get("type"): c.get("status") for c in st.get("conditions") or []}
    return conds.get("Available") == "True" and conds.get("Progressing") == "True"
