"""The values of the `ascend-llm` Helm chart (deployctl/charts/ascend-llm), as pydantic models.

One chart serves every engine: the keys here are common to all (image, scheduling, NPUs, mounts, probes,
resources, the instances); `engine` selects the engine's templates (templates/<engine>-*.yaml), and each
engine adds one block of its own keys (`mindie:`, `vllm:`), declared by its engine spec (engines/<kind>/chart.py).

One source for three things: `deployctl render --target helm` builds the values from the plan, the chart's
`values.schema.json` is generated from `values_model(charts)` (`python -m deployctl.app.chart_schema`), and
`kubernetes.values` in the inventory is checked against it. Field names are the chart's (camelCase).
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from deployctl.core.models.base import Frozen

if TYPE_CHECKING:
    from collections.abc import Iterable

    from deployctl.core.engine_spec.protocol import Chart
    from deployctl.core.models.artifact import Artifact
    from deployctl.core.models.inventory import Inventory
    from deployctl.core.models.plan import Plan

CHART_NAME = "ascend-llm"
OWNED_VALUES = ("engine", "instances", "secretEnv.keys", "secretEnv.values")
# rendered from the plan (with each engine's own): not settable
QUANTITY = r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$"
DNS_LABEL = r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$"


class Image(Frozen):
    """Defaults: the default engine's image (its Chart.image)."""

    repository: str = Field(min_length=1)
    tag: str = Field(description="image tag (or @sha256 digest)")
    pullPolicy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"


class Npu(Frozen):
    resource: str = Field("huawei.com/Ascend910", description="extended resource of the Ascend device plugin")
    perPod: int = Field(8, ge=1, le=16, description="NPUs (dies) per pod: the whole server, 8 on A2, 16 on A3")
    acceleratorType: Literal["module-910b-8", "module-910b-16", "module-a3-16", "module-a3-16-super-pod",
                             "module-a3-8-super-pod"] = "module-910b-8"
    ringController: str = Field("ascend-910b", description="ring-controller.atlas label value")


class Probe(Frozen):
    enabled: bool = True
    periodSeconds: int = Field(10, ge=1)
    timeoutSeconds: int = Field(5, ge=1)
    failureThreshold: int = Field(3, ge=1)


class Probes(Frozen):
    startup: Probe = Probe(periodSeconds=10, failureThreshold=180)
    readiness: Probe = Probe(periodSeconds=10, failureThreshold=6)
    # off: a restarted rank cannot rejoin its HCCL world; the whole instance must restart
    liveness: Probe = Probe(enabled=False, periodSeconds=20, failureThreshold=6)


class HostMount(Frozen):
    name: str = Field(pattern=DNS_LABEL, max_length=58)   # the volume is host-<name>, at most 63
    path: str = Field(pattern=r"^/")
    type: Literal["", "Directory", "File", "DirectoryOrCreate", "FileOrCreate"] = ""


class Resources(Frozen):
    requests: dict[str, str | int] = Field(default_factory=dict, description="cpu/memory; the NPUs are added")
    limits: dict[str, str | int] = Field(default_factory=dict)


class PodDisruptionBudget(Frozen):
    enabled: bool = Field(True, description="maxUnavailable 0 per instance: a drain or eviction must not take "
                                            "one rank out of a running HCCL world")


class Service(Frozen):
    type: Literal["ClusterIP", "NodePort", "LoadBalancer"] = "ClusterIP"
    port: int = Field(1025, ge=1, le=65535)


class ServiceAccount(Frozen):
    create: bool = True
    name: str = ""
    annotations: dict[str, str] = Field(default_factory=dict)


class Tests(Frozen):
    enabled: bool = True
    image: str = "busybox:1.36"


class Pod(Frozen):
    """One server of an instance whose servers run different files (vLLM-Ascend: each node its own launch)."""

    node: str = Field("", description="the Node the pod is pinned to ('' = anywhere)")
    ports: list[int] = Field(default_factory=list, description="API ports served on this server (none: headless)")
    env: dict[str, str] = Field(default_factory=dict)
    files: dict[str, str] = Field(default_factory=dict, description="the server's rendered files, verbatim")


