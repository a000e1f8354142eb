"""Inventory -> Plan: instances, deterministic node order, ranks, memory fit per role."""

from __future__ import annotations

from deployctl import __version__, catalog
from deployctl.errors import LayoutError, Problem
from deployctl.models.inventory import Device, Inventory
from deployctl.models.plan import Instance, Plan, PlanNode, Rank
from deployctl.planning.env import preset_env
from deployctl.planning.layout import effective_preset, resolve_instances
from deployctl.planning.memory import memory_fit


def max_prefill_tokens(inv: Inventory) -> int:
    return inv.model.max_prefill_tokens or max(8192, inv.model.max_input_len)


def node_devices(inv: Inventory, name: str) -> list[Device]:
    node = inv.node(name)
    if node.devices is not None:
        return sorted(node.devices, key=lambda d: d.id)
    return [Device(id=i) for i in range(inv.devices_per_node)]


def assign_ranks(inv: Inventory, nodes: list[str]) -> list[Rank]:
    """Node by node, device by device (physical id order): rank ids 0..N-1, no interleaving."""
    ranks = []
    for name in nodes:
        for local, dev in enumerate(node_devices(inv, name)):
            ranks.append(Rank(rank=len(ranks), node=name, device_id=dev.id, local_rank=local,
                              device_ip=dev.ip, sdid=dev.sdid))
    return ranks


def _refusal(inv: Inventory, failing: list[Instance]) -> LayoutError:
    m = inv.model
    info = catalog.models()[m.name]
    hw = inv.cluster.hardware.upper()
    problems = []
    for inst in failing:
        f = inst.memory
        d = inst.degrees
        problems.append(Problem(
            f"{inst.name} instance ({len(inst.nodes)} x {hw}, tp={d.tp} dp={d.dp} pp={d.pp} cp={d.cp} "
            f"moe_tp={d.moe_tp} moe_ep={d.moe_ep}): needs {f.weights_gb + f.workspace_gb:.1f} GB per die "
            f"(weights {f.weights_gb:.1f} + workspace {f.workspace_gb:.1f}), "
            f"{f.usable_gb:.1f} GB usable ({f.hbm_gb:.1f} GB HBM x NPU_MEMORY_FRACTION {f.memory_fraction}); "
            f"{f.reason}"))
    own = info.quants[m.quant]
    smaller = [q for q, b in info.quants.items() if b.experts < own.experts]
    hint = "add nodes (expert weights per die shrink with moe_ep)"
    if smaller:
        hint += f", or use a smaller quantization ({', '.join(smaller)})"
    hint += ", or lower max_seq_len / max_input_len"
    return LayoutError(f"{info.display} {m.quant} does not fit in memory on this layout",
                       problems=problems, hint=hint)


def plan_layout(inv: Inventory) -> Plan:
    """Build the plan for a validated inventory.

    Raises:
        LayoutError: degrees do not add up, or a role's KV budget per die is <= 0 / cannot hold one
            max_seq_len sequence (with the numbers).
    """
    specs = resolve_instances(inv)
    problems = [p for s in specs for p in s.problems]
    if problems:
        raise LayoutError("the layout does not fit these nodes", problems=problems)
    info = catalog.models()[inv.model.name]
    instances = []
    for spec in specs:
        env = preset_env(inv.cluster.hardware, spec.role, inv.engine.env)
        fit = memory_fit(info, inv.model.quant, spec.degrees, hbm_gb=inv.cluster.hbm_gb,
                         fraction=float(env.get("NPU_MEMORY_FRACTION", "0.8")),
                         hccl_buffsize_mb=int(float(env.get("HCCL_BUFFSIZE", "200"))),
                         max_seq_len=inv.model.max_seq_len, max_prefill_tokens=max_prefill_tokens(inv))
        ranks = assign_ranks(inv, spec.nodes)
        instances.append(Instance(name=spec.name, role=spec.role, nodes=spec.nodes, master=spec.nodes[0],
                                  world_size=len(ranks), degrees=spec.degrees, ranks=ranks, memory=fit))
    failing = [i for i in instances if not i.memory.fits]
    if failing:
        raise _refusal(inv, failing)
    preset = effective_preset(inv)
    nodes = []
    for inst in instances:
        for name in inst.nodes:
            node = inv.node(name)
            nodes.append(PlanNode(
                name=name, address=node.address, server_id=node.server_ip, container_ip=node.server_ip,
                instance=inst.name, role=inst.role, is_master=name == inst.master,
                super_pod_id=node.super_pod_id, device_ids=[d.id for d in node_devices(inv, name)],
                runs_ms=preset == "pd-split" and name == instances[0].master))
    return Plan(deployctl_version=__version__, preset=preset, hardware=inv.cluster.hardware,
                model_display=info.display, instances=instances, nodes=nodes, ports=inv.engine.ports,
                inventory=inv)
