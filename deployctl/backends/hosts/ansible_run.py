"""The hosts backend's effects: the ansible runs (apply, restore, down) and the history files.

Every path handed to ansible is absolute (ansible-runner runs from its own directory). A play whose
host group is not empty in our inventory but that matched no host is a failure (ansible only says
"skipping: no hosts matched"), and the smoke answers are taken from the task results themselves.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from deployctl.backends.hosts import history as hist
from deployctl.backends.hosts.runstate import Desired, HostsRun, Reach, Runner, UpOptions
from deployctl.backends.common.pipeline import Applied, Outcome, Reporter
from deployctl.core.models.deploy import ChangeSet, DeployedState
from deployctl.core.models.inventory import Inventory
from deployctl.core.models.plan import Plan
from deployctl.core.render.processes import has_router
from deployctl.io.ansible import PlaybookResult, TaskFailure, prepare, write_inventory
from deployctl.io.executor import HostTarget, fan_out_width
from deployctl.io.records import RunRecord

SMOKE_TASK = "POST /v1/chat/completions"


def pack_revision(folder: Path, archive: Path) -> Path:
    """One tar of a node's revision folder (modes kept, owned by root): one transfer and one unpack per
    host instead of a copy round trip per file."""
    import tarfile

    def as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w") as tar:
        for path in sorted(folder.iterdir()):
            tar.add(path, arcname=path.name, recursive=False, filter=as_root)
    return archive


@dataclass(frozen=True)
class Playbooks:
    """How one run's playbooks run: the runner, the run record (ansible's private directory, hosts' logs), the
    run's hosts and the vars every one of them gets (``common_vars``), where progress and failures are said."""

    runner: Runner
    record: RunRecord
    plan: Plan
    targets: list[HostTarget]
    common: dict[str, Any]
    trust_new_hosts: bool
    reporter: Reporter


def groups(plan: Plan, changes: ChangeSet, push: bool) -> dict[str, list[str]]:
    moving = [h for h in changes.hosts if h.action != "keep"]
    masters = {i.master for i in plan.instances}
    ms = [h.node for h in changes.hosts if h.ms_action not in (None, "keep")]
    # where the engine's driver says clients go: a router answers for every instance behind it (smoke it when
    # anything moved); otherwise each restarted instance's entry node
    from deployctl.core.render.processes import processes

    entries = [n.name for n in plan.nodes if processes(plan, n.name).smoke]
    routed = any(has_router(plan, n.name) for n in plan.nodes)
    moved = {h.node for h in moving}
    smoke = entries if routed and (moving or ms) else [n for n in entries if n in moved]
    return {"push": [h.node for h in changes.hosts if h.push] if push else [],
            "start_masters": [h.node for h in moving if h.node in masters],
            "start_workers": [h.node for h in moving if h.node not in masters],
            "start_ms": ms,
            "smoke": smoke,
            "rollback": []}


def common_vars(plan: Plan, opts: UpOptions, cdir: str, engine: str, ms: tuple[str, ...]) -> dict[str, Any]:
    """The vars every host of the run gets (the deployment's directory, container names, timeouts, image)."""
    return {"deployctl_dir": cdir, "deployctl_engine": engine, "deployctl_ms_containers": list(ms),
            "deployctl_model": plan.inventory.model.served_name,
            "deployctl_ready_timeout": opts.ready_timeout, "deployctl_smoke_timeout": opts.smoke_timeout,
            "deployctl_purge": opts.purge, "deployctl_image": plan.inventory.engine.image,
            "deployctl_pull": opts.pull}


def _process_vars(plan: Plan, name: str) -> dict:
    """What the engine's driver says about this node: readiness lines, health URLs, smoke endpoint."""
    from deployctl.core.render.processes import processes

    p = processes(plan, name)
    return {"deployctl_ip": plan.node(name).container_ip,
            "deployctl_ready_line": p.engine.ready_line, "deployctl_ready_count": p.engine.ready_count,
            "deployctl_health_urls": list(p.engine.health_urls),
            "deployctl_router_start": p.router.start if p.router else "",
            "deployctl_router_container": p.router.ready_container if p.router else "",
            "deployctl_router_line": p.router.ready_line if p.router else "",
            "deployctl_smoke_url": f"{p.serves}/v1/chat/completions" if p.serves else "",
            "deployctl_smoke_words": p.smoke_words,
            "deployctl_fatal_log": "|".join(p.engine.fatal_log)}


def _hostvars(plan: Plan, record: RunRecord, desired: Desired, changes: ChangeSet,
              observed: dict[str, DeployedState]) -> dict[str, dict]:
    out = {}
    packs = desired.packs or record.path / "push"     # up: private, never in the record (secret env in clear)
    for h in changes.hosts:
        before = observed[h.node]
        archive = ""
        if desired.push and h.push:
            archive = str(pack_revision(desired.rendered / h.node, packs / f"{h.node}.tar").resolve())
        out[h.node] = {**_process_vars(plan, h.node), "deployctl_archive": archive, "deployctl_rev": h.rev,
                       "deployctl_restore_rev": before.current_rev or "",
                       "deployctl_restore_prev": before.previous_rev or "",
                       "deployctl_restore_ms": bool(has_router(plan, h.node) and before.current_rev)}
    return out