class Instance(Frozen):
    """One instance (one HCCL world), one pod per server."""

    name: str = Field(pattern=DNS_LABEL, max_length=12)
    role: Literal["mixed", "prefill", "decode"]
    servers: int = Field(ge=1, description="pods (one per server)")
    nodes: list[str] = Field(default_factory=list, description="the Nodes the pods are pinned to, the master's "
                                                               "first (empty: the scheduler places them)")
    env: dict[str, str] = Field(default_factory=dict, description="identical on every pod of the instance")
    files: dict[str, str] = Field(default_factory=dict, description="identical on every pod, verbatim")
    pods: list[Pod] = Field(default_factory=list, description="per-server env and files, when they differ")


class SecretEnv(Frozen):
    """The secret env variables (engine.env keys that look secret, or listed in engine.secret_env): in a
    Secret every engine pod reads with envFrom, never in the ConfigMaps. values.yaml names them (keys); their
    values come from a second values file (secret-values.yaml, written 0600 by `deployctl render`; `deployctl
    up --target k8s` passes it to helm itself) or from a Secret you manage (existingSecret)."""

    keys: list[str] = Field(default_factory=list, description="the secret variables' names")
    values: dict[str, str] = Field(default_factory=dict, description="their values: keep them out of values.yaml")
    existingSecret: str = Field("", description="a Secret you manage holding the keys (then none is created)")


# The runtime's default capabilities, as bare metal's `docker run` (root must read weights owned by the
# engine's user, mode 750); no privilege escalation, the runtime's seccomp profile.
SECURITY_CONTEXT = {"allowPrivilegeEscalation": False, "seccompProfile": {"type": "RuntimeDefault"}}
HOST_MOUNTS = (   # MindIE's bare-metal start.sh mounts (the default engine); each engine renders its own list
    HostMount(name="driver", path="/usr/local/Ascend/driver", type="Directory"),
    HostMount(name="firmware", path="/usr/local/Ascend/firmware", type="Directory"),
    HostMount(name="dcmi", path="/usr/local/dcmi", type="Directory"),
    HostMount(name="npu-smi", path="/usr/local/sbin/npu-smi", type="File"),
    HostMount(name="hccn-conf", path="/etc/hccn.conf", type="File"),
)


class Gang(Frozen):
    """One PodGroup per instance (minMember / minCount = its servers) and every pod of the instance in it."""

    api: Literal["", "volcano", "kubernetes"] = Field("", description=(
        "'': none; volcano: scheduling.volcano.sh/v1beta1 PodGroup, pod annotation scheduling.k8s.io/group-name, "
        "schedulerName volcano; kubernetes: scheduling.k8s.io/v1alpha2 PodGroup, pod schedulingGroup"))
    queue: str = Field("", description="Volcano queue ('' = Volcano's default)")


class MindCluster(Frozen):
    """MindCluster's keys on every engine pod ('' / 0 = not set)."""

    faultScheduling: str = Field("", description="pod label fault-scheduling")
    faultRetryTimes: int = Field(0, ge=0, description="pod label fault-retry-times")
    schedulePolicy: str = Field("", description="pod annotation huawei.com/schedule_policy")


