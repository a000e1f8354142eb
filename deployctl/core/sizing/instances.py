"""Which servers form which instance: one world per role, N mixed replicas, or x prefill and y decode
instances (xPyD). Each instance is its own HCCL world (rank table, ports, engine ids).

Naming: a role with one instance keeps the role's name (``mixed``, ``prefill``, ``decode``: what every
earlier deployment used); a role with several numbers them from 0 (``mixed-0``, ``prefill-1``); a group listed
with a ``name`` keeps it (``deployctl scale`` adds instances that way, so the others keep their names).
Nodes are split in order: ``replicas: 4`` over 8 nodes gives [n1 n2] [n3 n4] [n5 n6] [n7 n8]; the spare servers
of ``deploy.scaling.spares`` are in no instance.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import difflib
from dataclasses import dataclass

from deployctl.core.errors import Problem

if TYPE_CHECKING:
    from deployctl.core.models.inventory import Inventory, Layout, RoleLayout
    from deployctl.core.input.raw import RawInventory


@dataclass(frozen=True)
class Group:
    name: str
    role: str            # mixed | prefill | decode
    nodes: tuple[str, ...]
    key: tuple           # the inventory key that made it (for messages)


def is_split(lay: Layout) -> bool:
    return lay.preset == "pd-split" or lay.prefill is not None or lay.decode is not None


Part = tuple[list[str], tuple, "str | None"]     # an instance's nodes, its inventory key, its explicit name


def _named(role: str, parts: list[Part]) -> list[Group]:
    if len(parts) == 1:
        return [Group(parts[0][2] or role, role, tuple(parts[0][0]), parts[0][1])]
    return [Group(name or f"{role}-{i}", role, tuple(nodes), key) for i, (nodes, key, name) in enumerate(parts)]


def _split(nodes: list[str], count: int, key: tuple) -> list[Part]:
    size = len(nodes) // count if count and len(nodes) % count == 0 else len(nodes)
    if size == len(nodes):
        return [(nodes, key, None)]
    return [(nodes[i:i + size], key, None) for i in range(0, len(nodes), size)]


def _role_parts(rl: RoleLayout, key: tuple) -> list[Part]:
    if isinstance(rl.instances, list):
        return [(list(g.nodes), key + ("instances", i), g.name) for i, g in enumerate(rl.instances)]
    return _split(list(rl.nodes or ()), rl.instances or 1, key + ("nodes",))


def serving_nodes(inv: Inventory) -> list[str]:
    """The inventory's nodes in order, without the spare servers (deploy.scaling.spares)."""
    spares = set(inv.deploy.scaling.spares)
    return [n.name for n in inv.nodes if n.name not in spares]


def groups(inv: Inventory) -> list[Group]:
    """The instances' server groups, in plan order (prefill before decode). Assumes a valid inventory."""
    return layout_groups(inv.layout, serving_nodes(inv))


def layout_groups(lay: Layout, nodes: list[str]) -> list[Group]:
    """``groups`` of a layout over ``nodes`` (the serving nodes, in inventory order)."""
    if is_split(lay):
        out = []
        for role in ("prefill", "decode"):
            rl = getattr(lay, role)
            out += _named(role, _role_parts(rl, ("layout", role)) if rl else [([], ("layout", role), None)])
        return out
    if lay.instances:
        return _named("mixed", [(list(g.nodes), ("layout", "instances", i), g.name)
                                for i, g in enumerate(lay.instances)])
    return _named("mixed", _split(nodes, lay.replicas or 1, ("layout",)))


def role_nodes(inv: Inventory, role: str) -> list[str]:
    """Every node of a pd-split role, over all its instances."""
    return [n for g in groups(inv) if g.role == role for n in g.nodes]


def fleet(inv: Inventory) -> bool:
    """Several mixed instances: they serve behind deployctl's router."""
    return sum(1 for g in groups(inv) if g.role == "mixed") > 1


def router_node(inv: Inventory) -> str | None:
    """The node running the mixed fleet's router (router.node, else the first instance's master)."""
    if not fleet(inv):
        return None
    return (inv.router.node if inv.router and inv.router.node else None) or groups(inv)[0].nodes[0]


def _unknown(raw: RawInventory, path: tuple, name: str, names: list[str]) -> Problem:
    close = difflib.get_close_matches(name, names, n=1)
    return raw.problem(path, f"node '{name}' is not in nodes",
                       f"did you mean '{close[0]}'?" if close else f"known nodes: {', '.join(dict.fromkeys(names))}")


def _count_problems(raw: RawInventory, key: tuple, count: int, nodes: int, what: str) -> list[Problem]:
    if count > nodes:
        return [raw.problem(key, f"{count} {what} instances need at least {count} nodes; there are {nodes}",
                            f"use at most {nodes} instances, or add nodes")]
    if nodes % count:
        sizes = [d for d in range(1, nodes + 1) if nodes % d == 0 and d > 1]
        return [raw.problem(key, f"{nodes} nodes do not split into {count} equal {what} instances",
                            f"use a count that divides {nodes} (e.g. {', '.join(map(str, sizes[:4]))}), "
                            "or list each instance's nodes under instances: [{nodes: [...]}, ...]")]
    return []


