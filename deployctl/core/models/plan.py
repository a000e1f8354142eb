"""The plan: instances, roles, node order, rank assignment, ports and memory fit."""

from __future__ import annotations

from typing import Any, Callable, Literal, TypeVar

from pydantic import Field

from deployctl.core.models.base import Frozen

from deployctl.core.models.inventory import Inventory

Role = Literal["mixed", "prefill", "decode"]


class Degrees(Frozen):
    """Parallel degrees of one instance (attention tp/dp/pp/cp, MoE tp/ep, local TP of o_proj and lm_head)."""

    tp: int = 1
    dp: int = 1
    pp: int = 1
    cp: int = 1
    moe_tp: int = 1
    moe_ep: int = 1
    o_proj_tp: int | None = None
    lm_head_tp: int | None = None


class Rank(Frozen):
    rank: int
    node: str
    device_id: int          # physical id (/dev/davinciN)
    local_rank: int         # logical id inside the container (npuDeviceIds)
    device_ip: str | None = None
    sdid: int | None = None


class MemoryFit(Frozen):
    """Per-die memory budget (bytes are decimal GB = 1e9 in the *_gb fields)."""

    hbm_gb: float
    memory_fraction: float
    fraction_name: str = "memory fraction"   # the engine setting it comes from
    usable_gb: float
    weights_gb: float
    weights_breakdown_gb: dict[str, float]
    workspace_gb: float
    comm_buffers_gb: float
    kv_budget_gb: float
    kv_bytes_per_token: int
    # what each running sequence keeps whatever its length (linear-attention state, sliding window, compressor state)
    state_bytes_per_seq: int = 0
    max_tokens: int          # tokens of KV cache per die (one DP group's copy)
    max_sequences: int       # concurrent sequences of max_seq_len over the whole instance
    fits: bool
    reason: str = ""
    notes: list[str] = Field(default_factory=list)   # how the engine's runtime splits weights, with sources


class Instance(Frozen):
    name: str
    role: Role
    nodes: list[str]
    master: str
    world_size: int
    degrees: Degrees
    ranks: list[Rank]
    memory: MemoryFit

    @property
    def multi_node(self) -> bool:
        return len(self.nodes) > 1


class PlanNode(Frozen):
    name: str
    address: str
    server_id: str           # rank table server_id (the node IP)
    container_ip: str
    instance: str
    role: Role
    is_master: bool
    super_pod_id: str | None = None
    interface: str | None = None   # the interface carrying container_ip (inventory or preflight facts)
    device_ids: list[int]
    runs_router: bool = False  # pd-split: this node also runs the router in front (the engine says which)


class FleetRouter(Frozen):
    """Several mixed instances: deployctl's load balancer in front of them (inventory `router`)."""

    node: str
    ip: str                  # the node's server IP (container_ip, else address): clients connect to ip:port
    port: int
    admin_port: int          # HAProxy runtime API, 127.0.0.1 only
    image: str
    check_interval_ms: int
    container: str

    @property
    def url(self) -> str:
        return f"http://{self.ip}:{self.port}"


T = TypeVar("T")
_MEMO = "_memo"          # Plan.memo's values, in the plan's own __dict__


class EngineInfo(Frozen):
    """Which engine, which version (and where that was read), and what its support matrix said."""

    kind: str
    display: str
    version: str | None
    version_source: str
    warnings: list[str] = Field(default_factory=list)   # allowed but unverified combinations, with sources
    notes: list[str] = Field(default_factory=list)


class Plan(Frozen):
    """Everything the renderers need; `deployctl plan --output json` prints this."""

    deployctl_version: str
    preset: str
    hardware: Literal["a2", "a3"]
    model_display: str
    instances: list[Instance]
    nodes: list[PlanNode] = Field(description="master first, then instance order, then inventory order")
    engine: EngineInfo
    router: FleetRouter | None = None
    inventory: Inventory
    joined: frozenset[str] = Field(frozenset(), description=(
        "Instances `deployctl scale` added on spare servers: the router learns them through its API when they "
        "start, not from its start-up configuration (which stays as the inventory's own instances make it)."))
    # Set by the caller that starts instances while others run (scaling, recovery), never by the planner: for an
    # instance about to start, the running instances of its role it may copy its weights from, best first. An
    # engine that can load weights from a peer renders that into the instance's launch when its settings turn
    # it on; every other engine, and every instance not named here, renders as without it. Left out of plan.json
    # while empty.
    weight_peers: dict[str, tuple[str, ...]] = Field(
        default_factory=dict, exclude_if=lambda v: not v,
        description="instance name -> names of running instances of the same role to load its weights from, "
                    "tried in order (empty: every instance loads from disk)")

    @property
    def engine_spec(self) -> Any:
        """The EngineSpec of engine.kind the inventory was validated with (core/engine_spec/protocol.py)."""
        return self.inventory.engine_spec

    @property
    def _by_name(self) -> tuple[dict[str, PlanNode], dict[str, Instance]]:
        # a 1,024-server plan is asked for its nodes thousands of times: look them up, do not scan
        return self.memo(("by-name",), lambda: ({n.name: n for n in self.nodes}, {i.name: i for i in self.instances}))

    def memo(self, key: tuple, build: Callable[[], T]) -> T:
        """A value derived from this plan alone, built once per key: an engine's file that is the same for every
        node of an instance is made once per instance (an 8,192-server plan has 512 of them). Callers must not
        change what they get. Kept for this object only: a plan is frozen, and its copies (which may change
        fields) start afresh (model_copy, copy.copy and copy.deepcopy leave it behind)."""
        values: dict[tuple, Any] = self.__dict__.setdefault(_MEMO, {})
        if key not in values:
            values[key] = build()
        return values[key]

    # model_copy copies through these two (pydantic BaseModel.model_copy), so they are the one place to drop it
    def __copy__(self) -> Plan:
        copied = super().__copy__()
        copied.__dict__.pop(_MEMO, None)
        return copied

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Plan:
        copied = super().__deepcopy__(memo)
        copied.__dict__.pop(_MEMO, None)
        return copied

    def node(self, name: str) -> PlanNode:
        return self._by_name[0][name]

    def instance(self, name: str) -> Instance:
        return self._by_name[1][name]

    def role(self, role: str) -> list[Instance]:
        """The instances of one role (mixed, prefill, decode), in plan order (a fresh list; the grouping is made
        once per plan: a launch per node asks for it)."""
        return list(self.memo(("role", role), lambda: tuple(i for i in self.instances if i.role == role)))
