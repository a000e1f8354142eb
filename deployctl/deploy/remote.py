"""Read what is deployed on each host (read-only, over SSH, in parallel): revisions, containers, health."""

from __future__ import annotations

import json

from deployctl.executors.base import Executor, HostTarget
from deployctl.models.deploy import ContainerState, DeployedState
from deployctl.models.plan import Plan
from deployctl.preflight.batch import ProbeOutput
from deployctl.preflight.fanout import fan_out

INSPECT_FORMAT = "{{.State.Status}} {{.State.ExitCode}} {{.State.StartedAt}}"
# GET a URL with the host's own python3 (MindIE hosts have it; curl is not always there)
HTTP_STATUS = ("import sys, urllib.request\n"
               "try:\n    print(urllib.request.urlopen(sys.argv[1], timeout=3).status)\n"
               "except Exception as e:\n    print(getattr(e, 'code', 0))\n")


def container_names(plan: Plan) -> tuple[str, tuple[str, ...]]:
    from deployctl.render.start import container_name

    base = container_name(plan)
    return base, (f"{base}-ms-controller", f"{base}-ms-coordinator")


def state_commands(plan: Plan, node: str, cdir: str, health: bool) -> list[tuple[str, list[str]]]:
    engine, ms = container_names(plan)
    names = [engine] + (list(ms) if plan.node(node).runs_ms else [])
    cmds = [("dep.current", ["readlink", f"{cdir}/current"]),
            ("dep.previous", ["readlink", f"{cdir}/previous"]),
            ("dep.manifest", ["cat", f"{cdir}/current/.deployctl.json"])]
    cmds += [(f"dep.container.{i}", ["docker", "inspect", "--format", INSPECT_FORMAT, name])
             for i, name in enumerate(names)]
    if health:
        p = plan.node(node)
        url = f"http://{p.container_ip}:{plan.ports.management}/v2/health/ready"
        cmds.append(("dep.health", ["python3", "-c", HTTP_STATUS, url]))
    return cmds


def parse_state(plan: Plan, node: str, out: dict[str, ProbeOutput]) -> DeployedState:
    engine, ms = container_names(plan)
    names = [engine] + (list(ms) if plan.node(node).runs_ms else [])

    def rev(key: str) -> str | None:
        res = out.get(key)
        return res.text.strip().rstrip("/").rsplit("/", 1)[-1] if res and res.rc == 0 and res.text.strip() else None

    files: dict[str, str] = {}
    run = None
    man = out.get("dep.manifest")
    if man and man.rc == 0:
        try:
            doc = json.loads(man.text)
            files, run = dict(doc.get("files", {})), doc.get("run")
        except ValueError:
            files = {}
    containers = {}
    for i, name in enumerate(names):
        res = out.get(f"dep.container.{i}")
        parts = res.text.split() if res and res.rc == 0 else []
        if parts:
            containers[name] = ContainerState(name=name, status=parts[0],
                                              exit_code=int(parts[1]) if len(parts) > 1 and parts[1].isdigit()
                                              else None, started_at=parts[2] if len(parts) > 2 else None)
        else:
            containers[name] = ContainerState(name=name, status="absent")
    health = out.get("dep.health")
    ready = None if health is None else health.text.strip() == "200"
    return DeployedState(node=node, current_rev=rev("dep.current"), previous_rev=rev("dep.previous"),
                         files=files, run=run, containers=containers, ready=ready)


def read_deployed(plan: Plan, targets: list[HostTarget], executor: Executor, cdir: str, *,
                  health: bool = False, timeout: float = 30, workers: int = 32) -> dict[str, DeployedState]:
    """DeployedState per node; an unreachable node gets ``error`` set (and nothing else)."""
    runs = fan_out(executor, targets, lambda t: state_commands(plan, t.name, cdir, health), timeout, workers,
                   measure_clock=False)
    out = {}
    for name, run in runs.items():
        if run.error is not None:
            out[name] = DeployedState(node=name, error=f"{run.error.message}")
        else:
            out[name] = parse_state(plan, name, run.outputs)
    return out
