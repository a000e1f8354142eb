"""`deployctl logs`: collect engine logs from every host (in parallel) into a run record."""

from __future__ import annotations

from pathlib import Path

from deployctl.deploy.records import RunRecord
from deployctl.deploy.remote import container_names, has_router
from deployctl.errors import UsageError
from deployctl.preflight.fanout import fan_out
from deployctl.preflight.run import ssh_targets


def collect_logs(inv, inventory_dir: Path, run_root: Path, hosts: list[str] | None = None,
                 since: str | None = None, tail: int = 200) -> tuple[dict[str, dict[str, str]], RunRecord]:
    from deployctl.executors.ssh import SshExecutor
    from deployctl.planning.plan import plan_layout

    plan = plan_layout(inv)
    engine, ms = container_names(plan)
    targets = ssh_targets(inv, inventory_dir)
    if hosts:
        unknown = sorted(set(hosts) - {t.name for t in targets})
        if unknown:
            raise UsageError(f"unknown host(s): {', '.join(unknown)}",
                             hint=f"known: {', '.join(t.name for t in targets)}")
        targets = [t for t in targets if t.name in hosts]

    def commands(t):
        names = [engine] + (list(ms) if has_router(plan, t.name) else [])
        extra = ["--since", since] if since else []
        return [(f"log.{i}", ["docker", "logs", "--tail", str(tail), *extra, n]) for i, n in enumerate(names)]

    record = RunRecord.create(run_root, "logs")
    executor = SshExecutor()
    try:
        runs = fan_out(executor, targets, commands, timeout=60, measure_clock=False)
    finally:
        executor.close()
    logs: dict[str, dict[str, str]] = {}
    for name, run in runs.items():
        names = [engine] + (list(ms) if has_router(plan, name) else [])
        if run.error:
            logs[name] = {"error": run.error.message}
            continue
        logs[name] = {}
        for i, cname in enumerate(names):
            out = run.outputs.get(f"log.{i}")
            text = out.text if out else ""
            logs[name][cname] = text
            record.host_log(name, f"{cname}.log", text)
    record.finish("successful", 0)
    return logs, record
