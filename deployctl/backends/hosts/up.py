"""`deployctl up | rollback | down` on the hosts: the hosts backend run through the deploy pipeline.

This module wires the real effects (paramiko executor, ansible-runner, the preflight it is handed) into
deployctl.backends.hosts.hosts.HostsBackend and runs deployctl.backends.common.pipeline.run_pipeline.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable, Protocol

from deployctl.backends.hosts.hosts import HostsBackend, UpOptions, host_targets_abs  # noqa: F401 (UpOptions: the CLI's)
from deployctl.backends.hosts.remote import container_names
from deployctl.backends.hosts.runstate import Runner
from deployctl.backends.common.pipeline import Options, Outcome, Reporter, run_pipeline
from deployctl.io.executor import Executor
from deployctl.io.records import RunRecord
from deployctl.backends.hosts.revision import node_bundles
from deployctl.core.errors import ExecutionError
from deployctl.core.models.deploy import ChangeSet, DeployedState
from deployctl.core.models.inventory import Inventory
from deployctl.core.models.plan import Plan


class UpReporter(Reporter, Protocol):
    """The pipeline's reporter, which also shows the preflight `up` runs first (cli.deploy.CliReporter)."""

    def preflight(self, result: Any) -> None: ...


def _own_engine_findings(findings, deployed, engine: str):
    """Preflight before a re-deploy: our own running engine holds the ports and the NPU memory."""
    running = {n for n, s in deployed.items() if s.containers.get(engine) and
               s.containers[engine].status == "running"}
    return [f for f in findings if not (f.rule in ("ports-free", "npu-busy") and f.host in running)]


def _preflight(inv: Inventory, opts: UpOptions, executor: Executor, record: RunRecord, reporter: UpReporter,
               engine: str, plan: Plan, probe: Callable[..., Any] | None) -> Callable[[dict[str, DeployedState]], None]:
    def run(observed: dict[str, DeployedState]) -> None:
        if probe is None:
            raise ExecutionError("this up was given no preflight to run: nothing was changed",
                                 hint="pass --skip-preflight, or run it from the deployctl command")
        result = probe(inv, opts.inventory_dir, executor, timeout=opts.ssh_timeout, layout=plan)
        result.findings = _own_engine_findings(result.findings, observed, engine)
        record.write("preflight.json", result.to_file(inv).model_dump_json(indent=2))
        reporter.preflight(result)
        if result.failed:
            raise ExecutionError("preflight failed: nothing was changed",
                                 hint="fix the FAIL findings above, or pass --skip-preflight")
    return run


def run_hosts_operation(operation: str, inv: Inventory, opts: UpOptions, reporter: UpReporter,
                        confirm: Callable[[Any], bool], cancel: threading.Event | None = None, *,
                        executor: Executor, runner: Runner | None = None, plan: Plan | None = None,
                        preflight: Callable[..., Any] | None = None) -> Outcome:
    """up, rollback or down on the hosts over ``executor`` (the command's, app/executors.py; closed by it).
    ``runner`` defaults to ansible-runner; ``plan``
    is the operation's (its context's), else planned here; ``preflight``: the probe `up` runs first (the feature
    above the backends, handed down by the command: features.preflight.run.run_preflight)."""
    from deployctl.io.ansible import run_playbook
    from deployctl.core.sizing.planner import plan_layout

    plan = plan if plan is not None else plan_layout(inv)
    record = RunRecord.create(opts.run_root, operation)
    engine, _ms = container_names(plan)
    backend = HostsBackend(operation, inv, plan, host_targets_abs(inv, opts.inventory_dir), executor,
                           runner or run_playbook, record, opts, reporter,
                           _preflight(inv, opts, executor, record, reporter, engine, plan, preflight))
    popts = Options(dry_run=opts.dry_run, yes=opts.yes or operation == "down",
                    skip_preflight=opts.skip_preflight or operation != "up")
    return run_pipeline(backend, record, popts, reporter, confirm, cancel)


def run_up(inv: Inventory, opts: UpOptions, reporter: UpReporter, confirm: Callable[[Any], bool],
           cancel: threading.Event | None = None, preflight: Callable[..., Any] | None = None, *,
           executor: Executor) -> Outcome:
    return run_hosts_operation("up", inv, opts, reporter, confirm, cancel, preflight=preflight, executor=executor)


def read_state(inv: Inventory, inventory_dir: Path, ssh_timeout: float = 60, health: bool = False, *,
               executor: Executor, plan: Plan | None = None) -> tuple[Plan, dict[str, DeployedState]]:
    """(plan, states) for the read-only commands: status, diff, history (no lock, no change), over the command's
    ``executor``; ``plan``: the operation's, else planned here."""
    from deployctl.backends.hosts.remote import read_deployed
    from deployctl.backends.hosts.revision import cluster_dir
    from deployctl.core.sizing.planner import plan_layout

    plan = plan if plan is not None else plan_layout(inv)
    states = read_deployed(plan, host_targets_abs(inv, inventory_dir), executor, cluster_dir(plan),
                           health=health, timeout=ssh_timeout)
    return plan, states


def host_changes(inv: Inventory, inventory_dir: Path, ssh_timeout: float = 60, plan: Plan | None = None, *,
                 executor: Executor) -> tuple[Plan, ChangeSet, dict[str, dict[str, list[str]]]]:
    """`deployctl diff`: what `up` would change on each host (read-only: SSH reads, no preflight), and
    the key-level changes of every changed file (read from the host's current revision)."""
    from deployctl.backends.hosts.diff import diff_deployment
    from deployctl.backends.hosts.remote import container_names
    from deployctl.core.render import render_artifacts

    from deployctl.backends.hosts.hosts import require_readable

    plan, states = read_state(inv, inventory_dir, ssh_timeout, executor=executor, plan=plan)   # one connection per
    require_readable(states)                                                                  # host for both reads
    engine, ms = container_names(plan)
    bundles = node_bundles(plan, render_artifacts(plan))
    changes = diff_deployment(plan, bundles, states, engine, ms)
    keys = _key_changes(inv, inventory_dir, plan, changes, bundles, ssh_timeout, executor)
    return plan, changes, keys


def _key_changes(inv, inventory_dir, plan, changes, bundles, ssh_timeout, executor) -> dict[str, dict[str, list[str]]]:
    """node -> file -> ['key: old → new', ...] for every changed file of a deployed node."""
    from deployctl.core.filediff import file_changes
    from deployctl.backends.hosts.revision import cluster_dir
    from deployctl.io.fanout import fan_out

    wanted = {h.node: [f.path for f in h.files if f.kind in ("changed", "removed")]
              for h in changes.hosts if h.current_rev}
    wanted = {n: files for n, files in wanted.items() if files}
    if not wanted:
        return {}
    cdir = cluster_dir(plan)
    targets = [t for t in host_targets_abs(inv, inventory_dir) if t.name in wanted]
    runs = fan_out(executor, targets, lambda t: [(f"file.{i}", ["cat", f"{cdir}/current/{name}"])
                                                 for i, name in enumerate(wanted[t.name])],
                   ssh_timeout, measure_clock=False)
    from deployctl.core.input.secrets import declared

    secret_names = declared(inv)
    out: dict[str, dict[str, list[str]]] = {}
    for node, files in wanted.items():
        run = runs[node]
        for i, name in enumerate(files):
            res = run.outputs.get(f"file.{i}")
            old = res.text.encode() if res and res.rc == 0 else None
            art = bundles[node].files.get(name)
            diff = file_changes(name, old, art.content if art else None, secret_names=secret_names)
            out.setdefault(node, {})[name] = [str(c) for c in (diff or [])]
    return out
