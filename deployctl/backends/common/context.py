"""One operation's inputs, read and resolved once.

The inventory file is read once (with the line of every key, for messages that point into it), validated
once (in full, or as an existing deployment's or preflight's inventory that may leave discovered facts out),
and planned at most once, on first use. The facts it used and where they came from, the engine spec and
the SSH targets come with it. The composition root builds it (app/context.py) and hands it down; no stage reads the file
again. Immutable: a stage that wants another inventory builds another context.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Literal

Mode = Literal["full", "deployed", "discovery"]


@dataclass(frozen=True)
class Context:
    path: Path                         # the inventory file (-i)
    raw: Any                           # its RawInventory: the parsed YAML and the line of every key path
    inventory: Any                     # the validated Inventory
    mode: Mode = "full"                # full; deployed (device IPs are in the deployed files); discovery (preflight)
    facts: Path | None = None          # the preflight facts file used (--facts, or the latest preflight run's)
    facts_note: str | None = None      # where those facts came from, as printed
    gaps: tuple = ()                   # what preflight still has to discover (NeedsFacts), deployed/discovery
    joined: tuple[str, ...] = ()       # instances `deployctl scale` added: they join the router through its API
    spares: tuple[str, ...] = ()       # deploy.scaling.spares no added instance uses (not in the inventory's nodes)
    peers: Any = None                  # added instance -> the running instances it loads its weights from

    @property
    def inventory_dir(self) -> Path:
        return self.path.parent

    @cached_property
    def plan(self):
        """The plan, made on first use and kept; a refusal points into the inventory file (located)."""
        return self.make_plan()

    def make_plan(self, *, accept: bool = True):
        """A new plan (``accept=False``: without the engine's acceptance of its files, which the caller checks
        apart); a refusal points into the inventory file (located)."""
        from deployctl.core.errors import LayoutError
        from deployctl.core.heap import bulk
        from deployctl.core.sizing.planner import plan_layout

        try:
            with bulk():
                plan = plan_layout(self.inventory, accept=accept)
        except LayoutError as exc:
            raise self.located(exc) from None
        if not self.joined:
            return plan
        names = {i.name for i in plan.instances}
        peers = {name: tuple(p for p in got if p in names) for name, got in (self.peers or {}).items()}
        return plan.model_copy(update={"joined": frozenset(self.joined),
                                       "weight_peers": {k: v for k, v in peers.items() if v}})

    @cached_property
    def targets(self) -> list:
        """SSH targets, key and known_hosts paths made absolute (ansible runs from another directory)."""
        from deployctl.io.targets import ssh_targets

        return ssh_targets(self.inventory, self.inventory_dir.resolve())

    def located(self, exc):
        return located(exc, self.path, self.raw)


def located(exc, path: Path, raw):
    """A refusal pointing into the inventory: its file, and the line of each problem's key path (the layout
    block of the instance that does not fit, ...), from the lines read with it (``raw``; None: no lines)."""
    if not exc.message.startswith(f"{path}: "):
        exc.message = f"{path}: {exc.message}"
    if raw is None:
        return exc
    keys = lambda p: tuple(int(k) if k.isdigit() else k for k in re.split(r"[.\[\]]+", p) if k)  # noqa: E731
    exc.problems = [dataclasses.replace(p, file=p.file or str(path),
                                        line=p.line or (raw.line_of(keys(p.path)) if p.path else None))
                    for p in exc.problems]
    return exc
