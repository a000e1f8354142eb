"""The deployment `deployctl scale --apply` made of an inventory: the inventory as written, its spare servers left
out, the instances scale added (on spares) put into the layout (pure: the parsed YAML in, the parsed YAML out).

Every command that plans or deploys (plan, render, up, status, watch, scale) sees this inventory, so an instance
scale added is deployed, watched and drained like the others. The added instances are listed in the layout as
explicit groups with their names, after the role's own instances with theirs: no instance is renamed (a
renamed instance would restart). The spare servers an added instance does not use are no node of it (the plan has
no place for a server in no instance); preflight probes them from the file as written.
"""

from __future__ import annotations

from copy import deepcopy
from typing import Any, Iterable

from deployctl.core.input.raw import KeyPath, RawInventory
from deployctl.core.models.scaling import AddedInstance

ROLES = ("mixed", "prefill", "decode")


def spares_of(data: Any) -> list[str]:
    """deploy.scaling.spares of the parsed YAML (only strings; validation says what else is wrong)."""
    try:
        found = data["deploy"]["scaling"]["spares"]
    except (KeyError, TypeError):
        return []
    return [s for s in found if isinstance(s, str)] if isinstance(found, list) else []


def next_name(role: str, taken: Iterable[str]) -> str:
    """The name of one more instance of ``role``: the role's name and the lowest index no instance has."""
    used = set(taken)
    k = 1
    while f"{role}-{k}" in used:
        k += 1
    return f"{role}-{k}"


def _remap_lines(lines: dict[KeyPath, int], keep: list[int]) -> dict[KeyPath, int]:
    """The lines of the kept ``nodes`` entries under their new index; the dropped ones' are gone."""
    new_index = {old: new for new, old in enumerate(keep)}
    out = {}
    for path, line in lines.items():
        if len(path) >= 2 and path[0] == "nodes" and isinstance(path[1], int):
            if path[1] not in new_index:
                continue
            path = ("nodes", new_index[path[1]]) + path[2:]
        out[path] = line
    return out


def effective_raw(raw: RawInventory, added: list[AddedInstance], base: dict[str, list[tuple[str, tuple[str, ...]]]]
                  ) -> RawInventory:
    """``raw`` with its spares out of ``nodes`` and ``added`` in the layout. ``base``: each role's own instances
    (name, nodes), as the inventory without the added ones forms them (instances.layout_groups). Unchanged
    (the same object) when there is no spare and nothing added."""
    spares = set(spares_of(raw.data))
    if not spares and not added:
        return raw
    data = deepcopy(raw.data)
    used = {n for a in added for n in a.nodes}
    nodes = data.get("nodes") if isinstance(data, dict) else None
    lines = dict(raw.lines)
    if isinstance(nodes, list):
        keep = [i for i, n in enumerate(nodes)
                if not (isinstance(n, dict) and n.get("name") in spares and n.get("name") not in used)]
        data["nodes"] = [nodes[i] for i in keep]
        lines = _remap_lines(lines, keep)
    if spares:
        data["deploy"]["scaling"]["spares"] = []
    layout = data.setdefault("layout", {})
    for role in ROLES:
        mine = [a for a in added if a.role == role]
        if not mine:
            continue
        groups = [{"name": name, "nodes": list(group)} for name, group in base.get(role, [])]
        groups += [{"name": a.name, "nodes": list(a.nodes)} for a in mine]
        if role == "mixed":
            layout.pop("replicas", None)
            layout["instances"] = groups
        else:
            block = layout.setdefault(role, {})
            block.pop("nodes", None)
            block["instances"] = groups
    return RawInventory(data, raw.file, raw.base_dir, lines)
