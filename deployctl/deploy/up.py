"""`deployctl up`: preflight -> render -> diff -> confirm -> apply (ansible) -> verify, all-or-nothing."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path

from deployctl.deploy.diff import diff_deployment
from deployctl.deploy.records import RunRecord
from deployctl.deploy.remote import container_names, read_deployed
from deployctl.deploy.revision import MANIFEST, cluster_dir, node_bundles
from deployctl.errors import ExecutionError
from deployctl.executors.ansible import PlaybookResult, TaskFailure, prepare, run_playbook, write_inventory
from deployctl.models.artifact import Artifact
from deployctl.models.deploy import ChangeSet
from deployctl.models.plan import Plan
from deployctl.preflight.run import ssh_targets


@dataclass
class UpOptions:
    dry_run: bool = False
    yes: bool = False
    skip_preflight: bool = False
    trust_new_hosts: bool = False
    ready_timeout: int = 1800          # MindIE loads hundreds of GB of weights: minutes, not seconds
    smoke_timeout: int = 120
    ssh_timeout: float = 60
    pull: bool = False                 # docker pull the image on every node before starting
    run_root: Path = Path(".deployctl")
    inventory_dir: Path = Path(".")


@dataclass
class UpOutcome:
    status: str                        # nothing-to-do, dry-run, declined, successful, failed, canceled
    record: RunRecord | None
    changes: ChangeSet | None = None
    failure: str = ""
    restored: list[str] = field(default_factory=list)


class Reporter:
    """What `up` tells the user while it runs (the CLI prints; tests collect)."""

    def changes(self, plan: Plan, changes: ChangeSet) -> None: ...
    def preflight(self, result) -> None: ...
    def step(self, message: str) -> None: ...
    def failure(self, message: str) -> None: ...


def _with_manifests(plan: Plan, artifacts: list[Artifact], run_id: str) -> list[Artifact]:
    """Each node folder gets .deployctl.json: revision id, run id and file digests (what `status` reads)."""
    out = list(artifacts)
    for node, bundle in node_bundles(plan, artifacts).items():
        out.append(Artifact(kind="manifest", path=f"{node}/{MANIFEST}",
                            content=bundle.manifest(plan.inventory.cluster.name, run_id), mode=0o640))
    return out


def _groups(plan: Plan, changes: ChangeSet) -> dict[str, list[str]]:
    moving = [h for h in changes.hosts if h.action != "keep"]
    masters = {i.master for i in plan.instances}
    ms = [h.node for h in changes.hosts if h.ms_action not in (None, "keep")]
    ms_node = [n.name for n in plan.nodes if n.runs_ms]
    # pd-split serves clients through the MindIE-MS coordinator only; colocated layouts through each
    # restarted instance master
    smoke = ms_node if ms_node and (moving or ms) else [h.node for h in moving if h.node in masters]
    return {"push": [h.node for h in changes.hosts if h.push],
            "start_masters": [h.node for h in moving if h.node in masters],
            "start_workers": [h.node for h in moving if h.node not in masters],
            "start_ms": ms,
            "smoke": smoke,
            "rollback": []}


def pack_revision(folder: Path, archive: Path) -> Path:
    """One tar of a node's revision folder (modes kept, owned by root): one transfer and one unpack per
    host instead of a copy round trip per file."""
    import tarfile

    def as_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    archive.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive, "w") as tar:
        for path in sorted(folder.iterdir()):
            tar.add(path, arcname=path.name, recursive=False, filter=as_root)
    return archive


def _hostvars(plan: Plan, changes: ChangeSet, deployed, rendered: Path, packs: Path) -> dict[str, dict]:
    ports = plan.ports
    out = {}
    for h in changes.hosts:
        node = plan.node(h.node)
        before = deployed[h.node]
        smoke_port = ports.coordinator if node.runs_ms else ports.http
        archive = pack_revision(rendered / h.node, packs / f"{h.node}.tar") if h.push else None
        out[h.node] = {"deployctl_archive": str(archive or ""), "deployctl_rev": h.rev,
                       "deployctl_ip": node.container_ip, "deployctl_smoke_port": smoke_port,
                       "deployctl_restore_rev": before.current_rev or "",
                       "deployctl_restore_ms": bool(node.runs_ms and before.current_rev)}
    return out


def apply_changes(plan: Plan, changes: ChangeSet, deployed, record: RunRecord, rendered: Path,
                  opts: UpOptions, reporter: Reporter, cancel: threading.Event,
                  first_failure: threading.Event) -> PlaybookResult:
    targets = ssh_targets(plan.inventory, opts.inventory_dir)
    engine, ms = container_names(plan)
    groups = _groups(plan, changes)
    common = {"deployctl_dir": cluster_dir(plan), "deployctl_engine": engine, "deployctl_ms_containers": list(ms),
              "deployctl_health_port": plan.ports.management, "deployctl_model": plan.inventory.model.served_name,
              "deployctl_ready_timeout": opts.ready_timeout, "deployctl_smoke_timeout": opts.smoke_timeout,
              "deployctl_purge": False, "deployctl_image": plan.inventory.engine.image,
              "deployctl_pull": opts.pull}
    private = record.path / "ansible"
    prepare(private)
    hostvars = _hostvars(plan, changes, deployed, rendered, record.path / "push")
    write_inventory(private / "inventory" / "hosts.yml", targets, hostvars, groups, common, opts.trust_new_hosts)

    def on_event(event: dict) -> None:
        data = event.get("event_data", {})
        if event.get("event") == "playbook_on_play_start":
            reporter.step(f"{data.get('play', '')}")
        elif event.get("event") == "runner_on_ok" and data.get("task", "").startswith(("Run start", "Wait for")):
            reporter.step(f"  {data.get('host')}: {data.get('task')} ✓")
        elif event.get("event") in ("runner_on_failed", "runner_on_unreachable") \
                and not data.get("ignore_errors"):
            reporter.failure(f"  {data.get('host')}: {data.get('task')} FAILED")
            if not first_failure.is_set():   # name the host, its ranks and its last log lines at once
                res = data.get("res", {})
                text = "\n".join(x for x in (res.get("stdout", ""), res.get("stderr", "")) if x) or res.get("msg", "")
                first = PlaybookResult(status="failed", rc=1)
                first.failures.append(TaskFailure(data.get("host", ""), data.get("task", ""), text))
                reporter.failure(f"✗ {describe_failure(plan, first)}")
            # all-or-nothing: do not wait for the other hosts' readiness loops (HCCL would only time out
            # there too); stop the playbook now and roll back
            first_failure.set()
            cancel.set()

    return run_playbook(private, "up.yml", forks=len(targets), on_event=on_event, cancel=cancel, ident="up")


def rollback(plan: Plan, record: RunRecord, hosts: list[str], opts: UpOptions) -> PlaybookResult:
    """Stop what this run started; restart the revision that ran before (where there was one)."""
    import yaml

    inv_path = record.path / "ansible" / "inventory" / "hosts.yml"
    doc = yaml.safe_load(inv_path.read_text())
    doc["all"]["children"]["rollback"] = {"hosts": {h: {} for h in hosts}}
    inv_path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return run_playbook(record.path / "ansible", "rollback.yml", forks=len(hosts) or 1, ident="rollback")


def describe_failure(plan: Plan, result: PlaybookResult) -> str:
    if not result.failures:
        return f"ansible-runner ended {result.status} (rc {result.rc})"
    first = result.failures[0]
    node = plan.node(first.host) if any(n.name == first.host for n in plan.nodes) else None
    where = first.host
    if node is not None:
        inst = plan.instance(node.instance)
        ranks = [r.rank for r in inst.ranks if r.node == node.name]
        where = f"{first.host} ({node.instance} instance, ranks {ranks[0]}-{ranks[-1]})"
    detail = "\n".join(f"    {line}" for line in first.message.splitlines()[-25:])
    return f"{where}: {first.task} failed\n{detail}"


def _own_engine_findings(findings, deployed, engine: str):
    """Preflight before a re-deploy: our own running engine holds the ports and the NPU memory."""
    running = {n for n, s in deployed.items() if s.containers.get(engine) and
               s.containers[engine].status == "running"}
    return [f for f in findings if not (f.rule in ("ports-free", "npu-busy") and f.host in running)]


def run_up(inv, opts: UpOptions, reporter: Reporter, confirm, cancel: threading.Event | None = None) -> UpOutcome:
    """The whole `up`. Raises ExecutionError (exit 1) when hosts cannot be read or preflight fails."""
    from deployctl.executors.ssh import SshExecutor
    from deployctl.planning.plan import plan_layout
    from deployctl.render import render_artifacts
    from deployctl.render.write import write_tree

    cancel = cancel or threading.Event()
    plan = plan_layout(inv)
    record = RunRecord.create(opts.run_root, "up")
    record.status("running")
    engine, ms = container_names(plan)
    targets = ssh_targets(inv, opts.inventory_dir)
    executor = SshExecutor(trust_new_hosts=opts.trust_new_hosts)
    try:
        try:
            deployed = read_deployed_or_fail(plan, targets, executor, opts.ssh_timeout)
        except ExecutionError:
            record.finish("failed", 1)
            raise
        if not opts.skip_preflight:
            from deployctl.preflight.run import run_preflight

            result = run_preflight(inv, opts.inventory_dir, executor, timeout=opts.ssh_timeout)
            result.findings = _own_engine_findings(result.findings, deployed, engine)
            record.write("preflight.json", result.to_file(inv).model_dump_json(indent=2))
            reporter.preflight(result)
            if result.failed:
                record.finish("failed", 1)
                raise ExecutionError("preflight failed: nothing was changed",
                                     hint="fix the FAIL findings above, or pass --skip-preflight")
    finally:
        executor.close()
    artifacts = _with_manifests(plan, render_artifacts(plan), record.run_id)
    rendered = record.path / "rendered"
    write_tree(rendered, artifacts, force=True)
    bundles = node_bundles(plan, artifacts)
    changes = diff_deployment(plan, bundles, deployed, engine, ms)
    record.write_json("changes.json", changes.model_dump())
    reporter.changes(plan, changes)
    if changes.nothing_to_do:
        record.finish("successful", 0)
        return UpOutcome("nothing-to-do", record, changes)
    if opts.dry_run:
        record.finish("successful", 0)
        return UpOutcome("dry-run", record, changes)
    if not opts.yes and not confirm(changes):
        record.finish("canceled", 0)
        return UpOutcome("declined", record, changes)
    first_failure = threading.Event()
    interrupted = False
    try:
        result = apply_changes(plan, changes, deployed, record, rendered, opts, reporter, cancel, first_failure)
    except KeyboardInterrupt:
        cancel.set()
        interrupted = True
        result = PlaybookResult(status="canceled", rc=130)
    if result.status == "canceled" and not first_failure.is_set():
        interrupted = True
    moved = [h.node for h in changes.hosts if h.action != "keep" or h.ms_action not in (None, "keep")]
    if result.ok:
        record.finish("successful", 0)
        return UpOutcome("successful", record, changes)
    failure = "interrupted" if interrupted else describe_failure(plan, result)
    if interrupted:
        reporter.failure(f"✗ {failure}")
    for f in result.failures:
        record.host_log(f.host, "failure.txt", f"{f.task}\n{f.message}\n")
    started = moved   # every node of a moving instance was (or may have been) stopped: restore them all
    reporter.step(f"rolling back {', '.join(started)}")
    rb = rollback(plan, record, started, opts)
    broken = {f.host for f in rb.failures}
    restored = [h.node for h in changes.hosts if h.node in started and deployed[h.node].current_rev
                and h.node not in broken] if rb.status == "successful" or broken else []
    status = "canceled" if interrupted else "failed"
    record.finish(status, 1)
    if not rb.ok:
        failure += f"\nrollback also failed: {describe_failure(plan, rb)}"
    return UpOutcome(status, record, changes, failure, restored)


def read_deployed_or_fail(plan: Plan, targets, executor, timeout: float):
    """What every host runs; ExecutionError naming each host that could not be read."""
    deployed = read_deployed(plan, targets, executor, cluster_dir(plan), timeout=timeout)
    down = {n: s.error for n, s in deployed.items() if s.error}
    if down:
        raise ExecutionError(f"cannot read the deployment on {len(down)} host(s)",
                             problems=[_problem(n, e) for n, e in down.items()],
                             hint="fix SSH to these hosts (deployctl preflight shows why)")
    return deployed


def _problem(node: str, error: str):
    from deployctl.errors import Problem

    return Problem(message=error, path=node)


def host_changes(inv, inventory_dir: Path, ssh_timeout: float = 60) -> ChangeSet:
    """`deployctl diff`: what `up` would change on each host (read-only: SSH reads, no preflight)."""
    from deployctl.executors.ssh import SshExecutor
    from deployctl.planning.plan import plan_layout
    from deployctl.render import render_artifacts

    plan = plan_layout(inv)
    engine, ms = container_names(plan)
    executor = SshExecutor()
    try:
        deployed = read_deployed_or_fail(plan, ssh_targets(inv, inventory_dir), executor, ssh_timeout)
    finally:
        executor.close()
    return diff_deployment(plan, node_bundles(plan, render_artifacts(plan)), deployed, engine, ms)
