"""The inventory as `deployctl scale --apply` left it (core/scaling/effective.py): the composition root's one place
that turns the file as written and the scale state under the run directory into the inventory every deploying
command plans.
"""

from __future__ import annotations

from pathlib import Path

from deployctl.core.input.raw import RawInventory


def base_groups(raw: RawInventory) -> dict[str, list[tuple[str, tuple[str, ...]]]] | None:
    """Each role's own instances (name, nodes) of the inventory as written, spares left out; None when its layout or
    nodes do not parse (validation then says what is wrong)."""
    from pydantic import ValidationError

    from deployctl.core.models.inventory import Layout
    from deployctl.core.scaling.effective import spares_of
    from deployctl.core.sizing.instances import layout_groups

    data = raw.data if isinstance(raw.data, dict) else {}
    nodes = data.get("nodes")
    try:
        layout = Layout.model_validate(data.get("layout") or {})
    except ValidationError:
        return None
    spares = set(spares_of(data))
    names = [n["name"] for n in nodes if isinstance(n, dict) and isinstance(n.get("name"), str)
             and n["name"] not in spares] if isinstance(nodes, list) else []
    out: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    for g in layout_groups(layout, names):
        out.setdefault(g.role, []).append((g.name, g.nodes))
    return out


def spare_problems(raw: RawInventory, base: dict[str, list[tuple[str, tuple[str, ...]]]]) -> list:
    """deploy.scaling.spares of the file as written (the inventory every command validates has them taken out):
    each a node of the inventory, named once, in no instance of the layout; file, line and key of each."""
    from deployctl.core.scaling.effective import spares_of
    from deployctl.core.sizing.instances import spare_list_problems

    nodes = raw.data.get("nodes") if isinstance(raw.data, dict) else None
    known = [n["name"] for n in nodes if isinstance(n, dict) and isinstance(n.get("name"), str)] \
        if isinstance(nodes, list) else []
    used = {n for groups in base.values() for _, members in groups for n in members}
    return spare_list_problems(raw, spares_of(raw.data), known, used)


def scaled(raw: RawInventory, run_root: Path | None) -> tuple[RawInventory, tuple, tuple[str, ...]]:
    """(the inventory to plan, the instances scale added (AddedInstance): they join the router through its API,
    the spares no added instance uses). Spares are always left out of the nodes; the added instances come from
    <run_root>/scale/<cluster>.json.

    Raises:
        UsageError: the state file is not deployctl's, or names an instance on servers that are no spares of
            the inventory (it changed since): the hint says how to go on.
    """
    from deployctl.core.scaling.effective import effective_raw, spares_of

    state = None
    if run_root is not None:
        cluster = raw.data.get("cluster", {}).get("name") if isinstance(raw.data, dict) and \
            isinstance(raw.data.get("cluster"), dict) else None
        if isinstance(cluster, str):
            from deployctl.io.scale_store import read_state, state_path

            state = read_state(run_root, cluster)
            if state is not None:
                spares = set(spares_of(raw.data))
                stale = [f"{a.name} on {', '.join(n for n in a.nodes if n not in spares)}"
                         for a in state.added if not set(a.nodes) <= spares]
                if stale:
                    from deployctl.core.errors import UsageError

                    raise UsageError(
                        f"{state_path(run_root, cluster)}: scale added {'; '.join(stale)}, which the inventory "
                        "no longer lists under deploy.scaling.spares",
                        hint="put those servers back under deploy.scaling.spares and remove the instance with "
                             "`deployctl scale --apply` (or `down`), then change the inventory")
    added = list(state.added) if state is not None else []
    if not added and not spares_of(raw.data):
        return raw, (), ()
    base = base_groups(raw)
    if base is None:
        return raw, (), ()
    problems = spare_problems(raw, base)
    if problems:
        from deployctl.core.errors import InventoryError
        from deployctl.core.inventory.validate import count_problems

        raise InventoryError(count_problems(raw.file, problems), problems=problems)
    used = {n for a in added for n in a.nodes}
    free = tuple(s for s in dict.fromkeys(spares_of(raw.data)) if s not in used)
    return effective_raw(raw, added, base), tuple(added), free