class _Events:
    """Follows one playbook's events: progress lines, the first failure, empty plays, smoke answers (into
    ``answers``: node -> the answer)."""

    def __init__(self, plan: Plan, reporter: Reporter, answers: dict[str, str], groups_: dict[str, list[str]],
                 cancel: threading.Event | None = None, first_failure: threading.Event | None = None):
        self.plan, self.reporter, self.answers = plan, reporter, answers
        self.groups, self.cancel = groups_, cancel
        self.first = first_failure
        self.pattern = ""
        self.empty_plays: list[str] = []

    def expected(self, pattern: str) -> bool:
        names = [p for p in pattern.replace(",", ":").split(":") if p]
        return any(self.groups.get(p) or p == "all" for p in names)

    def __call__(self, event: dict) -> None:
        data = event.get("event_data", {})
        kind = event.get("event")
        rep = self.reporter
        if kind == "playbook_on_play_start":
            self.pattern = data.get("play_pattern", "")
            self.play = data.get("play", "")
            if self.expected(self.pattern):          # plays of empty groups are skipped on purpose
                rep.step(f"{self.play}")
        elif kind == "playbook_on_no_hosts_matched" and self.expected(self.pattern):
            self.empty_plays.append(f"{self.play} ({self.pattern})")
        elif kind == "runner_on_ok" and data.get("task") == SMOKE_TASK:
            res = data.get("res", {})
            try:
                answer = res["json"]["choices"][0]["message"]["content"]
            except (KeyError, IndexError, TypeError):
                answer = None
            if isinstance(answer, str):
                self.answers[data.get("host", "")] = answer
        elif kind == "runner_on_ok" and data.get("task", "").startswith(("Run start", "Wait for")):
            rep.step(f"  {data.get('host')}: {data.get('task')} ✓")
        elif kind in ("runner_on_failed", "runner_on_unreachable") and not data.get("ignore_errors"):
            rep.failure(f"  {data.get('host')}: {data.get('task')} FAILED")
            if self.first is not None and not self.first.is_set():   # name host, ranks, last log lines now
                res = data.get("res", {})
                text = "\n".join(x for x in (res.get("stdout", ""), res.get("stderr", "")) if x) or res.get("msg", "")
                first = PlaybookResult(status="failed", rc=1)
                first.failures.append(TaskFailure(data.get("host", ""), data.get("task", ""), text))
                rep.failure(f"✗ {describe_failure(self.plan, first)}")
            if self.first is not None:
                # all-or-nothing: do not wait for the other hosts' readiness loops (HCCL would only time out
                # there too); stop the playbook now and undo
                self.first.set()
                self.cancel.set()


def _run(pb: Playbooks, playbook: str, groups_: dict[str, list[str]], hostvars: dict[str, dict], ident: str,
         answers: dict[str, str], cancel: threading.Event | None = None,
         first: threading.Event | None = None) -> tuple[PlaybookResult, _Events]:
    private = (pb.record.path / "ansible").resolve()
    prepare(private)
    write_inventory(private / "inventory" / "hosts.yml", pb.targets, hostvars, groups_, pb.common,
                    pb.trust_new_hosts)
    events = _Events(pb.plan, pb.reporter, answers, groups_, cancel, first)
    members = {h for g in groups_.values() for h in g} or {t.name for t in pb.targets}
    # one fork (a Python process of ~50 MB) per host, at most the fan-out width: 1,024 hosts would be 50 GB;
    # ansible's linear strategy still ends each task on every host before the next one starts
    forks = min(len(members), fan_out_width())
    result = pb.runner(private, playbook, forks=forks, on_event=events, cancel=cancel, ident=ident)
    return result, events


def run_up(pb: Playbooks, state: HostsRun, desired: Desired, changes: ChangeSet,
           observed: dict[str, DeployedState], cancel: threading.Event, only: set[str] | None = None) -> Applied:
    """The up playbook for every changed host, or only for the hosts in ``only`` (a rolling update's batch).
    Sets the run's smoke hosts and collects their answers (``state``)."""
    if only is not None:
        changes = ChangeSet(hosts=[h for h in changes.hosts if h.node in only])
    g = groups(pb.plan, changes, desired.push)
    state.smoke_hosts = list(g["smoke"])
    hostvars = _hostvars(pb.plan, pb.record, desired, changes, observed)
    for name in g["smoke"]:                  # the router's node answers for the instances behind it
        hostvars.setdefault(name, _process_vars(pb.plan, name))
    first = threading.Event()
    result, events = _run(pb, "up.yml", g, hostvars, "up", state.smoke, cancel, first)
    for f in result.failures:
        pb.record.host_log(f.host, "failure.txt", f"{f.task}\n{f.message}\n")
    if events.empty_plays:
        return Applied(False, "ansible matched no hosts for: " + ", ".join(events.empty_plays)
                       + " (its inventory was not read: nothing was deployed there)")
    if result.status == "canceled" and not first.is_set():
        return Applied(False, "interrupted (Ctrl-C)", canceled=True)
    if not result.ok:
        return Applied(False, describe_failure(pb.plan, result))
    return Applied(True)


