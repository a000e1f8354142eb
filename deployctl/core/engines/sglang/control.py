"""Take SGLang servers out of the P/D router and back (rolling updates, `watch` recovery), through sglang-router
0.3.2's worker API, as the real router answers it (run against it here: tests/backends/hosts/test_sglang_e2e.py):

* GET /workers: {"workers": [{"id", "url", "worker_type": "prefill"|"decode", "is_healthy", "bootstrap_port", ...}],
  "total", "stats"};
* DELETE /workers/<id>: 202 {"status": "accepted", ...}: the worker leaves the selection for new requests (queued,
  done within a moment); requests already on it go on;
* POST /workers {"url", "worker_type", "bootstrap_port" (prefill)}: 202; the router health-checks it and routes to it
  once it answers. A URL already listed keeps its entry.
Requests in flight on a server: SGLang's gauges on its HTTP port, sglang:num_running_reqs and sglang:num_queue_reqs
(sglang 0.5.23 srt/observability/metrics_collector.py L365, L371; served with --enable-metrics, which deployctl
renders), parsed into a bounded count: a gauge that is no count makes the server's requests unknown, never idle.
"""

from __future__ import annotations

import json
import math
import re
from typing import TYPE_CHECKING, Any, cast

from deployctl.core.engine_spec.router import InFlightNotes
from deployctl.core.errors import ExecutionError
from deployctl.core.models.engine_settings.sglang import SglangSettings

if TYPE_CHECKING:
    from deployctl.core.engine_spec.router import RouterRemote
    from deployctl.core.models.plan import Plan

GAUGES = re.compile(r"^sglang:num_(running|queue)_reqs(\{[^}\n]{0,4096}\})?[ \t]+(\S{1,32})[ \t]*$", re.M)
NOT_IDLE = 1 << 30
MAX_ANSWER = 1 << 20
MAX_WORKERS = 4096


def read_gauges(metrics: str) -> tuple[int | None, str]:
    """(running + queued requests, "") of an SGLang server's /metrics, every series summed (at most NOT_IDLE);
    (None, why) when a gauge is no count of requests."""
    total = 0
    for m in GAUGES.finditer(metrics[:MAX_ANSWER]):
        text = m.group(3)
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and 0 <= value < NOT_IDLE and value == int(value)):
            return None, f"sglang:num_{m.group(1)}_reqs is {text!r}, not a count of requests"
        total = min(total + int(value), NOT_IDLE)
    return total, ""


def workers(text: str) -> list[dict[str, Any]]:
    """The router's GET /workers answer as [{"id", "url", "type", "healthy"}], anything malformed left out."""
    try:
        doc = json.loads(text[:MAX_ANSWER])
    except (ValueError, RecursionError):
        return []
    items = doc.get("workers") if isinstance(doc, dict) else None
    out = []
    for w in (items if isinstance(items, list) else [])[:MAX_WORKERS]:
        if isinstance(w, dict) and isinstance(w.get("id"), str) and isinstance(w.get("url"), str) \
                and len(w["id"]) <= 128 and re.fullmatch(r"[A-Za-z0-9._:-]+", w["id"]):
            out.append({"id": w["id"], "url": w["url"][:512], "type": str(w.get("worker_type", ""))[:16],
                        "healthy": w.get("is_healthy") is True})
    return out


class RouterControl(InFlightNotes):
    def __init__(self, plan: Plan, remote: RouterRemote) -> None:
        from deployctl.core.engines.sglang.launch import bootstrap_port, launches

        self.plan, self.remote = plan, remote
        self.node = next(n for n in plan.nodes if n.runs_router)
        self.url = f"http://{self.node.container_ip}:{cast(SglangSettings, plan.inventory.engine).ports.router}"
        self.what = f"the SGLang router on {self.node.name}"
        every = launches(plan)
        self.endpoint = {i.name: "http://%s:%d" % every[i.master].endpoints[0] for i in plan.instances}
        self.bootstrap = {i.name: bootstrap_port(plan, i) for i in plan.role("prefill")}

    def routed(self) -> list[str]:
        return [i.name for i in self.plan.instances]

    def _workers(self) -> list[dict[str, Any]]:
        code, text = self.remote.http(self.node.name, "GET", f"{self.url}/workers")
        if code != 200:
            raise ExecutionError(f"{self.what}: GET /workers answered {code}: {text[:300]}",
                                 hint="the router must be sglang-router 0.3.x (python -m sglang_router.launch_router)")
        return workers(text)

    def drain(self, instance: str) -> None:
        for w in [w for w in self._workers() if w["url"] == self.endpoint[instance]]:
            code, text = self.remote.http(self.node.name, "DELETE", f"{self.url}/workers/{w['id']}")
            if code not in (200, 202, 204, 404):
                raise ExecutionError(f"{self.what}: DELETE /workers/{w['id']} ({instance}) answered {code}: "
                                     f"{text[:300]}")

    def ready(self, instance: str) -> None:
        if any(w["url"] == self.endpoint[instance] for w in self._workers()):
            return
        body: dict[str, Any] = {"url": self.endpoint[instance], "worker_type": self.plan.instance(instance).role}
        if instance in self.bootstrap:
            body["bootstrap_port"] = self.bootstrap[instance]
        code, text = self.remote.http(self.node.name, "POST", f"{self.url}/workers", json.dumps(body))
        if code not in (200, 201, 202):
            raise ExecutionError(f"{self.what}: POST /workers for {instance} answered {code}: {text[:300]}")

    def serving(self, instance: str) -> bool:
        return any(w["url"] == self.endpoint[instance] and w["healthy"] for w in self._workers())

    def in_flight(self, instance: str) -> int:
        ep = self.endpoint[instance]
        code, text = self.remote.http(self.node.name, "GET", f"{ep}/metrics")
        if code == 0:
            self.told(instance)
            return 0                # nothing listens (the server is down): nothing in flight on it
        n, why = read_gauges(text) if code == 200 else (None, f"answered {code}")
        if n is None:
            self.told(instance, f"{ep}/metrics (from {self.node.name}): {why}")
            return NOT_IDLE
        self.told(instance)
        return n

    def view(self) -> dict[str, str]:
        try:
            listed = {w["url"]: w for w in self._workers()}
        except ExecutionError as err:
            return {i: f"router: {err.message[:120]}" for i in self.routed()}
        out = {}
        for inst in self.routed():
            w = listed.get(self.endpoint[inst])
            out[inst] = "OUT" if w is None else ("UP" if w["healthy"] else "DOWN")
        return out


def router_control(plan: Plan, remote: RouterRemote) -> RouterControl | None:
    return RouterControl(plan, remote) if plan.preset == "pd-split" else None
