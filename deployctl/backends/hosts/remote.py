"""Read what is deployed on each host (read-only, over SSH, in parallel): the revisions on disk, the
`current`/`previous` links, the history, the lock, and what the containers really run (the revision
directory each one mounts, its environment, its state) and whether the engine answers its health check.
"""

from __future__ import annotations

import hashlib
import re

from deployctl.core.models.hostdata import REV, printable
from deployctl.io.executor import Executor, HostTarget, fan_out_width
from deployctl.core.models.deploy import ContainerState, DeployedState
from deployctl.core.models.plan import Plan
from deployctl.io.batch import ProbeOutput
from deployctl.io.fanout import fan_out
from deployctl.core.render.processes import processes
from deployctl.probes import containers as container_facts
from deployctl.probes import deployed
from deployctl.probes.containers import HTTP_STATUS, INSPECT_FORMAT, READY_LINES  # noqa: F401 (re-exported)


def container_names(plan: Plan) -> tuple[str, tuple[str, ...]]:
    """(the engine container's name, the router's containers) - the same names on every node."""
    router = next((p.router for p in (processes(plan, n.name) for n in plan.nodes) if p.router), None)
    return processes(plan, plan.nodes[0].name).engine.containers[0], router.containers if router else ()


def env_pairs(text: str) -> dict[str, str]:
    """KEY=VALUE as `docker run --env-file` reads them (no quote processing; comments and blanks skipped)."""
    out = {}
    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("#") or "=" not in line:
            continue
        key, _, value = line.partition("=")
        out[key.strip()] = value
    return out


def env_digest(pairs: dict[str, str]) -> str:
    h = hashlib.sha256("\n".join(f"{k}={v}" for k, v in sorted(pairs.items())).encode())
    return h.hexdigest()[:16]


def state_commands(plan: Plan, node: str, cdir: str, health: bool) -> list[tuple[str, list[str]]]:
    names = list(processes(plan, node).containers)
    cmds = [("dep.current", deployed.LINK.command(f"{cdir}/current")),
            ("dep.previous", deployed.LINK.command(f"{cdir}/previous")),
            ("dep.manifests", deployed.MANIFESTS.command(cdir)),
            ("dep.history", deployed.HISTORY.command(cdir)),
            ("dep.lock", deployed.LOCK.command(cdir))]
    cmds += [(f"dep.container.{i}", container_facts.INSPECT.command(name)) for i, name in enumerate(names)]
    if health:
        engine = processes(plan, node).engine
        cmds += [(f"dep.health.{i}", container_facts.HTTP_OK.command(url)) for i, url in enumerate(engine.health_urls)]
        if not engine.health_urls and engine.ready_line:
            cmds.append(("dep.readylog",
                         container_facts.READY_COUNT.command(engine.ready_container, engine.ready_line)))
    return cmds


def _container(name: str, res: ProbeOutput | None, work_dir: str, node: str) -> tuple[ContainerState, list[str]]:
    if res is None or res.rc != 0:       # docker: no such container (or no answer: the fan-out says why)
        return ContainerState(name=name, status="absent"), []
    doc, findings = container_facts.INSPECT.parse(res.text, node, name)
    if doc is None:
        return ContainerState(name=name, status="unknown"), findings
    mounted = None
    for m in doc.mounts:
        if m.Destination == work_dir:
            folder = m.Source.rstrip("/").rsplit("/", 1)[-1]
            mounted = folder if re.fullmatch(REV.strip("^$"), folder) else None
            if mounted is None and folder:
                findings = [f"{node}: {name} mounts {printable(m.Source, 80)!r}, not a deployctl revision"]
    pairs = dict(e.partition("=")[::2] for e in doc.env)
    return ContainerState(name=name, status=doc.state.Status, exit_code=doc.state.ExitCode,
                          started_at=doc.state.StartedAt, mounted_rev=mounted, env=pairs), findings


def _text(out: dict[str, ProbeOutput], key: str) -> str | None:
    res = out.get(key)
    return res.text if res is not None and res.rc == 0 else None


def parse_state(plan: Plan, node: str, out: dict[str, ProbeOutput]) -> DeployedState:
    """What ``node`` said, parsed (deployctl.core.models.hostdata): what does not parse is a finding, never an error."""
    names = list(processes(plan, node).containers)
    current, findings = deployed.LINK.parse(_text(out, "dep.current"), node, "current")
    previous, more = deployed.LINK.parse(_text(out, "dep.previous"), node, "previous")
    revisions, man_findings = deployed.MANIFESTS.parse(_text(out, "dep.manifests") or "", node)
    history, hist_findings = deployed.HISTORY.parse(_text(out, "dep.history") or "", node)
    lock, lock_findings = deployed.LOCK.parse(_text(out, "dep.lock"), node)
    findings += more + man_findings + hist_findings + lock_findings
    containers = {}
    for i, name in enumerate(names):
        containers[name], more = _container(name, out.get(f"dep.container.{i}"), plan.inventory.engine.work_dir,
                                            node)
        findings += more
    checks = [out[k] for k in sorted(out) if k.startswith("dep.health.")]
    ready = None if not checks else all(container_facts.HTTP_OK.parse(c.text) for c in checks)
    logged = _text(out, "dep.readylog")
    count = container_facts.READY_COUNT.parse(logged) if logged is not None else None
    if ready is None and count is not None:
        # no HTTP to ask: ready once the log shows the ready line as often as it has processes, and it runs
        running = any(c.status == "running" for c in containers.values())
        ready = running and count >= processes(plan, node).engine.ready_count
    man = revisions.get(current or "")
    return DeployedState(node=node, current_rev=current, previous_rev=previous,
                         files=dict(man.files) if man else {}, run=man.run if man else None, containers=containers,
                         ready=ready, revisions=revisions, history=history, lock=lock, findings=findings)


def read_deployed(plan: Plan, targets: list[HostTarget], executor: Executor, cdir: str, *,
                  health: bool = False, timeout: float = 30, workers: int | None = None) -> dict[str, DeployedState]:
    """DeployedState per node; an unreachable node gets ``error`` set (and nothing else)."""
    runs = fan_out(executor, targets, lambda t: state_commands(plan, t.name, cdir, health), timeout, workers,
                   measure_clock=False)
    out = {}
    for name, run in runs.items():
        if run.error is not None:
            hint = f" ({run.error.hint})" if getattr(run.error, "hint", "") else ""
            out[name] = DeployedState(node=name, error=f"{run.error.message}{hint}")
        else:
            out[name] = parse_state(plan, name, run.outputs)
    return out


def ran_before(state: DeployedState, engine: str) -> bool:
    """The engine ran a recorded revision before this run: the undo starts it again (else just stops)."""
    c = state.containers.get(engine)
    return bool(c is not None and c.status == "running" and state.current_rev)
