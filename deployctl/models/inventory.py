"""The inventory file as immutable pydantic models (contract: spec/inventory.md §1)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field, field_validator, model_validator

from deployctl import engines
from deployctl.models.base import Strict
from deployctl.models.patterns import INTERFACE_PATTERN

NAME_PATTERN = r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$"
K8S_NODE_PATTERN = r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$"   # a DNS subdomain, as Kubernetes names nodes
# a login name as useradd accepts it (never an ssh option, nothing for ansible to template)
USER_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\$?$"


def _to_str(v: Any) -> Any:
    # YAML reads `super_pod_id: 0` as an int; ids are strings in every Ascend format.
    return str(v) if isinstance(v, int) and not isinstance(v, bool) else v


class Cluster(Strict):
    name: str = Field(pattern=NAME_PATTERN, max_length=40)
    hardware: Literal["a2", "a3"]
    hbm_gb: int = Field(64, gt=0, le=1024)
    super_pod: bool = False
    sku: str | None = Field(None, max_length=40)
    # NPU SKU for the performance estimate (deployctl/perf/hardware.yaml: 910B1..910B4, 800I-A3, 800T-A3, or an
    # npu-smi chip name); default: preflight's npu-smi chip name (--facts), else the hardware's default


class SshDefaults(Strict):
    user: str = Field("root", pattern=USER_PATTERN, max_length=32)
    port: int = Field(22, ge=1, le=65535)
    key: str = "~/.ssh/id_ed25519"
    known_hosts: str = "~/.ssh/known_hosts"


class NodeSsh(Strict):
    user: str | None = Field(None, pattern=USER_PATTERN, max_length=32)
    port: int | None = Field(None, ge=1, le=65535)
    key: str | None = None
    known_hosts: str | None = None


class Speculative(Strict):
    """Speculative decoding, one setting for every engine: MindIE renders ModelConfig[0].plugin_params
    {"plugin_type":"mtp","num_speculative_tokens":N}, vLLM-Ascend `--speculative-config`; the performance model
    counts the drafts. An engine (or version) that does not run the method refuses it, with its source."""

    method: Literal["mtp", "eagle", "eagle3"]
    # mtp: the checkpoint's own next-token layers (DeepSeek's num_nextn_predict_layers); eagle/eagle3: a draft model
    tokens: int = Field(1, ge=1, le=16)       # num_speculative_tokens: drafted tokens per step
    draft_weights_path: str | None = None
    # eagle/eagle3: the draft model's weights, as the engine container sees them (mount them with engine.mounts)

    @model_validator(mode="after")
    def _draft(self):
        if self.method == "mtp" and self.draft_weights_path is not None:
            raise ValueError("mtp drafts with the model's own layers: remove draft_weights_path")
        if self.method != "mtp" and self.draft_weights_path is None:
            raise ValueError(f"{self.method} needs draft_weights_path (the draft model's weights)")
        return self


class ModelSpec(Strict):
    name: str
    quant: str
    weights_path: str
    served_name: str
    max_seq_len: int = Field(gt=0, le=4194304)
    max_input_len: int = Field(gt=0, le=4194304)
    max_batch_size: int = Field(gt=0, le=819200)
    max_prefill_tokens: int | None = Field(None, gt=0, le=4194304)
    speculative: Speculative | None = None    # e.g. {method: mtp, tokens: 1}; default: no speculative decoding


class DegreeFields(Strict):
    """Parallel degrees; unset ones come from the preset."""

    tp: int | None = Field(None, ge=1)
    dp: int | None = Field(None, ge=1)
    pp: int | None = Field(None, ge=1)
    cp: int | None = Field(None, ge=1)
    moe_tp: int | None = Field(None, ge=1)
    moe_ep: int | None = Field(None, ge=1)
    o_proj_tp: int | None = Field(None, ge=1)
    lm_head_tp: int | None = Field(None, ge=1)


class InstanceGroup(Strict):
    """One instance's servers, named explicitly (its own HCCL world: rank table, ports, engine ids)."""

    nodes: list[str] = Field(min_length=1)


class RoleLayout(DegreeFields):
    nodes: list[str] | None = Field(None, min_length=1)
    # instances: how many instances of this role (the nodes split in order into equal groups), or the
    # groups themselves ([{nodes: [...]}, ...]; then `nodes` is left out). Default: one instance of all nodes.
    instances: int | list[InstanceGroup] | None = None
    env: dict[str, str | int | float | bool] = Field(default_factory=dict)
    # this role's nodes only, over engine.env (e.g. a decode-only setting: only the decode instances restart)


class Layout(DegreeFields):
    preset: Literal["single", "tp-pp", "dp-ep", "pd-split"] | None = None
    prefill: RoleLayout | None = None
    decode: RoleLayout | None = None
    replicas: int | None = Field(None, ge=1, le=1024)
    # mixed layouts: N identical instances, the nodes split in inventory order (every degree is per instance)
    instances: list[InstanceGroup] | None = Field(None, min_length=1)
    # mixed layouts: the instances' servers named explicitly, instead of replicas


