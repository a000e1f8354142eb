"""The inventory file as immutable pydantic models (contract: spec/inventory.md §1)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Callable, Literal, Union

from pydantic import Field, PrivateAttr, field_validator, model_validator

from deployctl.core.models.engine_settings import DEFAULT_KIND, SETTINGS
from deployctl.core.models.base import Strict
from deployctl.core.models.recovery import Recovery
from deployctl.core.models.scaling import Scaling
from deployctl.core.models.patterns import INTERFACE_PATTERN

NAME_PATTERN = r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$"
K8S_NODE_PATTERN = r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$"   # a DNS subdomain, as Kubernetes names nodes
# a login name as useradd accepts it (never an ssh option, nothing for ansible to template)
USER_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*\$?$"


def _to_str(v: Any) -> Any:
    # YAML reads `super_pod_id: 0` as an int; ids are strings in every Ascend format.
    return str(v) if isinstance(v, int) and not isinstance(v, bool) else v


def _id_schema(schema: dict) -> None:
    # the JSON Schema says what _to_str accepts: an id written as a string or an integer
    schema.pop("anyOf", None)
    schema["type"] = ["string", "integer", "null"]


class Cluster(Strict):
    """The servers' kind and the cluster's name."""

    name: str = Field(pattern=NAME_PATTERN, max_length=40, description=(
        "The cluster's name: lower-case letters, digits and '-', at most 40 characters. Names the engine "
        "container (deployctl_<name>_<engine>), the deploy directory on each host and the default Helm release."))
    hardware: Literal["a2", "a3"] = Field(description=(
        "a2: Atlas 800I/800T A2, 8 x 910B per server (device ids 0-7); a3: Atlas 800 A3, 8 x 910C = 16 dies "
        "per server (device ids 0-15)."))
    hbm_gb: int = Field(64, gt=0, le=1024, description=(
        "HBM per device (die) in GiB, as npu-smi shows it (65536 MB: 64); 910B4 SKUs have 32."))
    super_pod: bool = Field(False, description=(
        "a3 only: the rank table gets version 1.2 with super_device_id per device and super_pod_list; then "
        "every node needs super_pod_id and every device sdid."))
    sku: str | None = Field(None, max_length=40, description=(
        "NPU SKU for `plan`'s performance estimate: 910B1..910B4 (A2), 800I-A3 or 800T-A3 (A3), or the chip "
        "name `npu-smi info` shows. Default: that chip name from preflight facts (--facts), else 910B3 (A2) / "
        "800I-A3 (A3)."))


_SSH_USER = "The login name on the hosts."
_SSH_PORT = "The SSH port of the hosts."
_SSH_KEY = "The private key file (relative paths: to the inventory file)."
_SSH_KNOWN = ("The known_hosts file host keys are verified against; new hosts are trusted only with an "
              "explicit flag.")


class SshDefaults(Strict):
    """How later commands (preflight, up, status, logs, down) reach the hosts; a node may override any of these
    under nodes[].ssh."""

    user: str = Field("root", pattern=USER_PATTERN, max_length=32, description=_SSH_USER)
    port: int = Field(22, ge=1, le=65535, description=_SSH_PORT)
    key: str = Field("~/.ssh/id_ed25519", description=_SSH_KEY)
    known_hosts: str = Field("~/.ssh/known_hosts", description=_SSH_KNOWN)


class NodeSsh(Strict):
    """This node's SSH settings over the top-level ssh block (unset keys come from it)."""

    user: str | None = Field(None, pattern=USER_PATTERN, max_length=32, description=_SSH_USER)
    port: int | None = Field(None, ge=1, le=65535, description=_SSH_PORT)
    key: str | None = Field(None, description=_SSH_KEY)
    known_hosts: str | None = Field(None, description=_SSH_KNOWN)


