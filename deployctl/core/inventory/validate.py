"""Static validation: plain data -> Inventory, collecting every problem (no network)."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from deployctl.core.errors import InventoryError, Problem
from deployctl.core.inventory.apply_facts import apply_facts
from deployctl.core.inventory.engine_checks import check_engine, check_kubernetes, check_model, describe_checkpoint
from deployctl.core.input.gaps import NeedsFacts, discovery_hint, interface_gaps
from deployctl.core.input.hostile import check_ssh, hostile_problems
from deployctl.core.inventory.layout_checks import check_layout
from deployctl.core.input.local_files import LocalFiles
from deployctl.core.input.raw import RawInventory
from deployctl.core.models.engine_settings import DEFAULT_KIND
from deployctl.core.inventory.node_checks import check_devices, check_nodes, check_sku, check_super_pod, resolve_devices
from deployctl.core.inventory.paths import cluster_dir_problems
from deployctl.core.inventory.structure import repaired, structure_problems

CHECKS = (check_nodes, check_ssh, check_sku, check_super_pod, check_devices, check_model, check_engine, check_kubernetes,
          check_layout)


def validate_inventory(raw: RawInventory, engine: Any, charts: Callable[[], tuple], local: LocalFiles,
                       facts: Any = None) -> Any:
    """Validate the whole inventory and return it with device IPs filled in from the hccn_conf copies in ``local``
    and, when ``facts`` (a preflight FactsFile) is given, from the live hosts. ``engine``: the EngineSpec of
    engine.kind the composition root resolved (None when the kind is unknown: the model refuses it, with its line),
    ``charts``: () -> every engine's Chart (made when needed); both ride on the inventory returned
    (``inv.engine_spec``, ``inv.charts``).

    Raises:
        InventoryError: with every problem found, each naming file, line and key path.
    """
    inv, problems = inventory_problems(raw, engine, charts, local, facts)
    if problems:
        raise InventoryError(count_problems(raw.file, problems), problems=problems)
    return inv


def validate_for_discovery(raw: RawInventory, engine: Any, charts: Callable[[], tuple], local: LocalFiles,
                           facts: Any = None) -> tuple:
    """Validation for `preflight`: what only the hosts can tell (device IPs, A3 SDIDs and super pod ids
    the inventory leaves out: ``NeedsFacts``) is returned as notes instead of refused.

    Returns:
        (inventory, the NeedsFacts notes), the inventory filled from ``facts`` when given.
    Raises:
        InventoryError: every other problem, as ``validate_inventory`` reports it.
    """
    inv, problems = inventory_problems(raw, engine, charts, local, facts)
    refused = [p for p in problems if not isinstance(p, NeedsFacts)]
    if refused:
        raise InventoryError(count_problems(raw.file, refused), problems=refused)
    return inv, [p for p in problems if isinstance(p, NeedsFacts)]


def engine_kind(raw: RawInventory) -> str:
    """engine.kind as written (the default kind when left out): what the composition root resolves."""
    block = raw.data.get("engine") if isinstance(raw.data, dict) else None
    kind = block.get("kind", DEFAULT_KIND) if isinstance(block, dict) else DEFAULT_KIND
    return kind if isinstance(kind, str) else ""


def inventory_problems(raw: RawInventory, engine: Any, charts: Callable[[], tuple], local: LocalFiles,
                       facts: Any = None) -> tuple:
    """(inventory, every value problem, NeedsFacts included), sorted; structure problems raise InventoryError."""
    from pydantic import ValidationError

    from deployctl.core.models.inventory import Inventory

    # refused before anything else: no later message, file or command line may carry these values
    hostile = hostile_problems(raw)
    try:
        inv = Inventory.model_validate(raw.data)
    except ValidationError as exc:
        bad = {p.path for p in hostile}
        structure = [p for p in structure_problems(raw, exc)
                     if not any(p.path == b or p.path.startswith((b + ".", b + "[")) for b in bad)]
        problems = hostile + structure
        rest = None if hostile else repaired(raw, exc)
        if rest is not None:      # an unknown key hides no other problem: the rest is checked in the same round
            try:
                model = Inventory.model_validate(rest)
                # a renamed engine block may name another engine than the one resolved from the text as written:
                # its checks wait for the next round (the renamed key is reported either way)
                same = model.engine.kind == engine.kind
                _, behind = _value_problems(model, raw, engine, charts, local, facts) if same else (None, [])
            except ValidationError:
                behind = []
            problems += [p for p in behind if not isinstance(p, NeedsFacts)]
        problems = sorted(dict.fromkeys(problems), key=Problem.sort_key)
        raise InventoryError(count_problems(raw.file, problems), problems=problems) from None
    if hostile:
        problems = sorted(hostile, key=Problem.sort_key)
        raise InventoryError(count_problems(raw.file, problems), problems=problems)
    return _value_problems(inv, raw, engine, charts, local, facts)


def _value_problems(inv: Any, raw: RawInventory, engine: Any, charts: Callable[[], tuple], local: LocalFiles,
                    facts: Any) -> tuple:
    """(inventory, every value and cross-field problem, NeedsFacts included), sorted, of a model that was made."""
    from deployctl.core.sizing.layout import layout_problems

    inv = inv.with_engine(engine, charts)
    inv, problems = resolve_devices(inv, raw, local)
    if facts is not None:
        inv = apply_facts(inv, facts)
    inv, unread = describe_checkpoint(inv, raw, local)
    problems += unread
    bad_hccn = {n.name for i, n in enumerate(inv.nodes)
                if any(p.path == f"nodes[{i}].hccn_conf" for p in problems)}
    for check in CHECKS:
        problems += check(inv, raw)
    problems += cluster_dir_problems(inv, raw, local.home)
    if not any(p.path.startswith("layout") for p in problems):
        problems += layout_problems(inv, raw, skip_ips=bad_hccn)
        problems += interface_gaps(inv, raw, inv.engine_spec.needs_interfaces(inv))
    if facts is not None:   # the facts were there and still left the gap: "run preflight" would not help
        problems = [dataclasses.replace(p, hint=discovery_hint(raw.file, p.what, facts_given=True))
                    if isinstance(p, NeedsFacts) else p for p in problems]
    return inv, sorted(dict.fromkeys(problems), key=Problem.sort_key)


def count_problems(file: str, problems: list) -> str:
    n = len(problems)
    return f"{file}: {n} problem{'s' if n != 1 else ''}"
