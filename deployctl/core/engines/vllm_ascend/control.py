"""Take P and D instances out of the P/D proxy and back during a rolling update (vLLM-Ascend where support.yaml
`proxy_instances_api` says yes: the endpoints exist from 0.13, removal is safe from 0.15; the tables know 0.18, 0.23).

The proxy (examples/disaggregated_prefill_v1/load_balance_proxy_server_example.py@v0.13.0):
* POST /instances/remove {"type": "prefill"|"decode", "instances": ["ip:port", ...]}: the servers leave the
  selection for new requests (remove_prefillers / remove_decoders, L353-385); requests already on them go on;
* POST /instances/add: the same body; a server answering GET /v1/models joins at once, else it waits in the
  node listener (add_instances L317-333, check_instance_status L425-436); both answer with
  "current_prefill_instances" / "current_decode_instances" (L843-847), servers written "ip:port" (L184);
* GET /healthcheck: {"status": "ok", "prefill_instances": N, "decode_instances": M} (L873-879): counts only.
Requests in flight on a server: vLLM's Prometheus gauges on its API port, `vllm:num_requests_running` and
`vllm:num_requests_waiting` (vllm/v1/metrics/loggers.py, PrometheusStatLogger), parsed here into a bounded count
(``read_gauges``): a gauge that is no count (not a number, not finite, negative, fractional, 2**30 or more) makes
the server's requests unknown, which is never idle and is said (``unknown``), never an exception.
"""

from __future__ import annotations

import json
import math
import re
from typing import TYPE_CHECKING, Any, cast

from deployctl.core.errors import ExecutionError
from deployctl.core.engine_spec.router import InFlightNotes
from deployctl.core.models.engine_settings.vllm_ascend import VllmAscendSettings

if TYPE_CHECKING:
    from deployctl.core.engine_spec.router import RouterRemote
    from deployctl.core.models.plan import Plan

GAUGES = re.compile(r"^vllm:num_requests_(running|waiting)(\{[^}\n]{0,4096}\})?[ \t]+(\S{1,32})[ \t]*$", re.M)
NOT_IDLE = 1 << 30          # requests in flight when the answer cannot tell: never "idle"
MAX_ANSWER = 1 << 20


def read_gauges(metrics: str) -> tuple[int | None, str]:
    """(running + waiting requests, "") of a Prometheus answer of vLLM's API server, the gauges of every engine
    summed (at most ``NOT_IDLE``); (None, why) when a gauge is not a count of requests (a host that lies is never
    idle)."""
    total = 0
    for m in GAUGES.finditer(metrics[:MAX_ANSWER]):
        text = m.group(3)
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        if not (math.isfinite(value) and 0 <= value < NOT_IDLE and value == int(value)):
            return None, f"vllm:num_requests_{m.group(1)} is {text!r}, not a count of requests"
        total = min(total + int(value), NOT_IDLE)
    return total, ""


def requests_in_flight(metrics: str) -> int:
    """``read_gauges``'s count; ``NOT_IDLE`` when it cannot tell."""
    n, _ = read_gauges(metrics)
    return NOT_IDLE if n is None else n


def _listed(doc: Any, key: str) -> set[str]:
    """The ``ip:port`` strings of a proxy answer's list ``key`` (anything else in it is ignored)."""
    value = doc.get(key) if isinstance(doc, dict) else None
    return {v for v in value[:4096] if isinstance(v, str)} if isinstance(value, list) else set()


