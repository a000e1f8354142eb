"""A restart by `deployctl watch`'s recovery, as an entry of the hosts' history (history.py): what `deployctl
history` shows next to up, rollback and down, read back from the hosts like every entry.

The entry is an ``operation: restart`` that names no revision of its own (``nodes`` and ``files`` empty: the
instance restarted the files it already ran), so it is never live, never a rollback target and never kept
instead of a deployment when the history is pruned; it takes the next revision number, like every entry, so no
number is used twice (history.next_revision: one host's out-of-line numbers do not count, and a history numbered
to the parser's bound gets no entry: the failure says where). It is written on every host of the deployment by
the same fixed script as the other entries (the entry a value, never spliced), and read back through the same
parser (deployctl.core.models.hostdata).
"""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from typing import Callable

from deployctl.backends.hosts import history as hist
from deployctl.backends.hosts.remote import read_deployed
from deployctl.backends.hosts.revision import cluster_dir
from deployctl.io.executor import Executor, HostTarget
from deployctl.core.models.hostdata import clean_entry, seal
from deployctl.core.models.plan import Plan

RESULTS = {"back": "successful", "restart-failed": "failed", "not-serving": "failed"}   # watch event -> result


def restart_entry(ev: dict, revision: int, run_id: str, user: str, version: str) -> dict:
    """The history entry of one restart (``ev``: watch's `back`, `restart-failed` or `not-serving` event)."""
    when = datetime.fromtimestamp(float(ev["ts"]), timezone.utc).isoformat(timespec="seconds")
    what = f"watch restarted {ev['instance']}" + (f" on {', '.join(ev['nodes'])}" if ev.get("nodes") else "")
    entry = {"revision": revision, "run_id": run_id, "time": when, "user": user, "deployctl": version,
             "operation": "restart", "result": RESULTS[ev["event"]], "summary": f"{what}: {ev.get('cause', '')}"[:500],
             "nodes": {}, "files": {}}
    if entry["result"] != "successful":
        entry["failure"] = str(ev.get("cause", ""))[:300]
    return entry


def history_recorder(plan: Plan, executor: Executor, targets: list[HostTarget], timeout: float = 30
                     ) -> Callable[[dict], list[str]]:
    """A function that writes the entry of a restart event on every host and returns where it failed."""
    from deployctl import __version__
    from deployctl.backends.common.lockinfo import operator_name

    user = operator_name()
    cdir = cluster_dir(plan)
    lock = threading.Lock()           # two recoveries at once: one revision number each

    def record(ev: dict) -> list[str]:
        from deployctl.io.fanout import run_script

        names = {i.name: list(i.nodes) for i in plan.instances}
        ev = {**ev, "nodes": names.get(ev.get("instance"), [])}
        with lock:
            states = read_deployed(plan, targets, executor, cdir, timeout=timeout)
            stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S.%fZ")
            # a history numbered to the parser's bound raises a DeployctlError: watch's loop reports it
            entry = seal(clean_entry(restart_entry(ev, hist.next_revision(hist.merge(states)),
                                                   f"{stamp}-restart", user, __version__)))
            argv = hist.write_argv(cdir, entry)
            reachable = [t for t in targets if not states[t.name].error]
            failed = run_script(executor, reachable, lambda t: argv, timeout)
            return failed + [f"{n}: {s.error}" for n, s in states.items() if s.error]

    return record