class Speculative(Strict):
    """Speculative decoding, one setting for every engine: MindIE renders ModelConfig[0].plugin_params
    {"plugin_type":"mtp","num_speculative_tokens":N}, vLLM-Ascend `--speculative-config`; the performance model
    counts the drafts. An engine (or version) that does not run the method refuses it, with its source."""

    method: Literal["mtp", "eagle", "eagle3", "dflash"] = Field(description=(
        "mtp: the checkpoint's own next-token layers (DeepSeek's num_nextn_predict_layers); eagle/eagle3: a "
        "draft model; dflash: a block-diffusion draft model. Which engine versions run which method: "
        "docs/engines.md."))
    tokens: int = Field(1, ge=1, le=16, description="num_speculative_tokens: drafted tokens per step.")
    draft_weights_path: str | None = Field(None, description=(
        "eagle/eagle3/dflash: the draft model's weights, as the engine container sees them (mount them with "
        "engine.mounts)."))
    acceptance: list[float] | None = Field(None, min_length=1, max_length=16, description=(
        "For the performance estimate only: the share of drafts accepted at each position, measured on your "
        "traffic (e.g. [0.8, 0.55] for 2 tokens; the engine's spec-decode metrics report it). Default: the "
        "method's published figure (docs/performance-model.md)."))

    @field_validator("acceptance")
    @classmethod
    def _rates(cls, v: list[float] | None) -> list[float] | None:
        if v is not None and not all(0.0 <= r <= 1.0 for r in v):
            raise ValueError("each position's acceptance is a share between 0 and 1")
        return v

    @model_validator(mode="after")
    def _draft(self) -> Speculative:
        if self.method == "mtp" and self.draft_weights_path is not None:
            raise ValueError("mtp drafts with the model's own layers: remove draft_weights_path")
        if self.method != "mtp" and self.draft_weights_path is None:
            raise ValueError(f"{self.method} needs draft_weights_path (the draft model's weights)")
        return self


class ModelSpec(Strict):
    """The model served and its request limits."""

    name: str = Field(description=(
        "The model, from the catalog: deepseek-v3, deepseek-r1, deepseek-v3.2, deepseek-v3.2-exp, "
        "qwen3-235b-a22b (`deployctl engines` shows which ones each engine runs); or any name with "
        "model.config_path, the model then sized from its checkpoint's files."))
    quant: str = Field(description=(
        "The weights' quantization: bf16, w8a8, w8a8c8 (V3.2) or w4a8, as the model and the engine run them "
        "(`deployctl engines` shows each engine's)."))
    weights_path: str = Field(description="Absolute path of the weights on every host (mounted read-only).")
    config_path: str | None = Field(None, max_length=4096, description=(
        "A local directory with the checkpoint's small files: config.json, model.safetensors.index.json and "
        "msmodelslim's quant_model_description*.json (relative paths: to the inventory file). The model is then "
        "sized from them (docs/models.md), under model.name; needed when model.name is not in the catalog."))
    served_name: str = Field(description=(
        "The model name clients send: letters, digits, '-', '.' and '_'."))
    max_seq_len: int = Field(gt=0, le=4194304, description="Input + output tokens per request (maxSeqLen).")
    max_input_len: int = Field(gt=0, le=4194304, description=(
        "Input tokens per request (maxInputTokenLen); at most max_seq_len."))
    max_batch_size: int = Field(gt=0, le=819200, description=(
        "Requests batched together (maxBatchSize); the plan warns when the KV cache holds fewer sequences."))
    max_prefill_tokens: int | None = Field(None, gt=0, le=4194304, description=(
        "Tokens of one prefill batch; sizes the prefill workspace. Default: max(8192, max_input_len). May be less "
        "than max_input_len where the engine splits long prompts into chunks (docs/per-role-settings.md)."))
    speculative: Speculative | None = Field(None, description=(
        "Speculative decoding, e.g. {method: mtp, tokens: 1}; default: none. Each engine renders it in its "
        "own form and refuses a method it does not run."))


class DegreeFields(Strict):
    """Parallel degrees; unset ones come from the preset."""

    tp: int | None = Field(None, ge=1, description=(
        "Tensor parallel; stays inside one server (HCCS): a divisor of 8 (A2) or 16 (A3). "
        "tp * dp * pp * cp = the devices of one instance."))
    dp: int | None = Field(None, ge=1, description="Attention data parallel.")
    pp: int | None = Field(None, ge=1, description="Pipeline stages.")
    cp: int | None = Field(None, ge=1, description="Context parallel (pd-split prefill).")
    moe_tp: int | None = Field(None, ge=1, description=(
        "Expert tensor parallel; moe_tp * moe_ep = the devices of one pipeline stage."))
    moe_ep: int | None = Field(None, ge=1, description=(
        "Expert parallel; must divide the routed experts (256 DeepSeek, 128 Qwen3)."))
    o_proj_tp: int | None = Field(None, ge=1, description="Tensor parallel of the attention output projection.")
    lm_head_tp: int | None = Field(None, ge=1, description="Tensor parallel of the LM head.")


