"""`up | down | status | diff --target k8s`, and `diff` for hosts: thin commands over deployctl.k8s/deploy."""

from __future__ import annotations

from pathlib import Path

import typer

from deployctl.cli._output import confirm_changes, echo_json, esc
from deployctl.cli._output import run_console as _console
from deployctl.app.context import open_context


def _open(inventory: Path, workload: str | None = None):
    """The inventory's context; ``workload`` (--target lws) is kubernetes.workload over the file's own."""
    if workload is None:
        return open_context(inventory)
    from deployctl.io.inventory_file import load_inventory, with_workload

    return open_context(inventory, raw=with_workload(load_inventory(inventory), workload))


def _changes_table(changes, actions):
    from rich.table import Table

    t = Table(title="Release objects: rendered vs live", title_justify="left")
    for col in ("kind", "name", "change", "fields"):
        t.add_column(col)
    for c in changes:
        fields = ", ".join(c.fields[:4]) + (f" (+{len(c.fields) - 4})" if len(c.fields) > 4 else "")
        t.add_row(*(esc(v) for v in (c.kind, c.name, c.change, fields)))
    i = Table(title="Instances", title_justify="left")
    for col in ("instance", "pods", "why"):
        i.add_column(col)
    for a in actions:
        i.add_row(*(esc(v) for v in (a.instance, a.action, a.reason)))
    return t, i


class K8sReporter:
    """The pipeline's Reporter for --target k8s (stderr in JSON mode: stdout is the JSON)."""

    def __init__(self, json_mode: bool):
        self.con = _console(stderr=json_mode)

    def stage(self, name: str) -> None:
        self.con.print(f"[dim]· {esc(name)}[/]")

    def changes(self, changes) -> None:
        if changes.operation == "down":
            if changes.nothing_to_do:
                self.con.print(esc(f"release {changes.release} is not installed"))
            else:
                self.con.print(esc(f"helm uninstall {changes.release} (revision {changes.live_revision}): "
                                   f"{len(changes.objects)} object(s) of the release go"))
            return
        if changes.operation == "rollback":
            self.con.print(esc(f"rollback of {changes.release}: revision {changes.live_revision} (live) -> the "
                               f"objects of revision {changes.target_revision}"))
        for table in _changes_table(changes.objects, changes.instances):
            self.con.print(table)
        for c in changes.objects:
            for line in getattr(c, "lines", lambda: [])():
                self.con.print(esc(f"  {line}"))

    def step(self, message: str) -> None:
        self.con.print(esc(message))

    def failure(self, message: str) -> None:
        self.con.print(f"[red]{esc(message)}[/]")

    def verification(self, title: str, result) -> None:
        self.con.print(esc(title.replace("observed on the hosts", "read back from the API server")))
        for unit in result.units:
            line = f"  {unit.line()}"
            self.con.print(esc(line) if unit.ok else f"[red]{esc(line)}[/]")
        if not result.units:
            self.con.print(esc(f"  {result.summary()}"))


def _units(v) -> list[dict] | None:
    return None if v is None else [u.__dict__ for u in v.units]


def _result_doc(out, backend) -> dict:
    changes = out.changes.to_dict() if out.changes is not None else {}
    return {"status": out.status, "run": str(out.record.path), "failure": out.failure,
            "restored": backend.restored_to, "revision": backend.applied_revision,
            "target_revision": changes.get("target_revision"), "objects": changes.get("objects", []),
            "instances": changes.get("instances", []), "verification": _units(out.verification),
            "after_undo": _units(out.restored), "stages": [{"stage": n, "seconds": s} for n, s in out.stages]}


def _confirm_break_lock(inv, inventory: Path, yes: bool, reporter: K8sReporter) -> None:
    """--break-lock without -y: show who holds the lock and ask before removing it."""
    import sys

    from deployctl.backends.common.lockinfo import human_age
    from deployctl.backends.k8s.up import lock_holder

    held = lock_holder(inv, inventory.parent)
    if held is None:
        reporter.step("--break-lock: nobody holds the lock")
        return
    owner, stale = held
    who = owner.who() if owner else "an unreadable holder"
    since = f" since {owner.started} ({human_age(owner.age_s())} ago)" if owner else ""
    gone = f" (stale: no renewal for {human_age(owner.silent_s())})" if stale and owner else ""
    reporter.step(f"the lock is held by {who}{since}{gone}")
    if yes:
        return
    if not sys.stdin.isatty():
        reporter.failure("not a terminal: pass -y with --break-lock to remove the lock")
        raise typer.Exit(1)
    if not typer.confirm("Remove it (nobody else is deploying)?", default=False):
        reporter.failure("the lock was kept: nothing was changed")
        raise typer.Exit(1)


