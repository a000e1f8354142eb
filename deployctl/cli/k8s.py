"""`up | down | status | diff --target k8s`, and `diff` for hosts: thin commands over deployctl.k8s/deploy."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from deployctl.cli._output import confirm_changes, esc
from deployctl.cli._output import run_console as _console


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
    def __init__(self, json_mode: bool):
        self.con = _console(stderr=json_mode)

    def changes(self, changes, actions) -> None:
        for table in _changes_table(changes, actions):
            self.con.print(table)

    def step(self, message: str) -> None:
        self.con.print(esc(message))

    def failure(self, message: str) -> None:
        self.con.print(f"[red]{esc(message)}[/]")


def run_up_k8s(inventory: Path, output: str, dry_run: bool, yes: bool, skip_checks: bool, ready_timeout: int,
               run_root: Path) -> None:
    from deployctl.cli.commands import load_and_validate
    from deployctl.k8s.up import K8sOptions, run_up
    from deployctl.k8s.values import fullname

    inv = load_and_validate(inventory)
    reporter = K8sReporter(output == "json")
    opts = K8sOptions(dry_run=dry_run, yes=yes, skip_checks=skip_checks, ready_timeout=ready_timeout,
                      run_root=run_root, inventory_dir=inventory.parent)

    out = run_up(inv, opts, reporter, lambda changes: confirm_changes(reporter))
    if output == "json":
        typer.echo(json.dumps({"status": out.status, "run": str(out.record.path), "failure": out.failure,
                               "restored": out.restored, "objects": [c.__dict__ for c in out.changes],
                               "instances": [a.__dict__ for a in out.actions]}, indent=2))
    else:
        con = reporter.con
        k = inv.kubernetes
        if out.status == "successful":
            port = inv.engine.ports.coordinator if inv.layout.prefill is not None else inv.engine.ports.http
            con.print(esc(f"✓ serving through Service {fullname(inv)}.{k.namespace}:{port} (model "
                          f"{inv.model.served_name}); record: {out.record.path}"))
        elif out.status == "nothing-to-do":
            con.print("✓ nothing to do: the release matches the rendered manifests")
        elif out.status in ("dry-run", "declined"):
            con.print(f"{out.status}: nothing was changed")
        else:
            con.print(esc(f"✗ up failed; the release was {'rolled back to ' if out.restored.startswith('rev') else ''}"
                          f"{out.restored}. Record: {out.record.path}"))
    raise typer.Exit(0 if out.status in ("successful", "nothing-to-do", "dry-run", "declined") else 1)


def run_down_k8s(inventory: Path, output: str) -> None:
    from deployctl.cli.commands import load_and_validate
    from deployctl.k8s.up import run_down

    inv = load_and_validate(inventory)
    result = run_down(inv, inventory.parent)
    if output == "json":
        typer.echo(json.dumps({"status": result}, indent=2))
    else:
        _console().print(esc(f"✓ release {inv.helm_release} in namespace {inv.kubernetes.namespace}: "
                             f"{result.replace('-', ' ')}"))


def run_status_k8s(inventory: Path, output: str) -> None:
    from deployctl.cli.commands import load_and_validate
    from deployctl.k8s.up import run_status

    inv = load_and_validate(inventory)
    prog, problems, degraded = run_status(inv, inventory.parent)
    if output == "json":
        typer.echo(json.dumps({"degraded": degraded, "expected": prog.expected, "ready": prog.ready,
                               "pods": [p.__dict__ for p in prog.pods], "problems": problems}, indent=2))
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
        for line in problems:
            con.print(esc(line))
        if not prog.expected:
            con.print("[red]✗ not deployed: no StatefulSet or Deployment of this release[/]")
        else:
            con.print("[red]✗ degraded[/]" if degraded else "[green]✓ every pod is up and ready[/]")
            con.print(esc(f"  ready: {prog.line()}"))
    raise typer.Exit(1 if degraded else 0)


def run_diff(inventory: Path, output: str, target: str) -> None:
    from deployctl.cli.commands import load_and_validate

    inv = load_and_validate(inventory)
    if target == "k8s":
        from deployctl.k8s.up import run_diff as diff_k8s

        changes, actions = diff_k8s(inv, inventory.parent)
        if output == "json":
            typer.echo(json.dumps({"objects": [c.__dict__ for c in changes],
                                   "instances": [a.__dict__ for a in actions]}, indent=2))
        else:
            con = _console()
            for table in _changes_table(changes, actions):
                con.print(table)
        return
    from deployctl.cli.deploy import CliReporter
    from deployctl.deploy.up import host_changes

    changes = host_changes(inv, inventory.parent)
    if output == "json":
        typer.echo(json.dumps(changes.model_dump(), indent=2))
    else:
        CliReporter(False).changes(None, changes)
