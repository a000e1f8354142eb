"""Inventory -> Plan: instances, deterministic node order, ranks, memory fit per role."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from deployctl import __version__
from deployctl.core import catalog
from deployctl.core.errors import LayoutError, Problem
from deployctl.core.models.inventory import Device, Inventory, Router as RouterSettings
from deployctl.core.models.plan import Degrees, EngineInfo, FleetRouter, Instance, MemoryFit, Plan, PlanNode, Rank
from deployctl.core.sizing.instances import router_node
from deployctl.core.sizing.layout import effective_preset, resolve_instances
from deployctl.core.sizing.limits import workspace_tokens
from deployctl.core.sizing.memory import memory_fit, with_kv_cache

if TYPE_CHECKING:
    from deployctl.core.engine_spec.protocol import EngineSpec


def node_devices(inv: Inventory, name: str) -> list[Device]:
    node = inv.node(name)
    if node.devices is not None:
        return sorted(node.devices, key=lambda d: d.id)
    return [Device(id=i) for i in range(inv.devices_per_node)]


def assign_ranks(inv: Inventory, nodes: list[str]) -> list[Rank]:
    """Node by node, device by device (physical id order): rank ids 0..N-1, no interleaving."""
    ranks: list[Rank] = []
    for name in nodes:
        for local, dev in enumerate(node_devices(inv, name)):
            ranks.append(Rank(rank=len(ranks), node=name, device_id=dev.id, local_rank=local,
                              device_ip=dev.ip, sdid=dev.sdid))
    return ranks


def _fits(inv: Inventory, quant: str, deg: Degrees, role: str) -> MemoryFit:
    # the engine says what share of HBM it uses, its communication buffer and how its runtime really
    # splits o_proj and lm_head (a runtime may ignore the local TP keys); a pd-split role's own settings
    # (layout.<role>.engine/model/env) count for its instances
    from deployctl.core.input.roles import for_role

    inv = for_role(inv, role)
    mem = inv.engine_spec.memory(inv, role, deg)
    split = deg.model_copy(update={"o_proj_tp": mem.o_proj_tp, "lm_head_tp": mem.lm_head_tp})
    return memory_fit(with_kv_cache(catalog.served_model(inv), quant, mem), quant, split, hbm_gb=inv.cluster.hbm_gb,
                      fraction=mem.fraction, hccl_buffsize_mb=mem.comm_buffer_mb,
                      max_seq_len=inv.model.max_seq_len, max_prefill_tokens=workspace_tokens(inv, role),
                      notes=mem.notes, fraction_name=mem.fraction_name, kv_token_split=mem.kv_token_split,
                      fraction_of_free=mem.fraction_of_free, starts_with_short_cache=mem.starts_with_short_cache,
                      kv_spread_over_cp=mem.kv_spread_over_cp,
                      redundant_experts=inv.engine_spec.redundant_experts(inv)[0])


def _suggestions(inv: Inventory, failing: list[Instance]) -> str:
    """Concrete ways out: a smaller quantization that fits this layout, or the dp-ep size that fits."""
    info = catalog.served_model(inv)
    own = info.quants[inv.model.quant]
    tips = []
    smaller = [q for q, b in info.quants.items() if b.experts < own.experts]
    ok = [q for q in smaller if all(_fits(inv, q, i.degrees, i.role).fits for i in failing)]
    if ok:
        tips.append(f"use quant {ok[0]} (it fits this layout)")
    per = inv.devices_per_node
    servers = max(len(i.nodes) for i in failing)
    for n in (2, 4, 8, 16, 32, 48, 60):
        if n <= servers or info.routed_experts % (n * per):
            continue
        fit = _fits(inv, inv.model.quant, Degrees(tp=per, dp=n, moe_ep=n * per), "mixed")
        if fit.fits:
            tips.append(f"use {n} servers with preset dp-ep ({fit.kv_budget_gb:.1f} GB of KV cache per die)")
            break
    if not tips:
        tips.append("add servers or use a smaller quantization")
    if all(i.memory.kv_budget_gb > 0 for i in failing):
        tips.append("lower max_seq_len")
    return ", or ".join(tips)


def _refusal(inv: Inventory, failing: list[Instance]) -> LayoutError:
    info = catalog.served_model(inv)
    hw = inv.cluster.hardware.upper()
    problems = []
    for inst in failing:
        f, d = inst.memory, inst.degrees
        need = f.weights_gb + f.workspace_gb
        problems.append(Problem(
            path="layout" if inst.role == "mixed" else f"layout.{inst.role}",
            message=f"{inst.name} instance ({len(inst.nodes)} x {hw}, tp={d.tp} dp={d.dp} pp={d.pp} cp={d.cp} "
            f"moe_tp={d.moe_tp} moe_ep={d.moe_ep}): weights {f.weights_gb:.2f} GB + workspace "
            f"{f.workspace_gb:.2f} GB = {need:.2f} GB per die, {f.usable_gb:.2f} GB usable "
            f"({inv.cluster.hbm_gb} GiB HBM x {f.fraction_name} {f.memory_fraction}): {f.reason}"))
    return LayoutError(f"{info.display} {inv.model.quant} does not fit in memory on this layout",
                       problems=problems, hint=_suggestions(inv, failing))


def plan_without_hints(inv: Inventory, *, checked: bool = True, accept: bool = True) -> Plan:
    """Build the plan for a validated inventory (``checked=False``: without the engine's support matrix, its
    acceptance of the rendered files and the memory fit, for `validate`; ``accept=False``: without that acceptance
    alone, for a caller that has it checked apart: `render` while it writes the files).

    Raises:
        LayoutError: degrees do not add up, or a role's KV budget per die is <= 0 / cannot hold one
            max_seq_len sequence (with the numbers).
    """
    specs = resolve_instances(inv)
    problems = [p for s in specs for p in s.problems]
    if problems:
        raise LayoutError("the layout does not fit these nodes", problems=problems)
    info = catalog.served_model(inv)
    instances = []
    for spec in specs:
        fit = _fits(inv, inv.model.quant, cast(Degrees, spec.degrees), spec.role)   # resolved: no problems
        ranks = assign_ranks(inv, spec.nodes)
        instances.append(Instance(name=spec.name, role=spec.role, nodes=spec.nodes, master=spec.nodes[0],
                                  world_size=len(ranks), degrees=spec.degrees, ranks=ranks, memory=fit))
    preset = effective_preset(inv)
    nodes = []
    for inst in instances:
        for name in inst.nodes:
            node = inv.node(name)
            nodes.append(PlanNode(
                name=name, address=node.address, server_id=node.server_ip, container_ip=node.server_ip,
                instance=inst.name, role=inst.role, is_master=name == inst.master,
                super_pod_id=node.super_pod_id, interface=node.interface, device_ids=[d.id for d in node_devices(inv, name)],
                runs_router=preset == "pd-split" and name == instances[0].master))
    engine_spec = inv.engine_spec
    ver = engine_spec.version(inv)
    info_ = EngineInfo(kind=inv.engine.kind, display=engine_spec.display, version=ver.version,
                       version_source=ver.source)
    plan = Plan(deployctl_version=__version__, preset=preset, hardware=inv.cluster.hardware,
                model_display=info.display, instances=instances, nodes=nodes, engine=info_,
                router=_router(inv), inventory=inv)
    if not checked:
        return plan
    plan = _checked(plan, engine_spec)      # what the engine cannot run at all is said before memory
    if accept:
        accepted(plan, engine_spec)         # then what the engine would refuse in the files rendered from this plan
    failing = [i for i in instances if not i.memory.fits]
    if failing:
        raise _refusal(inv, failing)
    return plan


def _router(inv: Inventory) -> FleetRouter | None:
    from deployctl.core.engine_spec.container import container_name

    name = router_node(inv)
    if name is None:
        return None
    r = inv.router or RouterSettings()
    return FleetRouter(node=name, ip=inv.node(name).server_ip, port=r.port, admin_port=r.admin_port, image=r.image,
                       check_interval_ms=r.check_interval_ms, container=container_name(inv, "router"))


def accepted(plan: Plan, engine_spec: EngineSpec) -> None:
    """The engine's own checks of the files rendered for this plan: a refusal raises (exit 2) with the engine's
    message and the source of the check (a value set in engine.config, or a deployctl bug)."""
    errors = list(dict.fromkeys(f for f in engine_spec.accept(plan) if f.level == "error"))
    if errors:
        raise LayoutError(f"{plan.engine.display} {plan.engine.version} would refuse the files rendered for this "
                          "inventory", problems=[Problem(path=f.path, message=f.message + (
                              f" [source: {f.source}]" if f.source else ""), hint=f.hint) for f in errors],
                          hint=errors[0].hint)


def _checked(plan: Plan, engine_spec: EngineSpec) -> Plan:
    """The engine's support matrix: refusals raise (exit 2, with the source), warnings go into the plan."""
    findings = list(dict.fromkeys(engine_spec.check(plan)))   # a fleet's identical instances say the same once
    errors = [f for f in findings if f.level == "error"]
    if errors:
        raise LayoutError(f"{plan.engine.display} {plan.engine.version or '(unknown version)'} does not run this "
                          "combination", problems=[Problem(path=f.path, message=f.message + (
                              f" [source: {f.source}]" if f.source else ""), hint=f.hint) for f in errors],
                          hint=errors[0].hint)
    with_source = [f.message + (f" [source: {f.source}]" if f.source else "") for f in findings]
    engine = plan.engine.model_copy(update={
        "warnings": [m for f, m in zip(findings, with_source) if f.level == "warning"],
        "notes": [m for f, m in zip(findings, with_source) if f.level == "note"]})
    return plan.model_copy(update={"engine": engine})