def _serving(ctx) -> str:
    from deployctl.core.render.processes import entry_url
    from deployctl.core.render.chart_values import fullname

    inv = ctx.inventory
    port = entry_url(ctx.plan).rsplit(":", 1)[-1]
    return f"Service {fullname(inv)}.{inv.kubernetes.namespace}:{port} (model {inv.model.served_name})"


def _print_failed(con, operation: str, out, backend) -> None:
    restored = backend.restored_to
    text = f"✗ {operation} {out.status}; the release was " + (
        f"rolled back to {restored}" if restored.startswith("revision") else restored or "left as it is")
    if out.restored is not None and not out.restored.ok:
        text += f" but is not healthy: {out.restored.summary()}"
    con.print(esc(f"{text}. Record: {out.record.path}"))


def run_up_k8s(inventory: Path, output: str, dry_run: bool, yes: bool, skip_checks: bool, ready_timeout: int,
               run_root: Path, break_lock: bool = False, strategy: str = "rolling", workload: str | None = None) -> None:
    """up --target k8s. Prints the changes, the steps, the read back and one result line (or, with --output
    json, {status, run, failure, restored, revision, objects, instances, verification, after_undo, stages});
    exit 0 (successful, nothing to do, dry run, declined) or 1 (failed, canceled, lock held)."""
    from deployctl.backends.k8s.up import K8sOptions, run_up

    ctx = _open(inventory, workload)
    inv = ctx.inventory
    reporter = K8sReporter(output == "json")
    if break_lock and not dry_run:
        _confirm_break_lock(inv, inventory, yes, reporter)
    opts = K8sOptions(dry_run=dry_run, yes=yes, skip_preflight=skip_checks, ready_timeout=ready_timeout,
                      run_root=run_root, inventory_dir=inventory.parent, break_lock=break_lock, strategy=strategy)
    out, backend = run_up(inv, opts, reporter, lambda changes: confirm_changes(reporter), plan=ctx.plan)
    if output == "json":
        echo_json(_result_doc(out, backend))
    else:
        con = reporter.con
        if out.status == "successful":
            con.print(esc(f"✓ serving through {_serving(ctx)}: helm revision {backend.applied_revision}; "
                          f"record: {out.record.path}"))
        elif out.status == "nothing-to-do":
            con.print("✓ nothing to do: the release matches the rendered manifests")
        elif out.status in ("dry-run", "declined"):
            con.print(f"{out.status}: nothing was changed")
        else:
            _print_failed(con, "up", out, backend)
    raise typer.Exit(out.exit_code)


def run_down_k8s(inventory: Path, output: str, break_lock: bool = False,
                 run_root: Path = Path(".deployctl"), workload: str | None = None) -> None:
    """down --target k8s: `helm uninstall`, then read back that no pod or workload is left. Prints
    "✓ release R in namespace N: uninstalled" (or "not installed"); JSON {status: uninstalled | not-installed |
    failed | canceled, run, failure, verification}. Exit 0, or 1 when something is left or the lock is held."""
    from deployctl.backends.k8s.up import K8sOptions, run_down

    inv = _open(inventory, workload).inventory
    reporter = K8sReporter(output == "json")
    if break_lock:
        _confirm_break_lock(inv, inventory, True, reporter)
    opts = K8sOptions(yes=True, run_root=run_root, inventory_dir=inventory.parent, break_lock=break_lock)
    out, _backend = run_down(inv, opts, reporter)
    status = {"successful": "uninstalled", "nothing-to-do": "not-installed"}.get(out.status, out.status)
    if output == "json":
        echo_json({"status": status, "run": str(out.record.path), "failure": out.failure,
                  "verification": _units(out.verification)})
    elif out.exit_code == 0:
        reporter.con.print(esc(f"✓ release {inv.helm_release} in namespace {inv.kubernetes.namespace}: "
                               f"{status.replace('-', ' ')}"))
    else:
        reporter.con.print(esc(f"✗ down {out.status}: {out.failure}. Record: {out.record.path}"))
    raise typer.Exit(out.exit_code)


