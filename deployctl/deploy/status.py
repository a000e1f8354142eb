"""`deployctl status`: per node and rank range: revision, engine container state, readiness."""

from __future__ import annotations

from pathlib import Path

from deployctl.deploy.remote import container_names, read_deployed
from deployctl.deploy.revision import cluster_dir
from deployctl.preflight.run import ssh_targets


def cluster_status(inv, inventory_dir: Path) -> tuple[list[dict], bool]:
    """Rows per node and whether the deployment is degraded (anything not running/ready/consistent)."""
    from deployctl.executors.ssh import SshExecutor
    from deployctl.planning.plan import plan_layout

    plan = plan_layout(inv)
    engine, ms = container_names(plan)
    executor = SshExecutor()
    try:
        deployed = read_deployed(plan, ssh_targets(inv, inventory_dir), executor, cluster_dir(plan), health=True)
    finally:
        executor.close()
    rows, degraded = [], False
    for node in plan.nodes:
        s = deployed[node.name]
        inst = plan.instance(node.instance)
        ranks = [r.rank for r in inst.ranks if r.node == node.name]
        state = s.containers.get(engine)
        problems = []
        if s.error:
            problems.append(s.error)
        elif state is None or state.status != "running":
            problems.append(f"engine {state.status if state else 'absent'}"
                            + (f" (exit {state.exit_code})" if state and state.exit_code else ""))
        elif not s.ready:
            problems.append("health /v2/health/ready not 200")
        runs = {deployed[n].run for n in inst.nodes if not deployed[n].error}
        if len(runs) > 1:
            problems.append("nodes of this instance were deployed by different `up` runs")
        if node.runs_ms:
            for name in ms:
                c = s.containers.get(name)
                if c is None or c.status != "running":
                    problems.append(f"{name.rsplit('-', 1)[-1]} {c.status if c else 'absent'}")
        degraded |= bool(problems)
        rows.append({"node": node.name, "instance": node.instance, "ranks": f"{ranks[0]}-{ranks[-1]}",
                     "revision": s.current_rev, "run": s.run, "engine": state.status if state else "unknown",
                     "ready": s.ready, "problem": "; ".join(problems)})
    return rows, degraded