class InstanceGroup(Strict):
    """One instance's servers, named explicitly (its own HCCL world: rank table, ports, engine ids)."""

    nodes: list[str] = Field(min_length=1, description="The names of this instance's nodes (nodes[].name).")
    name: str | None = Field(None, pattern=NAME_PATTERN, max_length=40, description=(
        "The instance's name in every command's output and record. Default: the role's name when the role has "
        "one instance (mixed, prefill, decode), else the role's name and the instance's index (decode-1). "
        "`deployctl scale --apply` names the instances it adds this way, so the others keep theirs."))


class RoleModel(Strict):
    """pd-split: the request limits one role's instances are configured with, over the model block."""

    max_batch_size: int | None = Field(None, gt=0, le=819200, description=(
        "This role's batch limit, over model.max_batch_size."))
    max_prefill_tokens: int | None = Field(None, gt=0, le=4194304, description=(
        "This role's prefill batch in tokens, over model.max_prefill_tokens. Unset on a decode role of an engine "
        "that chunks prompts: its max_batch_size x (1 + speculative tokens), the tokens of one decode step."))
    prefill_budget_tokens: int | None = Field(None, gt=0, le=4194304, description=(
        "The tokens of one forward batch this role's memory is sized for (its activation workspace), when that "
        "differs from the max_prefill_tokens it is configured with: a decode role of an engine that refuses a "
        "prefill budget below max_input_len even on decode, which never prefills (docs/per-role-settings.md), "
        "sized for what it runs, e.g. its max_batch_size x (1 + speculative tokens), not for a whole prompt. "
        "Default: max_prefill_tokens."))
    speculative_tokens: int | None = Field(None, ge=1, le=16, description=(
        "This role's drafted tokens per step, over model.speculative.tokens (needs model.speculative). "
        "Published deployments draft fewer tokens on prefill than on decode (e.g. 1 and 7)."))


class RoleLayout(DegreeFields):
    """pd-split: one role's nodes (no overlap with the other role) and its own degrees; unset degrees come from
    the engine's runtime defaults."""

    nodes: list[str] | None = Field(None, min_length=1, description=(
        "The names of this role's nodes (nodes[].name); left out when `instances` lists the groups."))
    instances: int | list[InstanceGroup] | None = Field(None, description=(
        "How many instances of this role (the nodes split in order into equal groups), or the groups "
        "themselves ([{nodes: [...]}, ...]; then `nodes` is left out). Default: one instance of all the nodes."))
    env: dict[str, str | int | float | bool] = Field(default_factory=dict, description=(
        "Environment for this role's nodes only, over engine.env (e.g. a decode-only setting: only the decode "
        "instances restart); HCCL_BUFFSIZE may differ per role (the role's memory fit reads it)."))
    model: RoleModel | None = Field(None, description=(
        "This role's request limits over the model block, e.g. {max_batch_size: 16, max_prefill_tokens: 8192} "
        "for prefill and {max_batch_size: 64} for decode."))
    engine: dict[str, Any] = Field(default_factory=dict, description=(
        "This role's engine settings over the engine block: only the keys the engine lets differ per role "
        "(`deployctl engines` lists them, e.g. extra flags, additional configuration, memory share, config "
        "sections). Mappings merge key by key (lists of objects by position), lists are appended after the "
        "engine block's (a role's flag wins), other values replace."))


class Layout(DegreeFields):
    """How the model is split over the servers: a preset, degrees over it, pd-split roles or several
    identical instances."""

    preset: Literal["single", "tp-pp", "dp-ep", "pd-split"] | None = Field(None, description=(
        "single: 1 server, tp = all its devices; tp-pp: tp inside each server, one pipeline stage per server; "
        "dp-ep: attention dp across servers (tp inside), experts over all devices; pd-split: separate prefill "
        "and decode instances (layout.prefill, layout.decode)."))
    prefill: RoleLayout | None = Field(None, description="pd-split: the prefill role.")
    decode: RoleLayout | None = Field(None, description="pd-split: the decode role.")
    replicas: int | None = Field(None, ge=1, le=1024, description=(
        "Mixed layouts: N identical instances, the nodes split in inventory order (every degree is per "
        "instance); a router balances them."))
    instances: list[InstanceGroup] | None = Field(None, min_length=1, description=(
        "Mixed layouts: the instances' servers named explicitly, instead of replicas."))


