"""`deployctl status`: what runs, read from the containers, per node and rank range.

States of the deployment:

* serving: every engine container runs the revision `current` names, with that revision's environment,
  and answers its health check;
* degraded (exit 1): something does not (a container exited, is not ready, runs another revision
  than `current` names, runs another environment, nodes of one instance from different runs);
* down: no engine container, after a deliberate `deployctl down` (or nothing was ever deployed):
  exit 0, or 1 with --expect-up;
* unknown (exit 1): a host could not be read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from deployctl.backends.hosts import history as hist
from deployctl.backends.hosts.remote import container_names
from deployctl.core.render.processes import has_router
from deployctl.backends.hosts.verify import Want, container_env_digest, engine_problems
from deployctl.core.models.deploy import DeployedState
from deployctl.io.executor import Executor
from deployctl.core.models.inventory import Inventory
from deployctl.core.models.plan import Plan


@dataclass
class Status:
    state: str                   # serving, degraded, down, unknown
    rows: list[dict]
    live: int | None             # the history revision that runs, when the hosts agree on one
    note: str = ""
    instances: list[dict] = field(default_factory=list)   # per instance: revision, state, what the router says
    router: dict | None = None   # the router in front: {"what", "error"} (its view is in each instance row)
    findings: list[str] = field(default_factory=list)     # what hosts said that did not parse or agree ("node1: ...")

    def exit_code(self, expect_up: bool) -> int:
        if self.state == "serving":
            return 0
        if self.state == "down":
            return 1 if expect_up else 0
        return 1


def instance_rows(plan: Plan, rows: list[dict], entries: list[dict], view: dict[str, str] | None) -> list[dict]:
    """Pure: per instance, the revision its nodes run (and its history revision), its state and the router's
    word: serving (every node runs and answers, the router sends to it), draining (the router sends it nothing
    new), down (an engine container is not running), degraded (anything else)."""
    out = []
    for inst in plan.instances:
        mine = [r for r in rows if r["instance"] == inst.name]
        said = (view or {}).get(inst.name)
        nodes_rev = {r["node"]: r["revision"] for r in mine}
        # the run that deployed what this instance runs (each node has its own revision id: its own files);
        # a rollout that stopped part way leaves instances on the failed run's revisions
        entry = next((e for e in reversed(entries) if e.get("operation") != "down"
                      and all(e.get("nodes", {}).get(n) == rv for n, rv in nodes_rev.items())), None)
        if any(r["engine"] != "running" for r in mine):
            state = "down"
        elif said is not None and said.split(" ")[0] in ("DRAIN", "MAINT", "NOLB"):
            state = "draining"
        elif any(r["problem"] for r in mine) or (said is not None and not said.startswith("UP")):
            state = "degraded"
        else:
            state = "serving"
        out.append({"instance": inst.name, "role": inst.role, "nodes": list(inst.nodes),
                    "revision": ", ".join(rv or "-" for rv in nodes_rev.values()),
                    "history_revision": entry["revision"] if entry else None,
                    "history_result": entry.get("result") if entry else None, "state": state, "router": said})
    return out


def judge(plan: Plan, states: dict[str, DeployedState], view: dict[str, str] | None = None,
          router: dict | None = None) -> Status:
    """Pure: rows per node and per instance, and the deployment's state (``view``: what the router in front
    says of each instance)."""
    engine, ms = container_names(plan)
    rows, any_problem, unreachable, absent = [], False, False, 0
    for node in plan.nodes:
        s = states[node.name]
        inst = plan.instance(node.instance)
        ranks = [r.rank for r in inst.ranks if r.node == node.name]
        c = s.containers.get(engine)
        mounted = c.mounted_rev if c else None
        problems: list[str] = []
        if s.error:
            unreachable = True
            problems.append(s.error)
        elif c is None or c.status == "absent":
            absent += 1
            problems.append("no engine container")
        else:
            man = s.revisions.get(mounted or "")
            want = Want(s.current_rev, man.env_digest if man else "", tuple(man.env_keys) if man else (),
                        router=has_router(plan, node.name))
            problems += [p.replace("`current` names", "drift: `current` names") for p in
                         engine_problems(s, engine, want, ms)]
            if c.status == "running" and mounted and mounted != s.current_rev:
                problems = [p for p in problems if not p.startswith("the container runs revision")]
                problems.insert(0, f"drift: the container runs revision {mounted}, `current` names "
                                   f"{s.current_rev or '(none)'}")
        runs = {_run(states[n], states[n].current_rev) for n in inst.nodes if not states[n].error}
        if len(runs) > 1 and not s.error:
            problems.append("nodes of this instance were deployed by different `up` runs")
        any_problem |= bool(problems)
        env_ok = env = None
        if c is not None and c.status == "running" and mounted in s.revisions:
            man = s.revisions[mounted]
            env = container_env_digest(c, tuple(man.env_keys))
            env_ok = env == man.env_digest
        rows.append({"node": node.name, "instance": node.instance, "ranks": f"{ranks[0]}-{ranks[-1]}",
                     "revision": mounted, "current": s.current_rev,
                     "run": _run(s, mounted),
                     "engine": "unknown" if s.error else (c.status if c else "absent"),
                     "exit_code": c.exit_code if c and c.status not in ("running", "absent") else None,
                     "env_digest": env, "env_matches": env_ok, "ready": s.ready, "problem": "; ".join(problems)})
    merged = hist.merge({n: s for n, s in states.items() if not s.error})
    entries = merged.entries
    live = hist.live_entry(entries, states)
    last = entries[-1] if entries else None
    per_instance = instance_rows(plan, rows, entries, view)
    if router is not None and router.get("error"):
        any_problem = True
    elif any(i["state"] in ("draining", "degraded") for i in per_instance) and view is not None:
        any_problem = True
    out = _state(plan, rows, live, last, unreachable, absent, any_problem)
    out.instances, out.router = per_instance, router
    out.findings = [f for s in states.values() for f in s.findings] + merged.findings
    revs = {i["history_revision"] for i in per_instance if i["state"] != "down"}
    if out.state in ("serving", "degraded") and len(revs) > 1 and len(plan.instances) > 1:
        out.note = ("the instances run different revisions (a rolling update stopped part way?): "
                    "each instance's revision is in the instances table")
    return out


def _run(s: DeployedState, rev: str | None) -> str | None:
    man = s.revisions.get(rev or "")
    return man.run if man else None


def _state(plan, rows, live, last, unreachable, absent, any_problem) -> Status:
    if unreachable:
        return Status("unknown", rows, None, "a host could not be read")
    if absent == len(plan.nodes):
        deliberate = last is None or (last.get("operation") == "down" and last.get("result") == "successful")
        if deliberate:
            for r in rows:
                r["problem"] = ""
            note = f"stopped by `deployctl down` (run {last['run_id']})" if last else "nothing deployed yet"
            return Status("down", rows, None, note)
    if any_problem:
        return Status("degraded", rows, live["revision"] if live else None)
    note = "" if live else "the hosts' history does not name the running revisions (deployed by an older deployctl?)"
    return Status("serving", rows, live["revision"] if live else None, note)


def cluster_status(inv: Inventory, inventory_dir: Path, plan: Plan | None = None, *, executor: Executor) -> Status:
    """`deployctl status` over the command's ``executor`` (app/executors.py)."""
    from deployctl.backends.hosts.hosts import host_targets_abs
    from deployctl.backends.hosts.up import read_state
    from deployctl.core.errors import DeployctlError
    from deployctl.backends.hosts.router_control import Remote, control_for

    plan, states = read_state(inv, inventory_dir, health=True, executor=executor, plan=plan)
    targets = {t.name: t for t in host_targets_abs(inv, inventory_dir)}
    ctl = control_for(plan, Remote(executor, targets))
    view = router = None
    if ctl is not None and len(plan.instances) > 1:
        router = {"what": ctl.what, "error": ""}
        running = any(c.status == "running" for s in states.values() for c in s.containers.values())
        if running:
            try:
                view = ctl.view()
            except DeployctlError as exc:
                router["error"] = exc.message
    return judge(plan, states, view, router)