class CommonValues(Frozen):
    """The keys every engine's templates read from .Values."""

    engine: str               # values_model() narrows it to the engines' kinds, default the default engine
    nameOverride: str = ""
    fullnameOverride: str = ""
    image: Image              # values_model(): the default engine's image
    imagePullSecrets: list[dict[str, str]] = Field(default_factory=list)
    serviceAccount: ServiceAccount = ServiceAccount()
    podAnnotations: dict[str, str] = Field(default_factory=dict)
    podLabels: dict[str, str] = Field(default_factory=dict)
    podSecurityContext: dict[str, Any] = Field(default_factory=dict)
    securityContext: dict[str, Any] = Field(default_factory=lambda: dict(SECURITY_CONTEXT))
    privileged: bool = Field(False, description="run the engine container privileged (securityContext ignored)")
    workload: Literal["statefulset", "lws", "infer-operator"] = Field("statefulset", description=(
        "statefulset: StatefulSets (OnDelete, restarted by deployctl); lws: one LeaderWorkerSet an instance "
        "(leaderworkerset.x-k8s.io/v1, the LWS controller must run in the cluster); infer-operator: one "
        "InferServiceSet (mindcluster.huawei.com/v1, MindCluster's Infer Operator must run in the cluster)"))
    schedulerName: str = ""
    priorityClassName: str = ""
    gang: Gang = Gang()
    mindcluster: MindCluster = MindCluster()
    nodeSelector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    nodeLabel: str = Field("kubernetes.io/hostname", description="node label the pods are pinned by")
    npu: Npu = Npu()
    shmSize: str = Field("500Gi", pattern=QUANTITY)
    workDir: str = Field("/etc/deployctl", pattern=r"^/[A-Za-z0-9._/-]*$")
    weightsPath: str = Field("/data/models", pattern=r"^/")
    hostMounts: list[HostMount] = Field(default_factory=lambda: list(HOST_MOUNTS))
    probes: Probes = Probes()
    resources: Resources = Resources(requests={"cpu": "16", "memory": "64Gi"})
    podDisruptionBudget: PodDisruptionBudget = PodDisruptionBudget()
    service: Service = Service()
    tests: Tests = Tests()
    instances: list[Instance] = Field(default_factory=list)
    secretEnv: SecretEnv = SecretEnv()


def values_model(charts: tuple) -> type[BaseModel]:
    """CommonValues + `engine` (which templates render) + every engine's block, with its defaults. ``charts``: the
    Chart of every engine (the composition root's registry hands them down with the spec: ``inv.charts``)."""
    return _values_model(tuple((c.kind, c.block, c.block_model, c.image) for c in charts))


@lru_cache(maxsize=4)
def _values_model(blocks_of: tuple) -> type[BaseModel]:
    from pydantic import create_model

    from deployctl.core.models.engine_settings import DEFAULT_KIND

    blocks: dict[str, Any] = {block: (model, model()) for _, block, model, _ in blocks_of}
    engine: Any = Literal[tuple(kind for kind, *_ in blocks_of)]   # the kinds are known at run time only
    default = DEFAULT_KIND if any(kind == DEFAULT_KIND for kind, *_ in blocks_of) else blocks_of[0][0]
    repository, tag = split_image(next(image for kind, _, _, image in blocks_of if kind == default))
    return create_model("ChartValues", __base__=CommonValues, __doc__=CommonValues.__doc__,
                        engine=(engine, Field(default, description="the engine whose templates "
                                              "render: templates/<engine>-*.yaml")),
                        image=(Image, Image(repository=repository, tag=tag)), **blocks)


def owned_values(chart: Chart) -> tuple[str, ...]:
    """Dotted keys rendered from the plan for this engine (its Chart): kubernetes.values may not set them."""
    return OWNED_VALUES + tuple(f"{chart.block}.{k}" for k in chart.owned_values)


def split_image(image: str) -> tuple[str, str]:
    """`repo/name:tag` -> (repo/name, tag); a digest stays in the tag as `@sha256:...`."""
    if "@" in image:
        repo, digest = image.split("@", 1)
        return repo, "@" + digest
    slash = image.rfind("/")
    colon = image.rfind(":")
    if colon > slash:
        return image[:colon], image[colon + 1:]
    return image, "latest"


def shm_quantity(size: str) -> str:
    """docker --shm-size (500g, 64m, 1024) -> a Kubernetes quantity (500Gi, 64Mi, 1024)."""
    unit = size[-1].lower()
    return size[:-1] + {"k": "Ki", "m": "Mi", "g": "Gi"}[unit] if unit in "kmg" else size


def accelerator_type(plan: Plan) -> str:
    cluster = plan.inventory.cluster
    if cluster.hardware == "a2":
        return "module-910b-8"
    return "module-a3-16-super-pod" if cluster.super_pod else "module-a3-16"


