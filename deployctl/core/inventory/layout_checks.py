"""Checks of the layout block: pd-split roles and their nodes, instance groups."""

from __future__ import annotations

from typing import TYPE_CHECKING

import difflib

from deployctl.core.errors import Problem
from deployctl.core.input.raw import RawInventory

if TYPE_CHECKING:
    from deployctl.core.models.inventory import Inventory


LAYOUT_DEGREES = ("tp", "dp", "pp", "cp", "moe_tp", "moe_ep")


def check_layout(inv: Inventory, raw: RawInventory) -> list[Problem]:
    from deployctl.core.sizing.instances import group_problems

    lay = inv.layout
    out = []
    names = [n.name for n in inv.nodes]
    known = set(names)
    split = lay.preset == "pd-split" or lay.prefill is not None or lay.decode is not None
    if split:
        if lay.preset not in (None, "pd-split"):
            out.append(raw.problem(("layout", "preset"), f"prefill/decode roles need preset pd-split, not "
                                   f"'{lay.preset}'", "set layout.preset: pd-split or remove prefill/decode"))
        for role in ("prefill", "decode"):
            if getattr(lay, role) is None:
                out.append(raw.problem(("layout",), f"pd-split needs layout.{role} with its nodes",
                                       f"add {role}: {{nodes: [...]}}"))
        for deg in LAYOUT_DEGREES + ("o_proj_tp", "lm_head_tp"):
            if getattr(lay, deg) is not None:
                out.append(raw.problem(("layout", deg), f"layout.{deg} is ignored by pd-split",
                                       f"set it per role: layout.prefill.{deg} / layout.decode.{deg}"))
        out += group_problems(inv, raw)
        owner: dict[str, str] = {}
        for role in ("prefill", "decode"):
            rl = getattr(lay, role)
            listed: list[tuple[tuple, str]] = [] if rl is None else [(("layout", role, "nodes", j), n) for j, n in enumerate(rl.nodes or ())]
            if rl is not None and isinstance(rl.instances, list):
                listed = [(("layout", role, "instances", i, "nodes", j), n)
                          for i, g in enumerate(rl.instances) for j, n in enumerate(g.nodes)]
            for path, name in listed:
                if name not in known:
                    close = difflib.get_close_matches(name, names, n=1)
                    out.append(raw.problem(path, f"node '{name}' is not in nodes",
                                           f"did you mean '{close[0]}'?" if close else
                                           f"known nodes: {', '.join(dict.fromkeys(names))}"))
                elif name in owner:
                    out.append(raw.problem(path, f"node '{name}' is already in {owner[name]}",
                                           "prefill and decode instances need separate nodes"))
                owner.setdefault(name, f"layout.{role}.nodes")
        spares = set(inv.deploy.scaling.spares)
        unused = [n for n in names if n not in owner and n not in spares]
        if unused and not out:
            out.append(raw.problem(("nodes",), f"nodes in no role: {', '.join(unused)}",
                                   "add them to layout.prefill.nodes or layout.decode.nodes, or remove them"))
    else:
        out += group_problems(inv, raw)
    return out
