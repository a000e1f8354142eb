"""The router in front of several mixed instances: HAProxy (Debian/Docker Hub's official image), rendered
from the plan, run as a container on one node, controlled through its runtime API during rolling updates.

Why HAProxy (docs/fleets.md): active HTTP health checks per server and a runtime API to drain a server (no
new requests, those in flight finish) and read its sessions, in the open-source build. nginx's active
health checks (`health_check`) and its API are NGINX Plus only (nginx.org ngx_http_upstream_hc_module);
vllm-router speaks to vLLM workers only, not to MindIE.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast
from urllib.parse import urlsplit

from deployctl.core.engine_spec.protocol import Process
from deployctl.core.models.artifact import Artifact
from deployctl.core.models.plan import FleetRouter, Plan

READY_LINE = "Loading success."      # the master process, once its worker runs (HAProxy 2.6 haproxy.c)
HEALTH_PATH = "/deployctl/router-health"   # monitor-uri: HAProxy answers 200 itself
RESTART_FILES = ("haproxy.cfg", "start-router.sh")


@dataclass(frozen=True)
class Backend:
    name: str            # the instance
    host: str
    port: int            # its OpenAI endpoint
    check_port: int      # its health endpoint (the engine's readiness URL)
    check_path: str


def backends(plan: Plan) -> list[Backend]:
    """Every mixed instance's endpoint and health URL, as the engine's engine_spec says for its master."""

    engine_spec = plan.engine_spec
    out = []
    for inst in plan.role("mixed"):
        p = engine_spec.processes(plan, plan.node(inst.master))
        api = urlsplit(p.serves)
        health = urlsplit(p.engine.health_urls[0]) if p.engine.health_urls else api
        out.append(Backend(inst.name, api.hostname, api.port, health.port, health.path or "/"))
    return out


def _router(plan: Plan) -> FleetRouter:
    return cast(FleetRouter, plan.router)   # asked only of a plan with a router (render_router)


def process(plan: Plan) -> Process:
    r = _router(plan)
    return Process(containers=(r.container,), start="start-router.sh", ready_container=r.container,
                   ready_line=READY_LINE, health_urls=(f"{r.url}{HEALTH_PATH}",), ports=(r.port, r.admin_port),
                   restart_files=RESTART_FILES, restart_with_engines=False)


def config(plan: Plan) -> str:
    from deployctl import __version__
    from deployctl.core.render._jinja import render_template

    r = _router(plan)
    # the instances scale added are put in through the runtime API ("add server": router_control.py), not this file:
    # adding one restarts no router
    servers = [b for b in backends(plan) if b.name not in plan.joined]
    return render_template("deployctl.core.render/templates/haproxy.cfg.j2", version=__version__,
                           cluster=plan.inventory.cluster.name, ip=r.ip, port=r.port, admin_port=r.admin_port,
                           health_path=HEALTH_PATH, check_path=servers[0].check_path,
                           interval_ms=r.check_interval_ms, servers=servers)


def start_script(plan: Plan) -> str:
    from deployctl import __version__
    from deployctl.core.render._jinja import render_template

    r = _router(plan)
    return render_template("deployctl.core.render/templates/start-router.sh.j2", version=__version__, node=r.node,
                           image=r.image, container=r.container, url=r.url)


def render_router(plan: Plan) -> list[Artifact]:
    if plan.router is None:
        return []
    node = plan.router.node
    return [Artifact(kind="router", path=f"{node}/haproxy.cfg", content=config(plan).encode(), mode=0o644),
            Artifact(kind="start", path=f"{node}/start-router.sh", content=start_script(plan).encode(), mode=0o755)]
