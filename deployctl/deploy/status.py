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

from dataclasses import dataclass

from deployctl.deploy import history as hist
from deployctl.deploy.remote import container_names
from deployctl.deploy.verify import Want, container_env_digest, engine_problems
from deployctl.models.deploy import DeployedState
from deployctl.models.plan import Plan


@dataclass
class Status:
    state: str                   # serving, degraded, down, unknown
    rows: list[dict]
    live: int | None             # the history revision that runs, when the hosts agree on one
    note: str = ""

    def exit_code(self, expect_up: bool) -> int:
        if self.state == "serving":
            return 0
        if self.state == "down":
            return 1 if expect_up else 0
        return 1


def judge(plan: Plan, states: dict[str, DeployedState]) -> Status:
    """Pure: rows per node and the deployment's state."""
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
            man = s.revisions.get(mounted or "", {})
            want = Want(s.current_rev, man.get("env_digest", ""), tuple(man.get("env_keys", ())), ms=node.runs_router)
            problems += [p.replace("`current` names", "drift: `current` names") for p in
                         engine_problems(s, engine, want, ms)]
            if c.status == "running" and mounted and mounted != s.current_rev:
                problems = [p for p in problems if not p.startswith("the container runs revision")]
                problems.insert(0, f"drift: the container runs revision {mounted}, `current` names "
                                   f"{s.current_rev or '(none)'}")
        runs = {states[n].revisions.get(states[n].current_rev or "", {}).get("run") for n in inst.nodes
                if not states[n].error}
        if len(runs) > 1 and not s.error:
            problems.append("nodes of this instance were deployed by different `up` runs")
        any_problem |= bool(problems)
        env_ok = env = None
        if c is not None and c.status == "running" and mounted in s.revisions:
            man = s.revisions[mounted]
            env = container_env_digest(c, tuple(man.get("env_keys", ())))
            env_ok = env == man.get("env_digest")
        rows.append({"node": node.name, "instance": node.instance, "ranks": f"{ranks[0]}-{ranks[-1]}",
                     "revision": mounted, "current": s.current_rev,
                     "run": s.revisions.get(mounted or "", {}).get("run"),
                     "engine": "unknown" if s.error else (c.status if c else "absent"),
                     "exit_code": c.exit_code if c and c.status not in ("running", "absent") else None,
                     "env_digest": env, "env_matches": env_ok, "ready": s.ready, "problem": "; ".join(problems)})
    entries = hist.merged({n: s for n, s in states.items() if not s.error})
    live = hist.live_entry(entries, states)
    last = entries[-1] if entries else None
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


def cluster_status(inv, inventory_dir) -> Status:
    from deployctl.deploy.up import read_state

    plan, states = read_state(inv, inventory_dir, health=True)
    return judge(plan, states)