def fullname(inv: Inventory) -> str:
    """The chart's resource name prefix (templates/_helpers.tpl "chart.fullname", without overrides)."""
    release = inv.helm_release
    name = release if CHART_NAME in release else f"{release}-{CHART_NAME}"
    return name[:32].rstrip("-")


def files_of(artifacts: list[Artifact], node: str, names: Iterable[str]) -> dict[str, str]:
    """The rendered files ``names`` of ``node`` (bare-metal artifacts by path), verbatim."""
    by_path = {a.path: a for a in artifacts}
    return {n: by_path[f"{node}/{n}"].content.decode() for n in names if f"{node}/{n}" in by_path}


def common_values(plan: Plan, **changes: Any) -> dict[str, Any]:
    """The common keys for a plan (image, NPUs, shm, weights, scheduler, privileged), plus ``changes``."""
    inv = plan.inventory
    e = inv.engine
    if not inv.helm_release[0].isalpha():
        from deployctl.core.errors import UsageError

        raise UsageError(f"release name '{inv.helm_release}' cannot name Kubernetes Services (they must start "
                         "with a letter)", hint="set kubernetes.release in the inventory")
    repo, tag = split_image(e.image)
    k = inv.kubernetes
    mc = k.mindcluster
    out = dict(engine=inv.engine.kind, image=Image(repository=repo, tag=tag), workload=k.workload,
               schedulerName=k.scheduler_name or "", gang=Gang(api=gang_api(inv), queue=k.queue or ""),
               priorityClassName=k.priority_class or "",
               mindcluster=MindCluster(faultScheduling=mc.fault_scheduling or "", faultRetryTimes=mc.fault_retry_times
                                       or 0, schedulePolicy=mc.schedule_policy or "") if mc else MindCluster(),
               npu=Npu(perPod=inv.devices_per_node, acceleratorType=accelerator_type(plan)),
               shmSize=shm_quantity(e.shm_size), workDir=e.work_dir, privileged=e.privileged,
               weightsPath=inv.model.weights_path)
    out.update(changes)
    return out


def gang_api(inv: Inventory) -> Literal["", "volcano", "kubernetes"]:
    """The PodGroup API of kubernetes.gang. `auto` is resolved by `up` from what the cluster serves
    (backends/k8s/gang.py); rendered without a cluster it is volcano when the pods' scheduler is volcano, else none."""
    gang = inv.kubernetes.gang
    if gang == "auto":
        return "volcano" if inv.kubernetes.scheduler_name == "volcano" else ""
    return "" if gang == "off" else gang


def chart_values(plan: Plan, artifacts: list[Artifact]) -> BaseModel:
    """The chart values of a plan: the engine's values (from the bare-metal artifacts), then kubernetes.values."""
    from deployctl.core.input.merge import deep_merge

    model = values_model(plan.inventory.charts)
    values = model.model_validate(plan.engine_spec.chart.values(plan, artifacts))
    values = model.model_validate(split_secret_env(plan, values.model_dump()))
    if plan.inventory.kubernetes.values:
        values = model.model_validate(deep_merge(values.model_dump(), plan.inventory.kubernetes.values))
    return values


def split_secret_env(plan: Plan, values: dict) -> dict:
    """Move every secret env variable out of the values' ``env`` maps (the ConfigMaps) into ``secretEnv``
    (one Secret for the release): a variable must then have one value in every pod."""
    from deployctl.core.errors import UsageError
    from deployctl.core.input.secrets import secret_env_names

    names = secret_env_names(plan.inventory)
    found: dict[str, str] = {}

    def walk(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                walk(item)
        elif isinstance(node, dict):
            for key, value in node.items():
                if key == "env" and isinstance(value, dict):
                    for name in [n for n in value if n in names]:
                        secret = value.pop(name)
                        if found.setdefault(name, secret) != secret:
                            raise UsageError(f"{name} is secret and has different values in different pods; on "
                                             "Kubernetes a secret variable has one value for the release (one "
                                             "Secret)", hint=f"set {name} in engine.env, not in layout.<role>.env")
                else:
                    walk(value)

    walk(values)
    if found:
        values["secretEnv"] = {**values.get("secretEnv", {}), "keys": sorted(found), "values": found}
    return values