class Router(Strict):
    """Several mixed instances: the load balancer clients use (HAProxy, active health checks, drain for rolling
    updates; why HAProxy: docs/fleets.md). pd-split uses the engine's own router (MindIE-MS, the P/D proxy)."""

    node: str | None = Field(None, description=(
        "The node it runs on (nodes[].name); default: the master of the first instance."))
    port: int = Field(8080, ge=1024, le=65535, description="Where clients connect.")
    admin_port: int = Field(8081, ge=1024, le=65535, description=(
        "HAProxy's runtime API, on 127.0.0.1 of that node only; on the node's address the same port serves "
        "read-only Prometheus metrics (GET /metrics, `deployctl observe render`)."))
    image: str = Field("haproxy:2.6", min_length=1, description=(
        "The HAProxy image (Docker Hub's official one; 2.6 is an LTS branch)."))
    check_interval_ms: int = Field(1000, ge=100, le=60000, description=(
        "Active health check period per instance, in milliseconds."))


class Device(Strict):
    """One NPU (die) of a server."""

    id: int = Field(description="Physical id N of /dev/davinciN: 0-7 (A2), 0-15 (A3).")
    ip: str | None = Field(None, description=(
        "Its NPU NIC IP (hccn_tool -i N -ip -g): unique across the cluster, one IP family. Default: from "
        "hccn_conf, else from preflight facts."))
    sdid: int | None = Field(None, ge=0, description=(
        "a3 + super_pod: the super device id (npu-smi info -t spod-info -i NPU -c CHIP)."))


class Node(Strict):
    """One server. The master (rank 0) is the first node of its instance."""

    name: str = Field(pattern=NAME_PATTERN, max_length=63, description=(
        "Unique name: lower-case letters, digits and '-'."))
    address: str = Field(min_length=1, description=(
        "Where SSH connects; also the server id and container_ip unless set."))
    container_ip: str | None = Field(None, description=(
        "The IP the engine binds and matches; must be an IP. Default: address."))
    super_pod_id: str | None = Field(None, description="a3 + super_pod only: the super pod this server is in.",
                                     json_schema_extra=_id_schema)
    hccn_conf: str | None = Field(None, description=(
        "A copy of this host's /etc/hccn.conf (relative paths: to the inventory file): device IPs come from "
        "its address_N= lines."))
    devices: list[Device] | None = Field(None, description=(
        "All 8 (A2) or 16 (A3) devices with their IPs; default: from hccn_conf or preflight facts."))
    ssh: NodeSsh | None = Field(None, description="This node's SSH settings over the top-level ssh block.")
    interface: str | None = Field(None, pattern=INTERFACE_PATTERN, description=(
        "The network interface carrying this node's IP (GLOO_SOCKET_IFNAME, needed by torch runtimes across "
        "servers); default: what preflight reads with `ip -o addr`."))
    k8s_node: str | None = Field(None, pattern=K8S_NODE_PATTERN, max_length=253, description=(
        "Kubernetes only: the Node this server is registered as (default: name)."))

    _coerce_pod = field_validator("super_pod_id", mode="before")(_to_str)

    @property
    def server_ip(self) -> str:
        """The IP the node has in its rank table / engine config (container_ip, else address)."""
        return self.container_ip or self.address


# MindCluster's fault handling keys on the pods (Ascend/mind-cluster@22bb3d98: values in docs/zh/scheduling/04_usage/
# 09_infer_operator_best_practice/01_deploying_infer_operator_inference_job_with_vllm_proxy.md L231-275, the
# schedule policies in docs/zh/scheduling/06_api/01_volcano.md L65-71, L155-175; Volcano's Ascend plugin reads them
# from the pods: component/ascend-for-volcano/plugin/job.go L179-235)
SCHEDULE_POLICY_PATTERN = r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$"


class MindClusterLabels(Strict):
    """Opt-in MindCluster keys on every engine pod, for Volcano's Ascend plugin and ClusterD (MindCluster 26.1)."""

    fault_scheduling: Literal["grace", "force", "external-grace", "external-force", "off"] | None = Field(
        None, description="Pod label fault-scheduling: how MindCluster reschedules an instance whose NPU or node "
        "fails (grace: stop gracefully, then reschedule the whole group; external-*: the Infer Operator does it).")
    fault_retry_times: int | None = Field(None, ge=0, le=10000, description=(
        "Pod label fault-retry-times: how often a business-plane fault is retried (0: never)."))
    schedule_policy: str | None = Field(None, pattern=SCHEDULE_POLICY_PATTERN, description=(
        "Pod annotation huawei.com/schedule_policy: the NPU topology policy, e.g. chip8-node8 (A2 server) or "
        "chip2-node16-sp (A3 super pod)."))