class ProxyControl(InFlightNotes):
    def __init__(self, plan: Plan, remote: RouterRemote) -> None:
        from deployctl.core.engines.vllm_ascend.launch import launches

        self.plan, self.remote = plan, remote
        self.node = next(n for n in plan.nodes if n.runs_router)
        self.url = f"http://{self.node.container_ip}:{cast(VllmAscendSettings, plan.inventory.engine).ports.proxy}"
        self.what = f"the P/D proxy on {self.node.name}"
        every = launches(plan)
        self.endpoints = {i.name: [f"{h}:{p}" for n in i.nodes for h, p in every[n].endpoints]
                          for i in plan.instances}

    def routed(self) -> list[str]:
        return [i.name for i in self.plan.instances]

    def _adjust(self, mode: str, instance: str) -> dict:
        role = self.plan.instance(instance).role
        body = json.dumps({"type": role, "instances": self.endpoints[instance]})
        code, text = self.remote.http(self.node.name, "POST", f"{self.url}/instances/{mode}", body)
        try:
            doc = json.loads(text) if code == 200 else None
        except (ValueError, RecursionError):      # RecursionError: a deeply nested answer
            doc = None
        if not isinstance(doc, dict) or "error" in doc:
            raise ExecutionError(f"{self.what}: POST /instances/{mode} for {instance} answered {code}: {text[:300]}",
                                 hint="the proxy must be vLLM-Ascend's load_balance_proxy_server_example.py of "
                                      "the engine version (0.15 or later)")
        return doc

    def drain(self, instance: str) -> None:
        # from 0.15 a removal while requests are being dispatched "taints" the servers instead (last in the
        # selection heap, removed by the node listener once the proxy is idle; @v0.18.0 L397-404, L488-491) and
        # answers that they "are isolated and waiting to be removed": either way no new request goes to them
        doc = self._adjust("remove", instance)
        still = set(self.endpoints[instance]) & _listed(doc, f"current_{self._role(instance)}_instances")
        message = str(doc.get("message", ""))[:300]
        if still and "waiting to be removed" not in message:
            raise ExecutionError(f"{self.what} still lists {', '.join(sorted(still))} after removing {instance}: "
                                 f"{message}")

    def ready(self, instance: str) -> None:
        self._adjust("add", instance)

    def serving(self, instance: str) -> bool:
        # adding is idempotent (add_prefillers/add_decoders skip servers already listed): its answer lists them
        doc = self._adjust("add", instance)
        return set(self.endpoints[instance]) <= _listed(doc, f"current_{self._role(instance)}_instances")

    def in_flight(self, instance: str) -> int:
        total = 0
        for ep in self.endpoints[instance]:
            code, text = self.remote.http(self.node.name, "GET", f"http://{ep}/metrics")
            if code == 0:
                continue            # nothing listens there (the server is down): nothing in flight on it
            n, why = read_gauges(text) if code == 200 else (None, f"answered {code}")
            if n is None:           # cannot tell: not idle (the drain waits, then says why)
                self.told(instance, f"{ep} /metrics (from {self.node.name}): {why}")
                return NOT_IDLE
            total = min(total + n, NOT_IDLE)
        self.told(instance)
        return total

    def view(self) -> dict[str, str]:
        code, text = self.remote.http(self.node.name, "GET", f"{self.url}/healthcheck")
        try:
            doc = json.loads(text) if code == 200 else {}
        except (ValueError, RecursionError):
            doc = {}
        if not isinstance(doc, dict):
            doc = {}
        out = {}
        for role in ("prefill", "decode"):
            want = sum(len(self.endpoints[i.name]) for i in self.plan.role(role))
            have = doc.get(f"{role}_instances")
            have = have if isinstance(have, int) and not isinstance(have, bool) and 0 <= have < 1 << 20 else "?"
            for i in self.plan.role(role):
                # the proxy reports counts only: every server of the role listed, or how many are
                out[i.name] = "UP" if have == want else f"proxy lists {have}/{want} {role} servers"
        return out

    def _role(self, instance: str) -> str:
        return self.plan.instance(instance).role


def router_control(plan: Plan, remote: RouterRemote) -> ProxyControl | None:
    from deployctl.core.engines.vllm_ascend.support import feature

    if plan.preset != "pd-split" or feature("proxy_instances_api", plan.engine.version).get("value") != "yes":
        return None
    return ProxyControl(plan, remote)


def router_control_gap(plan: Plan) -> str | None:
    """Why the P/D proxy of this deployment cannot take an instance out (None: it can, or it is no pd-split)."""
    from deployctl.core.engines.vllm_ascend.support import feature

    if plan.preset != "pd-split":
        return None
    entry = feature("proxy_instances_api", plan.engine.version)
    if entry.get("value") == "yes":
        return None
    version = plan.engine.version or "(version unknown)"
    return (f"vLLM-Ascend {version}'s P/D proxy cannot take an instance out while it serves (no safe "
            f"POST /instances/remove: {entry.get('source', 'support.yaml proxy_instances_api')}); restarting the "
            "proxy without it would cut every stream: restart the instance by hand (`deployctl up`), or use "
            "vLLM-Ascend 0.18 or later for recovery")
