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
    for host, uses in _uses(plan).items():
        uses = sorted(uses)
        for (a0, a1, what_a), (b0, b1, what_b) in zip(uses, uses[1:]):
            if b0 <= a1:
                out.append(Finding("error", "engine.ports", f"on {host}, {what_a} and {what_b} overlap",
                                   hint="give these ports room apart in engine.ports"))
    return out