def run_history_k8s(inventory: Path, output: str, workload: str | None = None) -> None:
    """history --target k8s: the release's helm revisions, oldest first, the live one marked, with the
    deployctl run and user that made each (deployctl.cli.history_output.print_history). Exit 0."""
    from deployctl.cli.history_output import print_history
    from deployctl.backends.k8s.history import k8s_history

    inv = _open(inventory, workload).inventory
    rows = k8s_history(inv, inventory.parent)
    print_history(rows, output, f"history of release {inv.helm_release} (namespace {inv.kubernetes.namespace})")


def run_rollback_k8s(inventory: Path, output: str, to: int | None, yes: bool, dry_run: bool, ready_timeout: int,
                     run_root: Path, break_lock: bool = False, workload: str | None = None) -> None:
    """rollback --target k8s [--to N]: the objects of revision N (default: the last revision before the live
    one that deployctl made and that served) vs live, `helm rollback`, restart the stale instances, read back.
    Prints like up; JSON as up's plus target_revision. Exit 0 / 1 (failed, lock held) / 2 (no such revision)."""
    from deployctl.backends.k8s.up import K8sOptions, run_rollback

    ctx = _open(inventory, workload)
    inv = ctx.inventory
    reporter = K8sReporter(output == "json")
    if break_lock and not dry_run:
        _confirm_break_lock(inv, inventory, yes, reporter)
    opts = K8sOptions(dry_run=dry_run, yes=yes, ready_timeout=ready_timeout, run_root=run_root,
                      inventory_dir=inventory.parent, break_lock=break_lock)
    out, backend = run_rollback(inv, to, opts, reporter, lambda changes: confirm_changes(reporter))
    if output == "json":
        echo_json(_result_doc(out, backend))
    else:
        con = reporter.con
        target = out.changes.target_revision if out.changes is not None else to
        if out.status == "successful":
            con.print(esc(f"✓ rolled back to revision {target} (now helm revision {backend.applied_revision}); "
                          f"serving through {_serving(ctx)}; record: {out.record.path}"))
        elif out.status == "nothing-to-do":
            con.print(esc(f"✓ nothing to do: what runs is revision {target}'s objects"))
        elif out.status in ("dry-run", "declined"):
            con.print(f"{out.status}: nothing was changed")
        else:
            _print_failed(con, "rollback", out, backend)
    raise typer.Exit(out.exit_code)


def run_status_k8s(inventory: Path, output: str, workload: str | None = None) -> None:
    from deployctl.backends.k8s.up import run_status

    inv = _open(inventory, workload).inventory
    prog, problems, degraded, gang, groups = run_status(inv, inventory.parent)
    if output == "json":
        echo_json({"degraded": degraded, "expected": prog.expected, "ready": prog.ready,
                  "pods": [p.__dict__ for p in prog.pods], "problems": problems, "gang": gang,
                  "workloads": groups})
    else:
        from rich.table import Table

        t = Table()
        for col in ("pod", "group", "node", "phase", "ready", "restarts", "problem"):
            t.add_column(col)
        for p in prog.pods:
            t.add_row(*(esc(v) for v in (p.name, p.group, p.node or "-", p.phase, "yes" if p.ready else "no",
                                         str(p.restarts), p.reason)))
        con = _console()
        con.print(t)
        for line in problems + groups + gang:
            con.print(esc(line))
        if not prog.expected:
            con.print("[red]✗ not deployed: no StatefulSet, LeaderWorkerSet or Deployment of this release[/]")
        else:
            con.print("[red]✗ degraded[/]" if degraded else "[green]✓ every pod is up and ready[/]")
            con.print(esc(f"  ready: {prog.line()}"))
    raise typer.Exit(1 if degraded else 0)


def run_diff(inventory: Path, output: str, target: str = "k8s", workload: str | None = None) -> None:
    """`diff --target k8s` (the hosts' diff is cli/deploy.py run_diff_hosts)."""
    from deployctl.backends.k8s.up import run_diff as diff_k8s

    ctx = _open(inventory, workload)
    changes, actions, scalers = diff_k8s(ctx.inventory, inventory.parent, plan=ctx.plan)
    if output == "json":
        echo_json({"objects": [c.__dict__ for c in changes],
                  "instances": [a.__dict__ for a in actions], "scalers": scalers})
    else:
        con = _console()
        for table in _changes_table(changes, actions):
            con.print(table)
        for line in scalers:           # `up` refuses while one exists
            con.print(esc(f"! {line}"))
