"""`deployctl down`: stop and remove this deployment's containers on every host (files kept unless purge)."""

from __future__ import annotations

from pathlib import Path

from deployctl.deploy.records import RunRecord
from deployctl.deploy.remote import container_names
from deployctl.deploy.revision import cluster_dir
from deployctl.executors.ansible import PlaybookResult, prepare, run_playbook, write_inventory
from deployctl.preflight.run import ssh_targets


def down(inv, purge: bool, run_root: Path, inventory_dir: Path) -> tuple[PlaybookResult, RunRecord]:
    from deployctl.planning.plan import plan_layout

    plan = plan_layout(inv)
    record = RunRecord.create(run_root, "down")
    record.status("running")
    engine, ms = container_names(plan)
    targets = ssh_targets(inv, inventory_dir)
    private = record.path / "ansible"
    prepare(private)
    common = {"deployctl_dir": cluster_dir(plan), "deployctl_engine": engine,
              "deployctl_ms_containers": list(ms), "deployctl_purge": purge}
    write_inventory(private / "inventory" / "hosts.yml", targets, {}, {}, common)
    result = run_playbook(private, "down.yml", forks=len(targets), ident="down")
    record.finish("successful" if result.ok else "failed", 0 if result.ok else 1)
    return result, record
