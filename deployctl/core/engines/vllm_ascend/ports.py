"""The port plan of a vLLM-Ascend deployment, host by host: every port a process binds must be its own, and
KV ports stay above Mooncake's random range (pd_disaggregation_mooncake_multi_node.md@HEAD; issue #8938)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from deployctl.core.engine_spec.protocol import Finding
from deployctl.core.models.engine_settings.vllm_ascend import VllmAscendSettings

if TYPE_CHECKING:
    from deployctl.core.models.plan import Plan

MOONCAKE_SOURCE = ("VA docs/source/tutorials/features/pd_disaggregation_mooncake_multi_node.md@HEAD (Mooncake takes "
                   "random ports in [20000, 20000 + 1000 x NPUs)); PR #6455; issue #8938")


def kv_floor(plan: Plan) -> int:
    return 20000 + 1000 * plan.inventory.devices_per_node


def _uses(plan: Plan) -> dict[str, list[tuple[int, int, str]]]:
    """host -> [(first port, last port, what)] for every port a process of this deployment binds there."""
    from deployctl.core.engines.vllm_ascend.launch import kv_transfer, launches
    from deployctl.core.engines.vllm_ascend.netloader import port_spans, serve_ranks

    e = cast(VllmAscendSettings, plan.inventory.engine)
    out: dict[str, list[tuple[int, int, str]]] = {}
    for name, launch in launches(plan).items():
        node = plan.node(name)
        uses = out.setdefault(name, [])
        for s in launch.serves:
            if s.port is not None:
                uses.append((s.port, s.port, f"the API port {s.port} (engine.ports.api)"))
        inst = plan.instance(node.instance)
        if node.name == inst.master and (inst.degrees.dp > 1 or inst.role != "mixed"):
            uses.append((e.ports.dp_rpc, e.ports.dp_rpc, "--data-parallel-rpc-port (engine.ports.dp_rpc)"))
        if node.name == inst.master and inst.degrees.pp > 1:
            uses.append((e.ports.master, e.ports.master, "--master-port (engine.ports.master)"))
        if launch.proxy is not None:
            uses.append((e.ports.proxy, e.ports.proxy, "the proxy (engine.ports.proxy)"))
        k = inst.nodes.index(name)       # engine.netloader: the weight servers of this node's ranks
        uses += port_spans(plan, inst.role, [r for s in launch.serves for r in serve_ranks(plan, inst, k, s.devices)])
        if inst.role != "mixed":
            kv = int(kv_transfer(plan, inst)["kv_port"])
            # each node of an instance listens on kv_port .. kv_port + its NPUs (v0.11 guide §"launch")
            uses.append((kv, kv + plan.inventory.devices_per_node, f"the {inst.role} KV ports {kv}-"
                         f"{kv + plan.inventory.devices_per_node} (engine.ports.kv_base)"))
    return out


def port_findings(plan: Plan) -> list[Finding]:
    out = []
    if plan.preset == "pd-split":
        from deployctl.core.engines.vllm_ascend.launch import kv_base

        floor = kv_floor(plan)
        if kv_base(plan) < floor:
            out.append(Finding("error", "engine.ports.kv_base", f"kv_base {kv_base(plan)} lies in Mooncake's random "
                               f"port range on {plan.inventory.devices_per_node}-NPU nodes (below {floor}): "
                               "transfers fail now and then with `ZMQError: Address already in use`", MOONCAKE_SOURCE,
                               hint=f"set engine.ports.kv_base to {floor} or more (or leave it out)"))
    out += _weight_servers_in_mooncakes_range(plan)
    for host, uses in _uses(plan).items():
        uses = sorted(uses)
        for (a0, a1, what_a), (b0, b1, what_b) in zip(uses, uses[1:]):
            if b0 <= a1:
                out.append(Finding("error", "engine.ports", f"on {host}, {what_a} and {what_b} overlap",
                                   hint="give these ports room apart in engine.ports"))
    return out


def _weight_servers_in_mooncakes_range(plan: Plan) -> list[Finding]:
    """pd-split with engine.netloader: no weight server port in Mooncake's random range (netloader.py)."""
    from deployctl.core.engines.vllm_ascend.netloader import key_of, port_spans, roles_on

    out: list[Finding] = []
    if plan.preset != "pd-split":
        return out
    for role in roles_on(plan.inventory):
        last = max(i.world_size for i in plan.role(role)) - 1
        hit = [(a, b) for a, b, _ in port_spans(plan, role, [0, last]) if a < kv_floor(plan) and b >= 20000]
        if hit:
            path = f"{key_of(plan.inventory, role)}.listen_port"
            out.append(Finding("error", path, f"the weight servers' ports {hit[0][0]}-{hit[0][1]} reach into "
                               f"Mooncake's random ports [20000, {kv_floor(plan)}) on "
                               f"{plan.inventory.devices_per_node}-NPU nodes: a server fails now and then with its "
                               "port taken", MOONCAKE_SOURCE,
                               hint="keep listen_port + rank (+ 10000 with a draft model on 0.23) below 20000 (the "
                                    "default 7000 does)"))
    return out