def group_problems(inv: Inventory, raw: RawInventory) -> list[Problem]:
    """Static checks of how nodes are grouped into instances (validate): every key and node named."""
    lay = inv.layout
    names = serving_nodes(inv)
    out: list[Problem] = spare_problems(inv, raw)
    if is_split(lay):
        for key in ("replicas", "instances"):
            if getattr(lay, key) is not None:
                out.append(raw.problem(("layout", key), f"layout.{key} is for mixed layouts; pd-split sets "
                                       "instances per role", "use layout.prefill.instances / "
                                       "layout.decode.instances (a count, or [{nodes: [...]}, ...])"))
        for role in ("prefill", "decode"):
            rl = getattr(lay, role)
            if rl is None:
                continue
            where: tuple[str, ...] = ("layout", role)
            if isinstance(rl.instances, list):
                if not rl.instances:
                    out.append(raw.problem(where + ("instances",), f"layout.{role}.instances lists no instance",
                                           "give a count, or [{nodes: [...]}, ...]"))
                if rl.nodes is not None:
                    out.append(raw.problem(where + ("nodes",), f"layout.{role} names its nodes twice (nodes and "
                                           "instances)", "keep one: instances: [{nodes: [...]}, ...] or "
                                           "nodes + instances: <count>"))
            elif rl.nodes is None:
                out.append(raw.problem(where, f"layout.{role} has no nodes", f"add {role}: {{nodes: [...]}}"))
            elif isinstance(rl.instances, int):
                if rl.instances < 1:
                    out.append(raw.problem(where + ("instances",), f"layout.{role}.instances must be 1 or more",
                                           "give the number of instances"))
                else:
                    out += _count_problems(raw, where + ("instances",), rl.instances, len(rl.nodes), role)
        if inv.router is not None:
            out.append(raw.problem(("router",), "router is for several mixed instances; pd-split is routed by "
                                   "the engine's own router (its P/D coordinator or proxy)",
                                   "remove the router block"))
        return out or _name_problems(inv, raw)
    if lay.replicas is not None and lay.instances is not None:
        out.append(raw.problem(("layout", "replicas"), "layout.replicas and layout.instances both say how "
                               "nodes form instances", "keep one of them"))
        return out
    if lay.replicas is not None:
        out += _count_problems(raw, ("layout", "replicas"), lay.replicas, len(names), "mixed")
    if lay.instances is not None:
        seen: dict[str, int] = {}
        for i, g in enumerate(lay.instances):
            for j, name in enumerate(g.nodes):
                path = ("layout", "instances", i, "nodes", j)
                if name not in names:
                    out.append(_unknown(raw, path, name, names))
                elif name in seen:
                    out.append(raw.problem(path, f"node '{name}' is already in instance {seen[name]}",
                                           "every node belongs to one instance"))
                seen.setdefault(name, i)
        unused = [n for n in names if n not in seen]
        if unused and not out:
            out.append(raw.problem(("layout", "instances"), f"nodes in no instance: {', '.join(unused)}",
                                   "add them to an instance, or remove them from nodes"))
    if out:
        return out
    out += _name_problems(inv, raw)
    if inv.router is not None:
        if not fleet(inv):
            out.append(raw.problem(("router",), "router needs several mixed instances (layout.replicas or "
                                   "layout.instances); one instance is its own endpoint", "remove the router "
                                   "block, or set layout.replicas"))
        elif inv.router.node is not None and inv.router.node not in names:
            out.append(_unknown(raw, ("router", "node"), inv.router.node, names))
        out += _router_problems(inv, raw)
    return out


def spare_problems(inv: Inventory, raw: RawInventory) -> list[Problem]:
    """deploy.scaling.spares: each a node of the inventory, named once, in no instance of the layout."""
    known = [n.name for n in inv.nodes]
    lay = inv.layout
    listed = {n for rl in (lay.prefill, lay.decode) if rl is not None for n in (rl.nodes or ())}
    listed |= {n for rl in (lay.prefill, lay.decode) if rl is not None and isinstance(rl.instances, list)
               for g in rl.instances for n in g.nodes}
    listed |= {n for g in lay.instances or () for n in g.nodes}
    return spare_list_problems(raw, list(inv.deploy.scaling.spares), known, listed)


def spare_list_problems(raw: RawInventory, spares: list[str], known: list[str], listed: set[str]) -> list[Problem]:
    """The problems of the spares list: a name not in ``known`` (the nodes), named twice, or in ``listed`` (a node
    of an instance); file, line and key of each."""
    out: list[Problem] = []
    seen: set[str] = set()
    for i, name in enumerate(spares):
        path = ("deploy", "scaling", "spares", i)
        if name not in known:
            out.append(_unknown(raw, path, name, known))
        elif name in seen:
            out.append(raw.problem(path, f"spare '{name}' is listed twice", "name each spare server once"))
        elif name in listed:
            out.append(raw.problem(path, f"spare '{name}' is in an instance of the layout",
                                   "a spare server is in no instance: remove it from the layout or from spares"))
        seen.add(name)
    return out


def _name_problems(inv: Inventory, raw: RawInventory) -> list[Problem]:
    """Two instances with one name (a group's explicit ``name`` equal to another's)."""
    out, seen = [], set()
    for g in groups(inv):
        if g.name in seen:
            out.append(raw.problem(g.key, f"two instances are named '{g.name}'",
                                   "give every instance its own name (layout ... instances[].name)"))
        seen.add(g.name)
    return out


def _router_problems(inv: Inventory, raw: RawInventory) -> list[Problem]:
    from deployctl.core.input.hostile import check_image

    r = inv.router
    assert r is not None   # called only with a router block
    out = check_image(raw, r.image, ("router", "image"))
    if r.port == r.admin_port:
        out.append(raw.problem(("router", "admin_port"), "router.port and router.admin_port are the same",
                               "give the runtime API its own port"))
    taken = {v: k for k, v in inv.engine_spec.host_ports(inv).items()}
    for key in ("port", "admin_port"):
        value = getattr(r, key)
        if value in taken:
            out.append(raw.problem(("router", key), f"router.{key} {value} is the engine's {taken[value]} port "
                                   "(host network: one process per port)", "pick a free port, e.g. 8080/8081"))
    return out
