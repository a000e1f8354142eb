"""`deployctl up | down | status | logs`: thin commands over deployctl.deploy."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from deployctl.cli._output import confirm_changes, esc
from deployctl.cli._output import run_console as _console


class CliReporter:
    def __init__(self, json_mode: bool):
        self.json_mode = json_mode
        self.con = _console(stderr=json_mode)

    def preflight(self, result) -> None:
        fails = [f for f in result.findings if f.severity == "FAIL"]
        warns = [f for f in result.findings if f.severity == "WARN"]
        self.con.print(f"preflight: {len(result.facts)} hosts, {len(fails)} FAIL, {len(warns)} WARN")
        for f in fails + warns:
            where = f.host or "all" if f.device is None else f"{f.host} device {f.device}"
            self.con.print(esc(f"  {f.severity} {f.rule} {where}: {f.message} ({f.hint})"))

    def changes(self, plan, changes) -> None:
        from rich.table import Table

        t = Table(title="What up will change", title_justify="left")
        for col in ("node", "instance", "revision", "files", "engine", "why"):
            t.add_column(col)
        for h in changes.hosts:
            kinds = {}
            for f in h.files:
                kinds[f.kind] = kinds.get(f.kind, 0) + 1
            files = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
            rev = h.rev if h.current_rev == h.rev else f"{h.current_rev or '-'} -> {h.rev}"
            action = h.action + (f" (+ MindIE-MS {h.ms_action})" if h.ms_action else "")
            t.add_row(*(esc(v) for v in (h.node, h.instance, rev, files, action, h.reason)))
        self.con.print(t)
        for h in changes.hosts:
            changed = [f.path for f in h.files if f.kind in ("new", "changed", "removed")]
            if changed and h.current_rev:
                self.con.print(esc(f"  {h.node}: {', '.join(changed)} differ from the deployed revision"))

    def step(self, message: str) -> None:
        self.con.print(esc(message))

    def failure(self, message: str) -> None:
        self.con.print(f"[red]{esc(message)}[/]")


def run_up(inventory: Path, output: str, dry_run: bool, yes: bool, skip_preflight: bool, trust_new_hosts: bool,
           ready_timeout: int, run_root: Path, pull: bool = False) -> None:
    from deployctl.cli.commands import load_and_validate
    from deployctl.deploy.up import UpOptions, run_up as up

    inv = load_and_validate(inventory)
    reporter = CliReporter(output == "json")
    opts = UpOptions(dry_run=dry_run, yes=yes, skip_preflight=skip_preflight, trust_new_hosts=trust_new_hosts,
                     ready_timeout=ready_timeout, run_root=run_root, inventory_dir=inventory.parent, pull=pull)

    outcome = up(inv, opts, reporter, lambda changes: confirm_changes(reporter))
    plan_master = inv.node(inv.layout.prefill.nodes[0]) if inv.layout.prefill else inv.nodes[0]
    doc = {"status": outcome.status, "run": str(outcome.record.path) if outcome.record else None,
           "failure": outcome.failure, "restored": outcome.restored,
           "changes": outcome.changes.model_dump() if outcome.changes else None}
    if output == "json":
        typer.echo(json.dumps(doc, indent=2))
    else:
        con = reporter.con
        if outcome.status == "successful":
            p = inv.engine.ports
            # pd-split: clients talk to the MindIE-MS coordinator on the prefill master
            port = p.coordinator if inv.layout.prefill is not None else p.http
            con.print(esc(f"✓ serving: http://{plan_master.server_ip}:{port}/v1/chat/completions "
                          f"(model {inv.model.served_name}); record: {outcome.record.path}"))
        elif outcome.status == "nothing-to-do":
            con.print("✓ nothing to do: every node runs the rendered revision")
        elif outcome.status in ("dry-run", "declined"):
            con.print(f"{outcome.status}: nothing was changed")
        else:
            if "rollback also failed" in outcome.failure:
                con.print(esc("✗ " + outcome.failure.split("\n")[-1]))
                con.print(esc(f"✗ up {outcome.status}; the rollback failed too: previous revision restored on: "
                              f"{', '.join(outcome.restored) or 'no node'}"))
            else:
                con.print(esc(f"✗ up {outcome.status}; previous revision restored on: "
                              f"{', '.join(outcome.restored) or 'none (nothing ran before)'}"))
            con.print(esc(f"Logs: {outcome.record.path}"))
    raise typer.Exit(0 if outcome.status in ("successful", "nothing-to-do", "dry-run", "declined") else 1)


def run_down(inventory: Path, output: str, purge: bool, run_root: Path) -> None:
    from deployctl.cli.commands import load_and_validate
    from deployctl.deploy.down import down

    inv = load_and_validate(inventory)
    result, record = down(inv, purge, run_root, inventory.parent)
    if output == "json":
        typer.echo(json.dumps({"status": result.status, "run": str(record.path),
                               "failures": [f.__dict__ for f in result.failures]}, indent=2))
    else:
        con = _console()
        for f in result.failures:
            con.print(esc(f"✗ {f.host}: {f.task}: {f.message}"))
        con.print(esc(f"{'✓' if result.ok else '✗'} down {'(files purged) ' if purge else ''}on "
                      f"{len(inv.nodes)} node(s); record: {record.path}"))
    raise typer.Exit(0 if result.ok else 1)


def run_status(inventory: Path, output: str) -> None:
    from deployctl.cli.commands import load_and_validate
    from deployctl.deploy.status import cluster_status

    inv = load_and_validate(inventory)
    rows, degraded = cluster_status(inv, inventory.parent)
    if output == "json":
        typer.echo(json.dumps({"degraded": degraded, "nodes": rows}, indent=2))
    else:
        from rich.table import Table

        t = Table()
        for col in ("node", "instance", "ranks", "revision", "engine", "ready", "problem"):
            t.add_column(col)
        for r in rows:
            ready = {True: "yes", False: "no", None: "-"}[r["ready"]]
            t.add_row(*(esc(v) for v in (r["node"], r["instance"], r["ranks"], r["revision"] or "-",
                                         r["engine"], ready, r["problem"])))
        con = _console()
        con.print(t)
        con.print("[red]✗ degraded[/]" if degraded else "[green]✓ every rank is up and ready[/]")
    raise typer.Exit(1 if degraded else 0)


def run_logs(inventory: Path, output: str, host: list[str], since: str | None, tail: int, run_root: Path) -> None:
    from deployctl.cli.commands import load_and_validate
    from deployctl.deploy.logs import collect_logs

    inv = load_and_validate(inventory)
    logs, record = collect_logs(inv, inventory.parent, run_root, hosts=host, since=since, tail=tail)
    if output == "json":
        typer.echo(json.dumps({"run": str(record.path), "logs": logs}, indent=2))
        return
    con = _console()
    for node, containers in logs.items():
        for name, text in containers.items():
            con.print(f"[bold]== {esc(node)} {esc(name)}[/]")
            for line in text.splitlines()[-min(tail, 20):]:
                con.print(esc(line))
    con.print(esc(f"full logs saved under {record.path}/hosts/"))