def run_restore(pb: Playbooks, moved: list[str], observed: dict[str, DeployedState], engine: str, *,
                rolling: bool, answers: dict[str, str]) -> PlaybookResult:
    """Stop what this run started on the ``moved`` nodes; restart the revision that ran before, with `previous`
    as it was. ``rolling``: a rolling update's batch (the router was never touched: it keeps serving the others)."""
    hostvars = {}
    for node in moved:
        from deployctl.backends.hosts.remote import ran_before

        before = observed[node]
        ran = ran_before(before, engine)
        hostvars[node] = {**_process_vars(pb.plan, node),
                          "deployctl_restore_rev": before.current_rev or "",
                          "deployctl_restore_prev": before.previous_rev or "",
                          "deployctl_restore_start": ran,
                          "deployctl_restore_ms": bool(has_router(pb.plan, node) and ran)}
        if rolling:      # a rolling update never touched the router: it keeps serving the others
            hostvars[node].update(deployctl_ms_containers=[], deployctl_restore_ms=False)
    g = {"rollback": list(moved)}
    result, _ = _run(pb, "rollback.yml", g, hostvars, "restore", answers)
    return result


def run_down(pb: Playbooks, answers: dict[str, str]) -> Applied:
    result, events = _run(pb, "down.yml", {}, {}, "down", answers)
    if events.empty_plays:
        return Applied(False, "ansible matched no hosts for: " + ", ".join(events.empty_plays))
    if not result.ok:
        return Applied(False, describe_failure(pb.plan, result))
    return Applied(True)


def describe_failure(plan: Plan, result: PlaybookResult) -> str:
    if not result.failures:
        return f"ansible-runner ended {result.status} (rc {result.rc})"
    first = result.failures[0]
    node = plan.node(first.host) if any(n.name == first.host for n in plan.nodes) else None
    where = first.host
    if node is not None:
        inst = plan.instance(node.instance)
        ranks = [r.rank for r in inst.ranks if r.node == node.name]
        where = f"{first.host} ({node.instance} instance, ranks {ranks[0]}-{ranks[-1]})"
    detail = "\n".join(f"    {line}" for line in first.message.splitlines()[-25:])
    return f"{where}: {first.task} failed\n{detail}"


# -- history ------------------------------------------------------------------------------------------
def entry_for(operation: str, inv: Inventory, plan: Plan, run_id: str, outcome: Outcome, desired: Desired,
              revision: int) -> dict:
    """The history entry of this run (``revision``: the next number of the hosts' merged history)."""
    import hashlib

    from deployctl import __version__
    from deployctl.backends.common.lockinfo import operator_name

    doc = inv.model_dump(mode="json")
    summary = (f"{inv.model.name} {inv.model.quant}, {plan.preset or 'custom'} on {len(plan.nodes)} "
               f"x {plan.hardware.upper()}")
    result = {"successful": "successful", "canceled": "canceled"}.get(outcome.status, "failed")
    entry = {"revision": revision, "run_id": run_id,
             "time": datetime.now(timezone.utc).isoformat(timespec="seconds"),
             "user": operator_name(), "deployctl": __version__, "operation": operation,
             "result": result, "summary": summary,
             "inventory_digest": hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16],
             "nodes": {n: it.rev for n, it in desired.nodes.items()},
             "files": {n: it.digests for n, it in desired.nodes.items()}}
    if outcome.failure:
        entry["failure"] = outcome.failure.splitlines()[0][:300]
    if desired.entry is not None:
        entry["to"] = desired.entry["revision"]
    return entry


def write_entry(reach: Reach, entry: dict) -> list[str]:
    """Write the entry into every host's history; the hosts where that failed."""
    from deployctl.io.fanout import run_script

    argv = hist.write_argv(reach.cdir, entry)
    return run_script(reach.executor, reach.targets, lambda t: argv, reach.timeout)


def prune(reach: Reach, plan: hist.Prune) -> None:
    """Remove the history entries and revisions ``plan`` names on each host (best effort)."""
    from deployctl.io.fanout import run_script

    def paths(t: HostTarget) -> list[str]:
        return ([f"history/{r}.json" for r in plan.history.get(t.name, [])]
                + [f"revisions/{r}" for r in plan.revisions.get(t.name, [])])

    run_script(reach.executor, [t for t in reach.targets if paths(t)],
               lambda t: ["sh", "-c", hist.REMOVE, "deployctl-prune", reach.cdir, *paths(t)], reach.timeout)
