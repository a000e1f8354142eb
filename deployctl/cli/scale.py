"""`deployctl scale`: the instance count each role should have from its measured load (shadow mode: it
recommends, changes nothing). deployctl.features.scale does the work; this prints it."""

from __future__ import annotations

import time
from pathlib import Path

import typer

from deployctl.cli._output import echo_json, esc
from deployctl.cli._output import run_console as _console


def run_scale(inventory: Path, output: str, run_root: Path, interval: float | None, rounds: int) -> None:
    from deployctl.app.context import open_context
    from deployctl.app.executors import ssh
    from deployctl.core.scaling.capacity import per_instance
    from deployctl.core.sizing.estimate import default_workload, estimate_plan
    from deployctl.features.scale.read import read_samples
    from deployctl.features.scale.shadow import Shadow
    from deployctl.io.records import RunRecord

    ctx = open_context(inventory, "deployed")
    plan, policy = ctx.plan, ctx.inventory.deploy.scaling
    if interval is not None:
        policy = policy.model_copy(update={"interval_s": interval})
    capacity = per_instance(estimate_plan(plan, default_workload(plan)))
    record = RunRecord.create(run_root, "scale")
    record.status("running")
    con = _console()
    if output != "json":
        con.print(esc(f"shadow mode: recommends, changes nothing; every {policy.interval_s:g} s, record "
                      f"{record.path}/events.jsonl"))
        unscaled = [r for r in dict.fromkeys(i.role for i in plan.instances) if r not in policy.roles]
        if unscaled:
            con.print(esc(f"not scaled (no deploy.scaling.roles bounds): {', '.join(unscaled)}"))
    with ssh() as executor:
        hosts = {t.name: t for t in ctx.targets}
        shadow = Shadow(plan, policy, capacity, lambda: read_samples(plan, executor, hosts, time.monotonic),
                        record=record)
        try:
            for n in range(rounds):
                if n:
                    time.sleep(policy.interval_s)
                for d in shadow.round():
                    if output == "json":
                        echo_json({"round": shadow.rounds, **d.as_dict()}, indent=None, default=str)
                    else:
                        mark = {"up": "▲", "down": "▼"}.get(d.action, "·")
                        con.print(esc(f"{mark} {d.role}: {d.current} -> {d.desired} ({d.action}): {d.reason}"))
        except KeyboardInterrupt:
            pass
    record.finish("successful", 0)
    raise typer.Exit(0)
