"""Build an operation's context (deployctl/backends/common/context.py): the one place the CLI reads the inventory.

``full``: validated in full, with the facts of --facts or of the latest successful preflight run under
--run-dir (the note says which); ``deployed``: an existing deployment's inventory (device IPs may be left to
preflight: they are in the deployed files already); ``discovery``: preflight's (what it discovers may be
missing). Every other problem is refused (exit 2) as `validate` does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable

from deployctl.backends.common.context import Context, Mode


def open_context(path: Path, mode: Mode = "full", *, facts: Path | None = None, run_root: Path | None = None,
                 note: Callable[[str], None] | None = None, raw=None, scale_root: Path | None = None) -> Context:
    """``raw``: the file already read by the caller (it is read here otherwise): it is read once. The scale state
    is read under ``scale_root`` (default ``run_root``): the deployment as `deployctl scale --apply` left it."""
    from deployctl.core.heap import bulk

    with bulk():
        return _open_context(path, mode, facts=facts, run_root=run_root, note=note, raw=raw, scale_root=scale_root)


def _open_context(path: Path, mode: Mode, *, facts: Path | None, run_root: Path | None,
                  note: Callable[[str], None] | None, raw, scale_root: Path | None) -> Context:
    from deployctl.io.inventory_file import load_inventory

    from deployctl.app.scaled import scaled

    raw = raw if raw is not None else load_inventory(path)          # the one read of the file
    if mode == "discovery":
        from deployctl.app.inventory import validate_for_discovery

        inv, gaps = validate_for_discovery(raw)
        return Context(path, raw, inv, mode, gaps=tuple(gaps))
    # the deployment as scale left it: spares out of the nodes, the instances it added in (app/scaled.py)
    planned_raw, added, spares = scaled(raw, scale_root if scale_root is not None else run_root)
    joined = tuple(a.name for a in added)
    peers = {a.name: tuple(a.peers) for a in added if a.peers}
    if mode != "full":
        from deployctl.app.inventory import validate_for_discovery

        inv, gaps = validate_for_discovery(planned_raw)
        return Context(path, planned_raw, inv, mode, gaps=tuple(gaps), joined=joined, spares=spares, peers=peers)
    facts_note = None
    if run_root is not None:
        from deployctl.io.facts_store import resolve_facts

        # the facts of the hosts as written (spares included: preflight probes them too)
        facts, facts_note = resolve_facts(path, run_root, facts, raw=raw)
        if facts_note and note is not None:
            note(facts_note)
    return Context(path, planned_raw, validated(planned_raw, path, facts), "full", facts, facts_note,
                   joined=joined, spares=spares, peers=peers)


def load_facts(path: Path | None):
    """Read a facts file written by `deployctl preflight` (None when not given)."""
    if path is None:
        return None
    from deployctl.core.errors import UsageError
    from deployctl.core.models.host_facts import FactsFile
    from deployctl.io.localfile import load_model
    from deployctl.io.facts_store import MAX_FACTS_BYTES

    # a regular file (a link the user names is followed), bounded, JSON without NaN, then the typed FactsFile:
    # what does not pass names the file and the key (deployctl/io/localfile.py)
    hint = "pass the facts.json that `deployctl preflight` printed"
    try:
        return load_model(path, FactsFile, MAX_FACTS_BYTES, what="facts file", hint=hint, follow=True)
    except FileNotFoundError:
        raise UsageError(f"cannot read facts file {path}: it does not exist", hint=hint) from None


def validated(raw, path: Path, facts_path: Path | None = None):
    """The inventory read from ``path``, validated in full with the facts of ``facts_path``."""
    from deployctl.core.errors import InventoryError
    from deployctl.app.inventory import validate_inventory
    from deployctl.io.facts_store import inventory_identity

    facts = load_facts(facts_path)
    try:
        inv = validate_inventory(raw, facts=facts)
    except InventoryError:
        identity = inventory_identity(raw) if facts is not None else None
        if identity is not None:      # facts of other hosts explain the problems better than the problems
            check_facts_match(*identity[:2], facts, facts_path, path)
        raise
    if facts is not None:
        check_facts_match(inv.cluster.name, {n.name: n.address for n in inv.nodes}, facts, facts_path, path)
    return inv


def check_facts_match(cluster: str, nodes: dict[str, str], facts, facts_path: Path, inventory: Path) -> None:
    """The facts must come from this inventory's cluster and hosts (same addresses for the same names)."""
    from deployctl.core.errors import UsageError

    again = f"run `deployctl preflight -i {inventory}` and pass the facts file it saves"
    if facts.cluster != cluster:
        raise UsageError(f"{facts_path} holds facts of cluster '{facts.cluster}', not '{cluster}'", hint=again)
    moved = [f"{name} ({facts.hosts[name].address} in the facts, {address} in the inventory)"
             for name, address in nodes.items() if name in facts.hosts and facts.hosts[name].address != address]
    if moved:
        raise UsageError(f"{facts_path} was collected from other hosts: {', '.join(moved)}", hint=again)
