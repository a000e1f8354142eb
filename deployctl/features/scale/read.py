"""The engines' load, read on their hosts in one SSH round trip per node: every process the engine serves metrics
from (EngineSpec.metrics_targets) answers the engine-load fact with its own metric names."""

from __future__ import annotations

from typing import Callable

from deployctl.core.scaling.readings import Sample
from deployctl.io.executor import fan_out_width
from deployctl.io.fanout import fan_out
from deployctl.probes.engine_load import ENGINE_LOAD, EngineLoad

ROUND_TIMEOUT = 15.0


def read_samples(plan, executor, targets: dict, clock: Callable[[], float]) -> list[Sample]:
    """One Sample per metrics target of the plan; a node that did not answer gives error samples for its
    processes (they count as not answering, never as idle)."""
    names = plan.engine_spec.metric_names
    per_node: dict[str, list] = {}
    for t in plan.engine_spec.metrics_targets(plan):
        per_node.setdefault(t.node, []).append(t)
    if not per_node:
        return []

    def commands(host) -> list[tuple[str, list[str]]]:
        return [(f"s.{i}", ENGINE_LOAD.command(f"http://{t.address}/metrics", names.running, names.waiting,
                                               names.kv_usage, names.generated, names.prompt, names.ttft,
                                               names.tpot))
                for i, t in enumerate(per_node[host.name])]

    runs = fan_out(executor, [targets[n] for n in per_node], commands, ROUND_TIMEOUT, fan_out_width(), measure_clock=False)
    at = clock()
    out: list[Sample] = []
    for node, procs in per_node.items():
        run = runs[node]
        for i, t in enumerate(procs):
            res = run.outputs.get(f"s.{i}") if run.error is None else None
            load = EngineLoad(error=run.error.message[:80] if run.error is not None else "no answer")
            if res is not None:
                try:
                    load = ENGINE_LOAD.parse(res.text, names.running, names.waiting, names.kv_usage,
                                             names.generated, names.prompt, names.ttft, names.tpot)
                except ValueError as exc:      # a host's answer never stops the reading: it is unreadable
                    load = EngineLoad(error=f"unreadable metrics: {str(exc)[:80]}")
            out.append(Sample(target=t.address, instance=t.instance, role=t.role, at=at, running=load.running,
                              waiting=load.waiting, kv_usage=load.kv_usage, generated=load.generated,
                              prompt=load.prompt, ttft=(load.ttft_sum, load.ttft_count),
                              tpot=(load.tpot_sum, load.tpot_count), error=load.error))
    return out
