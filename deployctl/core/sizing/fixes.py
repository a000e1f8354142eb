"""Hints that work: the smallest change to a refused inventory that the planner and the engine accept.

A refusal's hint used to name a layout without trying it ("use layout dp-ep on these 2 servers", which then did
not fit in memory). Here every suggestion is itself planned (degrees, the engine's support matrix and layout
rules, its acceptance of the rendered files, the memory fit) before it is printed, in this order of size:

1. another layout on the same servers, same quantization;
2. another quantization on the same servers (the catalog's, smaller weights first), with a layout that fits;
3. more servers of the same kind (the fewest that fit), with a layout that fits.

The second and third are both named when the first finds nothing: "use 4 x A2 (dp-ep: ...), or quant w8a8 on
these 2 (dp-ep: ...)".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deployctl.core.errors import LayoutError
    from deployctl.core.models.inventory import Inventory
    from deployctl.core.models.plan import Plan

MAX_SERVERS = 64          # the most servers a "more servers" hint considers


def _first_accepted(inv: Inventory) -> Plan | None:
    """(plan, layout) of the first layout the planner and the engine accept on the inventory's servers."""
    from deployctl.core.sizing.recommend import _plan, layouts

    for layout in layouts(inv):
        plan, _ = _plan(inv, layout)
        if plan is not None:
            return plan
    return None


def _with_servers(inv: Inventory, count: int) -> Inventory:
    """The inventory with ``count`` servers: its own, then copies of the last one (device IPs left to
    preflight, addresses from TEST-NET-2): what adding servers of the same kind would plan to."""
    nodes = list(inv.nodes[:count])
    last = inv.nodes[-1]
    for k in range(len(nodes), count):
        devices = ([d.model_copy(update={"ip": None, "sdid": None}) for d in last.devices] if last.devices
                   else last.devices)
        nodes.append(last.model_copy(update={"name": f"added-{k + 1}", "address": f"198.51.100.{k + 1}",
                                             "container_ip": None, "devices": devices, "hccn_conf": None,
                                             "k8s_node": None}))
    return inv.model_copy(update={"nodes": nodes})


def _describe(plan: Plan) -> str:
    from deployctl.core.sizing.recommend import _shape

    return _shape(plan)


def verified_fix(inv: Inventory) -> str | None:
    """The hint for a refused inventory, every suggestion planned and accepted; None when nothing up to
    MAX_SERVERS servers or any shipped quantization fits."""
    found = suggestions(inv)
    return ", or ".join(text for text, _ in found) if found else None


def suggestions(inv: Inventory) -> list[tuple[str, Inventory]]:
    """[(hint text, the changed inventory the planner and the engine accepted)], smallest change first."""
    from deployctl.core import catalog

    hw = inv.cluster.hardware.upper()
    servers = len(inv.nodes)
    if inv.layout.replicas and inv.layout.replicas > 1:
        return []                         # a fleet's replicas: recommend handles one replica's layouts
    budget = _decode_budget(inv)
    if budget is not None:
        return [budget]
    same = _first_accepted(inv)
    if same is not None:
        return [(f"use layout {_describe(same)} on these {servers} server{'s' if servers > 1 else ''}",
                 same.inventory)]
    tips = []
    for count in sorted({c for c in (servers + 1, 2 * servers, 3 * servers, 4 * servers, 6 * servers, 8 * servers)
                         if servers < c <= MAX_SERVERS}):
        plan = _first_accepted(_with_servers(inv, count))
        if plan is not None:
            tips.append((f"use {count} x {hw} ({_describe(plan)})", plan.inventory))
            break
    info = catalog.model_of(inv)
    if info is not None:
        own = info.quants.get(inv.model.quant)
        others = sorted((q for q in info.quants if q != inv.model.quant),
                        key=lambda q: info.quants[q].experts + info.quants[q].dense)
        for q in others:
            if own is not None and info.quants[q].experts + info.quants[q].dense >= own.experts + own.dense:
                continue                  # a quantization that is not smaller cannot be the way out
            plan = _first_accepted(inv.model_copy(update={"model": inv.model.model_copy(update={"quant": q})}))
            if plan is not None:
                where = f"on these {servers}" if servers > 1 else "on this server"
                tips.append((f"quant {q} {where} ({_describe(plan)})", plan.inventory))
                break
    return tips


def _decode_budget(inv: Inventory) -> tuple[str, Inventory] | None:
    """A pd-split decode role of an engine that prefills whole prompts (MindIE), memory-sized for a prompt batch
    it never runs: the same layout with layout.decode.model.prefill_budget_tokens at its decode step
    (max_batch_size x (1 + speculative tokens)), when that plans (sizing/limits.py workspace_tokens says why)."""
    from deployctl.core.input.roles import for_role, role_block
    from deployctl.core.models.inventory import RoleModel
    from deployctl.core.sizing.limits import workspace_tokens
    from deployctl.core.sizing.recommend import _plan

    block = role_block(inv, "decode")
    if block is None or inv.engine_spec.chunked_prefill(inv):
        return None
    m = for_role(inv, "decode").model
    step = m.max_batch_size * (1 + (m.speculative.tokens if m.speculative is not None else 0))
    if workspace_tokens(inv, "decode") <= 4 * step:
        return None
    model = (block.model or RoleModel()).model_copy(update={"prefill_budget_tokens": step})
    layout = inv.layout.model_copy(update={"decode": block.model_copy(update={"model": model})})
    plan, _ = _plan(inv, layout.model_dump(exclude_none=True))
    if plan is None:
        return None
    return (f"size the decode role for the decode steps it runs, not a {workspace_tokens(inv, 'decode'):,}-token "
            f"prefill: layout.decode.model.prefill_budget_tokens: {step} (its max_batch_size x (1 + speculative "
            "tokens))", plan.inventory)


def with_verified_hint(exc: LayoutError, inv: Inventory) -> LayoutError:
    """The refusal with its hints replaced by one that works (or its own hints when nothing fits)."""
    import dataclasses

    if exc.problems and all("engine" in p.path.split(".") for p in exc.problems):
        return exc          # an engine setting refused: its own hint says what to set; another layout would not help
    fix = verified_fix(inv)
    if fix is None:
        return exc
    exc.hint = fix
    exc.problems = [dataclasses.replace(p, hint=fix) if p.hint and ("layout" in p.hint or "servers" in p.hint)
                    else p for p in exc.problems]
    return exc