class Router(Strict):
    """Several mixed instances: the load balancer clients use (HAProxy, active health checks, drain for rolling
    updates; why HAProxy: README "Fleets"). pd-split uses the engine's own router (MindIE-MS, the P/D proxy)."""

    node: str | None = None          # the node it runs on; default: the master of the first instance
    port: int = Field(8080, ge=1024, le=65535)          # where clients connect
    admin_port: int = Field(8081, ge=1024, le=65535)    # HAProxy's runtime API, on 127.0.0.1 of that node only
    image: str = Field("haproxy:2.6", min_length=1)
    # Docker Hub's official image; 2.6 is an LTS branch and what Debian 12 ships (the simulated hosts run it)
    check_interval_ms: int = Field(1000, ge=100, le=60000)   # active health check period per instance


class Device(Strict):
    id: int
    ip: str | None = None
    sdid: int | None = Field(None, ge=0)


class Node(Strict):
    name: str = Field(pattern=NAME_PATTERN, max_length=63)
    address: str = Field(min_length=1)
    container_ip: str | None = None
    super_pod_id: str | None = None
    hccn_conf: str | None = None
    devices: list[Device] | None = None
    ssh: NodeSsh | None = None
    interface: str | None = Field(None, pattern=INTERFACE_PATTERN)
    # the network interface carrying server_ip (GLOO_SOCKET_IFNAME); default: from preflight facts
    k8s_node: str | None = Field(None, pattern=K8S_NODE_PATTERN, max_length=253)
    # Kubernetes only: the Node this server is registered as (default: name)

    _coerce_pod = field_validator("super_pod_id", mode="before")(_to_str)

    @property
    def server_ip(self) -> str:
        """The IP the node has in its rank table / engine config (container_ip, else address)."""
        return self.container_ip or self.address


class Kubernetes(Strict):
    """`render --target helm` / `up --target k8s`: where and how the Helm release goes."""

    namespace: str = Field("default", pattern=NAME_PATTERN, max_length=63)
    release: str | None = Field(None, pattern=NAME_PATTERN, max_length=53)   # default: cluster.name
    kubeconfig: str | None = None          # default: $KUBECONFIG, else ~/.kube/config
    context: str | None = None             # default: the kubeconfig's current context
    rank_table: Literal["deployctl", "cluster"] = "deployctl"
    # deployctl: the rendered rank table (byte-identical to bare metal), pods pinned to the inventory's nodes;
    # cluster: Ascend Operator writes hccl.json into ConfigMap rings-config-<name> (/user/serverid/devindex/config)
    scheduler_name: str | None = Field(None, pattern=NAME_PATTERN)   # e.g. volcano
    values: dict[str, Any] = Field(default_factory=dict)   # deep-merged over the rendered chart values


class Deploy(Strict):
    """`up` / `rollback` on the hosts: what the hosts keep."""

    keep_revisions: int = Field(5, ge=1, le=100)
    # revisions (with their history entries) each host keeps for `rollback`; current and previous always stay
    facts_max_age_hours: float = Field(24.0, gt=0, le=24 * 365)
    # `up`/`diff` use the facts of the latest successful preflight only when younger than this


def _default_kind(v: Any) -> Any:
    # an engine block without `kind` is the first engine deployctl supported
    if isinstance(v, dict) and "kind" not in v:
        return {"kind": engines.DEFAULT_KIND, **v}
    return v


EngineSettings = Annotated[Union[engines.settings_models()], Field(discriminator="kind")]


class Inventory(Strict):
    cluster: Cluster
    ssh: SshDefaults = Field(default_factory=SshDefaults)
    engine: EngineSettings
    model: ModelSpec
    layout: Layout = Field(default_factory=Layout)
    router: Router | None = None       # several mixed instances: the load balancer (default settings when left out)
    nodes: list[Node] = Field(min_length=1)
    kubernetes: Kubernetes = Field(default_factory=Kubernetes)
    deploy: Deploy = Field(default_factory=Deploy)

    _engine_kind = field_validator("engine", mode="before")(_default_kind)

    @property
    def devices_per_node(self) -> int:
        return 8 if self.cluster.hardware == "a2" else 16

    def node(self, name: str) -> Node:
        # indexed with the list it indexes (a model_copy with other nodes builds it again)
        cached = self.__dict__.get("_node_index")
        if cached is None or cached[0] != id(self.nodes):
            cached = (id(self.nodes), {n.name: n for n in self.nodes})
            self.__dict__["_node_index"] = cached
        return cached[1][name]

    @property
    def helm_release(self) -> str:
        """The Helm release of --target helm/k8s: kubernetes.release, else the cluster name."""
        return self.kubernetes.release or self.cluster.name
