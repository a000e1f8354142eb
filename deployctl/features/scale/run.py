"""The rounds of `deployctl scale`: read, decide (shadow.py), and with --apply carry out each role's decision
(apply.py), one change at a time; every decision and change goes to the record's events.jsonl and to ``emit``."""

from __future__ import annotations

import time
from typing import Any, Callable

from deployctl.features.scale.shadow import Shadow


def run_rounds(shadow: Shadow, rounds: int, interval: float, emit: Callable[[dict], None], *,
               applier: Any = None, reopen: Callable[[], Any] | None = None,
               reader: Callable[[Any], Callable[[], list]] | None = None, drain_timeout: float = 600,
               sleep: Callable[[float], None] = time.sleep) -> int:
    """Run ``rounds`` rounds ``interval`` s apart; with ``applier`` (and ``reopen``: the deployment as scaled now,
    ``reader``: the load reader of a plan) an up or down decision is carried out. The number of failed changes."""
    failed = 0
    for n in range(rounds):
        if n:
            sleep(interval)
        if applier is not None and reopen is not None:
            back = applier.rejoin(reopen())
            if back:
                doc = {"event": "rejoined", "round": shadow.rounds + 1, "instances": back}
                if shadow.record is not None:
                    shadow.record.append_jsonl("events.jsonl", [doc])
                emit(doc)
        for d in shadow.round():
            emit({"event": "decision", "round": shadow.rounds, "mode": shadow.mode, **d.as_dict()})
            if applier is None or reopen is None or reader is None or d.action == "hold":
                continue
            ctx = reopen()
            change = applier.add(ctx, d.role, d.reason, live=shadow.answered) if d.action == "up" else \
                applier.remove(ctx, d.role, d.reason, drain_timeout)
            doc = {"event": "change", "round": shadow.rounds, **change.as_dict()}
            if shadow.record is not None:
                shadow.record.append_jsonl("events.jsonl", [doc])
            emit(doc)
            if change.ok:
                after = reopen()
                shadow.replan(after.plan, reader(after), d.role)
            else:
                failed += 1
                shadow.last_change[d.role] = shadow.clock()     # a failed change waits out the cool-down too
    return failed