class Kubernetes(Strict):
    """`render --target helm` / `up --target k8s`: where and how the Helm release goes."""

    namespace: str = Field("default", pattern=NAME_PATTERN, max_length=63, description=(
        "Where the Helm release goes (created if missing)."))
    release: str | None = Field(None, pattern=NAME_PATTERN, max_length=53, description=(
        "The Helm release name; default: cluster.name."))
    kubeconfig: str | None = Field(None, description=(
        "Default: $KUBECONFIG, else ~/.kube/config (relative paths: to the inventory file)."))
    context: str | None = Field(None, description="Default: the kubeconfig's current context.")
    rank_table: Literal["deployctl", "cluster"] = Field("deployctl", description=(
        "deployctl: the rendered rank table (byte-identical to bare metal), pods pinned to the inventory's "
        "nodes; cluster: Ascend Operator writes hccl.json into ConfigMap rings-config-<name>."))
    workload: Literal["statefulset", "lws", "infer-operator"] = Field("statefulset", description=(
        "What runs an instance's pods. statefulset: StatefulSets the chart owns, restarted by deployctl when their "
        "files or env change; lws: one LeaderWorkerSet per instance (leaderworkerset.x-k8s.io/v1: leader = the "
        "instance's master server, size = its servers, the whole group recreated when one pod fails, rolling "
        "updates by the LWS controller), which must be installed in the cluster; infer-operator: one "
        "InferServiceSet (mindcluster.huawei.com/v1, MindCluster 26.1's Infer Operator) whose roles are the "
        "instances' master and worker servers. `--target lws` / `--target infer-operator` set it."))
    scheduler_name: str | None = Field(None, pattern=NAME_PATTERN, description=(
        "The pods' scheduler, e.g. volcano (MindCluster gang scheduling)."))
    gang: Literal["auto", "volcano", "kubernetes", "off"] = Field("auto", description=(
        "Gang scheduling: one PodGroup per instance holding all of its pods, so that an instance is placed whole "
        "or not at all. volcano: Volcano's PodGroup (scheduling.volcano.sh/v1beta1; the pods' schedulerName "
        "becomes volcano); kubernetes: the Kubernetes 1.36 PodGroup (scheduling.k8s.io/v1alpha2, alpha: the "
        "GenericWorkload and GangScheduling feature gates); off: none. auto: `up` asks the cluster (volcano if it "
        "serves Volcano's PodGroups, else kubernetes if it serves the 1.36 ones, else off) and `status` says which; "
        "an offline render takes volcano when scheduler_name is volcano, else off."),
        # YAML 1.1 (editors, PyYAML) reads a bare `off` as false, which the model takes as "off" too
        json_schema_extra=lambda s: s.update(anyOf=[{"enum": s.pop("enum"), "type": s.pop("type")},
                                                    {"const": False}]))
    queue: str | None = Field(None, pattern=NAME_PATTERN, max_length=63, description=(
        "Volcano: the queue of the PodGroups (default: Volcano's own default queue)."))
    priority_class: str | None = Field(None, pattern=K8S_NODE_PATTERN, max_length=253, description=(
        "The PriorityClass of every pod and of Volcano's PodGroups (it must exist in the cluster)."))
    mindcluster: MindClusterLabels | None = Field(None, description=(
        "MindCluster's fault rescheduling and NPU topology keys on every engine pod (off unless set)."))

    @field_validator("gang", mode="before")
    @classmethod
    def _off_is_off(cls, v: Any) -> Any:
        return "off" if v is False else v      # YAML 1.1 reads a bare `off` as false
    values: dict[str, Any] = Field(default_factory=dict, description=(
        "Deep-merged over the rendered chart values (deployctl/charts/ascend-llm/values.yaml)."))


