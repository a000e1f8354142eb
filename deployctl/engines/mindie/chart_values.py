"""The values of the `mindie` Helm chart (charts/mindie), as pydantic models.

One source for three things: `deployctl render --target helm` builds a `ChartValues` from the plan, the
chart's `values.schema.json` is generated from these classes (`python -m deployctl.k8s.schema`), and
`kubernetes.values` overrides in the inventory are checked against them. Field names are the chart's
(camelCase, as Helm charts spell values).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from deployctl.models.base import Frozen

OWNED_VALUES = ("instances", "ms")    # rendered from the plan; kubernetes.values may not set them
QUANTITY = r"^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$"
DNS_LABEL = r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$"


class Image(Frozen):
    repository: str = Field("swr.cn-south-1.myhuaweicloud.com/ascendhub/mindie", min_length=1)
    tag: str = Field("2.2.RC1-800I-A2-py311-openeuler24.03-lts", description="image tag (or @sha256 digest)")
    pullPolicy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"


class Npu(Frozen):
    resource: str = Field("huawei.com/Ascend910", description="extended resource of the Ascend device plugin")
    perPod: int = Field(8, ge=1, le=16, description="NPUs (dies) per pod: the whole server, 8 on A2, 16 on A3")
    acceleratorType: Literal["module-910b-8", "module-910b-16", "module-a3-16", "module-a3-16-super-pod",
                             "module-a3-8-super-pod"] = "module-910b-8"
    ringController: str = Field("ascend-910b", description="ring-controller.atlas label value")


class RankTable(Frozen):
    source: Literal["deployctl", "cluster"] = "deployctl"
    configMapPrefix: str = Field("rings-config-", description="cluster source: the table of instance X is in "
                                                              "ConfigMap <prefix><fullname>-X (not created here)")
    waitSeconds: int = Field(600, ge=1, description="cluster source: how long a pod waits for status completed")


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


class Ports(Frozen):
    """Host ports (the pods use the host network, as HCCL and MindIE's rank table need)."""

    http: int = Field(1025, ge=1024, le=65535)
    management: int = Field(1026, ge=1024, le=65535)
    metrics: int = Field(1027, ge=1024, le=65535)
    interComm: int = Field(1121, ge=1024, le=65535)
    multiNode: int = Field(1120, ge=1024, le=65535)
    coordinator: int = Field(1035, ge=1024, le=65535)
    controller: int = Field(1045, ge=1024, le=65535)


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


class Instance(Frozen):
    """One MindIE instance (an HCCL world): a master pod and worker pods, one per server."""

    name: str = Field(pattern=DNS_LABEL, max_length=12)
    role: Literal["mixed", "prefill", "decode"]
    servers: int = Field(ge=1, description="pods (one per server): the master and servers - 1 workers")
    nodes: list[str] = Field(default_factory=list, description="rankTable.source deployctl: the Nodes the pods "
                                                               "are pinned to, the master's first")
    env: dict[str, str] = Field(default_factory=dict, description="identical on every pod of the instance")
    files: dict[str, str] = Field(default_factory=dict, description="config.json and ranktable.json, verbatim")


class Ms(Frozen):
    """pd-split: MindIE-MS controller and coordinator (no NPU), pinned to one node."""

    enabled: bool = False
    node: str = ""
    env: dict[str, str] = Field(default_factory=dict)
    files: dict[str, str] = Field(default_factory=dict, description="ms_controller.json, ms_coordinator.json, "
                                                                      "global_ranktable.json, verbatim")


# The runtime's default capabilities, as bare metal's `docker run` (root must read weights owned by the
# MindIE user, mode 750); no privilege escalation, the runtime's seccomp profile.
SECURITY_CONTEXT = {"allowPrivilegeEscalation": False, "seccompProfile": {"type": "RuntimeDefault"}}
HOST_MOUNTS = (   # the same host paths the bare-metal start.sh mounts, read-only
    HostMount(name="driver", path="/usr/local/Ascend/driver", type="Directory"),
    HostMount(name="firmware", path="/usr/local/Ascend/firmware", type="Directory"),
    HostMount(name="dcmi", path="/usr/local/dcmi", type="Directory"),
    HostMount(name="npu-smi", path="/usr/local/sbin/npu-smi", type="File"),
    HostMount(name="hccn-conf", path="/etc/hccn.conf", type="File"),
)


class ChartValues(Frozen):
    """Everything the chart reads from .Values."""

    nameOverride: str = ""
    fullnameOverride: str = ""
    image: Image = Image()
    imagePullSecrets: list[dict[str, str]] = Field(default_factory=list)
    serviceAccount: ServiceAccount = ServiceAccount()
    podAnnotations: dict[str, str] = Field(default_factory=dict)
    podLabels: dict[str, str] = Field(default_factory=dict)
    podSecurityContext: dict[str, Any] = Field(default_factory=dict)
    securityContext: dict[str, Any] = Field(default_factory=lambda: dict(SECURITY_CONTEXT))
    privileged: bool = Field(False, description="run the engine container privileged (securityContext ignored)")
    schedulerName: str = ""
    priorityClassName: str = ""
    nodeSelector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    nodeLabel: str = Field("kubernetes.io/hostname", description="node label the pods are pinned by")
    npu: Npu = Npu()
    rankTable: RankTable = RankTable()
    shmSize: str = Field("500Gi", pattern=QUANTITY)
    workDir: str = Field("/etc/deployctl", pattern=r"^/[A-Za-z0-9._/-]*$")
    daemon: str = Field("/usr/local/Ascend/mindie/latest/mindie-service/bin/mindieservice_daemon", pattern=r"^/")
    msHome: str = Field("/usr/local/Ascend/mindie/latest/mindie-service", pattern=r"^/")
    tls: bool = False
    weightsPath: str = Field("/data/models", pattern=r"^/")
    hostMounts: list[HostMount] = Field(default_factory=lambda: list(HOST_MOUNTS))
    ports: Ports = Ports()
    probes: Probes = Probes()
    resources: Resources = Resources(requests={"cpu": "16", "memory": "64Gi"})
    msResources: Resources = Resources(requests={"cpu": "2", "memory": "2Gi"})
    podDisruptionBudget: PodDisruptionBudget = PodDisruptionBudget()
    service: Service = Service()
    tests: Tests = Tests()
    instances: list[Instance] = Field(default_factory=list)
    ms: Ms = Ms()
