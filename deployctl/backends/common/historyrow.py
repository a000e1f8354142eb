"""One line of `deployctl history` (hosts and k8s print the same rows)."""

from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class HistoryRow:
    revision: int              # hosts: deployctl's sequence number; k8s: the helm revision
    run_id: str                # the deployctl run that made it ("" when helm made it without deployctl)
    time: str                  # ISO 8601, UTC
    user: str
    operation: str             # up, rollback, down (k8s: install, upgrade, rollback, ...)
    result: str                # successful, failed, canceled, down; k8s: helm's status
    live: bool                 # what runs now
    summary: str               # the plan in a few words (model, quant, layout, nodes) or the chart
    changed: str = ""          # what changed against the revision before it
    available: bool = True     # its files are still on every host (rollback possible)

    def to_dict(self) -> dict:
        return asdict(self)