class Deploy(Strict):
    """`up` / `rollback` on the hosts: what the hosts keep."""

    keep_revisions: int = Field(5, ge=1, le=100, description=(
        "Revisions (with their history entries) each host keeps for `rollback`; current and previous always "
        "stay."))
    facts_max_age_hours: float = Field(24.0, gt=0, le=24 * 365, description=(
        "Every command fills missing device IPs from the latest successful preflight only when it is younger "
        "than this (else: run preflight again, or --facts FILE; `up`/`diff` refuse, `validate`/`plan` plan "
        "without them and say so)."))
    recovery: Recovery = Field(default_factory=Recovery, description=(
        "`deployctl watch`: restart a failed instance behind the router (docs/watch.md); off by default."))
    scaling: Scaling = Field(default_factory=Scaling, description=(
        "`deployctl scale`: when a role should get another instance or lose one, from the engines' measured load "
        "(docs/scaling.md); a role is scaled only when `roles` gives its bounds."))


def _default_kind(v: Any) -> Any:
    # an engine block without `kind` is the first engine deployctl supported
    if isinstance(v, dict) and "kind" not in v:
        return {"kind": DEFAULT_KIND, **v}
    return v


if TYPE_CHECKING:   # the same union, spelled out for the type checker (core/models/engine_settings/)
    from deployctl.core.models.engine_settings import AnySettings

    EngineSettings = Annotated[AnySettings, Field(discriminator="kind")]
else:
    EngineSettings = Annotated[Union[tuple(SETTINGS.values())], Field(discriminator="kind")]


class Inventory(Strict):
    """A deployctl inventory: the servers, the engine and the model, and how the model is split over the
    servers (docs/inventory.md; every key with its default: inventories/sample.yaml)."""

    cluster: Cluster = Field(description="The servers' kind and the cluster's name.")
    ssh: SshDefaults = Field(default_factory=SshDefaults, description=(
        "How preflight, up, status, logs and down reach the hosts; nodes[].ssh overrides it per node."))
    engine: EngineSettings = Field(description=(
        "The engine: `kind` selects the driver (the default kind when left out; `deployctl engines` lists "
        "them) and the keys this block accepts."))
    model: ModelSpec = Field(description="The model served and its request limits.")
    layout: Layout = Field(default_factory=Layout, description="How the model is split over the servers.")
    router: Router | None = Field(None, description=(
        "Several mixed instances: the load balancer (default settings when left out)."))
    nodes: list[Node] = Field(min_length=1, description="The servers, in rank order.")
    kubernetes: Kubernetes = Field(default_factory=Kubernetes, description=(
        "Only for `render --target helm` and `up/status/down/diff --target k8s`: where and how the Helm "
        "release goes."))
    deploy: Deploy = Field(default_factory=Deploy, description="`up` / `rollback` / `history` on the hosts.")

    _engine_kind = field_validator("engine", mode="before")(_default_kind)
    # the model described from model.config_path (a catalog ModelInfo), attached by validation: with_checkpoint
    _checkpoint: Any = PrivateAttr(None)
    # the engine spec of engine.kind, handed down by the composition root (deployctl/app/) through validation
    _engine_spec: Any = PrivateAttr(None)
    _charts: Any = PrivateAttr(None)      # () -> every engine's Chart (the chart holds every engine's block)

    @property
    def engine_spec(self) -> Any:
        """The EngineSpec (core/engine_spec/protocol.py) of engine.kind, attached by validation: with_engine."""
        if self._engine_spec is None:
            raise RuntimeError("no engine spec attached: validate the inventory through deployctl.app "
                               "(app.inventory.validate_inventory), which resolves engine.kind once")
        return self._engine_spec

    @property
    def charts(self) -> tuple:
        """Every engine's Chart (core/engine_spec/protocol.py), handed down with the spec: the chart's values
        model holds every engine's block (core/render/chart_values.py values_model)."""
        self.engine_spec   # the same error when nothing was attached
        return tuple(self._charts())      # made when a chart is rendered or checked, not on every validation

    def with_engine(self, spec: Any, charts: Callable[[], tuple]) -> "Inventory":
        """A copy carrying the engine spec of engine.kind and every engine's chart (copies made from it keep them)."""
        if spec.kind != self.engine.kind:
            raise ValueError(f"engine spec {spec.kind!r} handed to an inventory of engine.kind {self.engine.kind!r}")
        out = self.model_copy()
        out._engine_spec = spec
        out._charts = charts
        return out

    @property
    def checkpoint_model(self) -> Any:
        """The ModelInfo validation described from model.config_path's checkpoint files; None without one."""
        return self._checkpoint

    def with_checkpoint(self, info: Any) -> "Inventory":
        """A copy carrying the model described from its checkpoint (copies made from it keep it)."""
        out = self.model_copy()
        out._checkpoint = info
        return out

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
