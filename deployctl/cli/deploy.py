"""`deployctl up | rollback | down | status | logs` on the hosts: thin commands over deployctl.backends.hosts."""

from __future__ import annotations

from pathlib import Path

import typer

from deployctl.cli._output import confirm_changes, echo_json, esc
from deployctl.cli._output import run_console as _console
from deployctl.app.context import open_context


class CliReporter:
    """What the pipeline tells the user while it runs (stderr with --output json)."""

    def __init__(self, json_mode: bool, operation: str = "up"):
        self.json_mode, self.operation = json_mode, operation
        self.con = _console(stderr=json_mode)

    def stage(self, name: str) -> None:
        if name in ("lock", "apply", "verify", "undo", "record"):
            self.con.print(f"[dim]── {name}[/]")

    def preflight(self, result) -> None:
        fails = [f for f in result.findings if f.severity == "FAIL"]
        warns = [f for f in result.findings if f.severity == "WARN"]
        self.con.print(f"preflight: {len(result.facts)} hosts, {len(fails)} FAIL, {len(warns)} WARN")
        for f in fails + warns:
            where = f.host or "all" if f.device is None else f"{f.host} device {f.device}"
            self.con.print(esc(f"  {f.severity} {f.rule} {where}: {f.message} ({f.hint})"))

    def changes(self, changes) -> None:
        from rich.table import Table

        if not hasattr(changes, "hosts"):        # down
            for node, names in changes.running.items():
                self.con.print(esc(f"  {node}: remove {', '.join(names) or 'nothing (no container)'}"))
            if getattr(changes, "purge", ""):
                self.con.print(esc(f"  every node: delete deployctl's own files in {changes.purge} (revisions, "
                                   "history, links; anything else there stays)"))
            return
        t = Table(title=f"What {self.operation} will change", title_justify="left")
        for col in ("node", "instance", "revision", "files", "engine", "why"):
            t.add_column(col)
        for h in changes.hosts:
            kinds: dict[str, int] = {}
            for f in h.files:
                kinds[f.kind] = kinds.get(f.kind, 0) + 1
            files = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
            rev = h.rev if h.current_rev == h.rev else f"{h.current_rev or '-'} -> {h.rev}"
            action = h.action + (f" (+ router {h.ms_action})" if h.ms_action else "")
            t.add_row(*(esc(v) for v in (h.node, h.instance, rev, files, action, h.reason)))
        self.con.print(t)
        for h in changes.hosts:
            changed = [f.path for f in h.files if f.kind in ("new", "changed", "removed")]
            if changed and h.current_rev:
                verb = "differs" if len(changed) == 1 else "differ"
                self.con.print(esc(f"  {h.node}: {', '.join(changed)} {verb} from the deployed revision "
                                   "(`deployctl diff` shows the keys)"))

    def step(self, message: str) -> None:
        self.con.print(esc(message))

    def failure(self, message: str) -> None:
        self.con.print(f"[red]{esc(message)}[/]")

    def verification(self, title: str, result) -> None:
        if not result.units:
            return
        self.con.print(esc(title))
        for u in result.units:
            self.con.print(("[green]" if u.ok else "[red]") + esc("  " + u.line()) + "[/]")


def _break_lock(ctx, yes: bool, reporter: CliReporter, executor) -> None:
    """--break-lock: show who holds the lock, confirm, remove it on every host."""
    from deployctl.backends.hosts.hostlock import break_lock, holders
    from deployctl.backends.hosts.revision import cluster_dir
    from deployctl.backends.common.lockinfo import LockOwner, human_age

    cdir = cluster_dir(ctx.plan)
    targets = ctx.targets
    found = holders(executor, targets, cdir)
    if not found:
        reporter.step("--break-lock: no host holds a lock")
        return
    for host, text in sorted(found.items()):
        o = LockOwner.from_json(text)
        who = f"{o.who()} since {o.started} ({human_age(o.age_s())} ago)" if o else "an unreadable lock"
        reporter.step(f"lock on {host}: {who}")
    if not yes and not _ask("Remove this lock? Only if nobody is deploying", reporter):
        raise typer.Exit(1)
    reporter.step(f"lock removed on {', '.join(break_lock(executor, targets, cdir))}")


def _ask(question: str, reporter: CliReporter) -> bool:
    import sys

    if not sys.stdin.isatty():
        reporter.failure("not a terminal: pass -y to confirm")
        return False
    return typer.confirm(question, default=False)


def run_operation(operation: str, inventory: Path, output: str, run_root: Path, *, dry_run: bool = False,
                  yes: bool = False, skip_preflight: bool = False, trust_new_hosts: bool = False,
                  ready_timeout: int = 1800, pull: bool = False, to: int | None = None, purge: bool = False,
                  facts: Path | None = None, break_lock: bool = False, strategy: str = "rolling",
                  max_unavailable: int = 1, drain_timeout: int = 600) -> None:
    """up / rollback / down on the hosts, printed for people or as JSON."""
    from deployctl.app.executors import ssh
    from deployctl.backends.hosts.up import UpOptions

    reporter = CliReporter(output == "json", operation)
    if operation == "up":
        ctx = open_context(inventory, "full", facts=facts, run_root=run_root, note=reporter.step)
    else:
        ctx = open_context(inventory, "deployed", run_root=run_root)
    with ssh(trust_new_hosts=trust_new_hosts) as executor:      # the command's one executor
        out = _operate(operation, ctx, reporter, executor, break_lock, yes, UpOptions(
            dry_run=dry_run, yes=yes, skip_preflight=skip_preflight, trust_new_hosts=trust_new_hosts,
            ready_timeout=ready_timeout, run_root=run_root, inventory_dir=inventory.parent, pull=pull, to=to,
            purge=purge, strategy=strategy, max_unavailable=max_unavailable, drain_timeout=drain_timeout))
    _print_outcome(operation, ctx, out, output, reporter)
    raise typer.Exit(out.exit_code)


def _operate(operation: str, ctx, reporter: CliReporter, executor, break_lock: bool, yes: bool, opts):
    from deployctl.backends.hosts.up import run_hosts_operation as run
    from deployctl.core.errors import LayoutError
    from deployctl.features.preflight.run import run_preflight

    if break_lock:
        _break_lock(ctx, yes, reporter, executor)
    try:
        return run(operation, ctx.inventory, opts, reporter, lambda changes: confirm_changes(reporter),
                   plan=ctx.plan, preflight=run_preflight, executor=executor)
    except LayoutError as exc:
        raise ctx.located(exc) from None


def _print_outcome(operation: str, ctx, out, output: str, reporter: CliReporter) -> None:
    from deployctl.core.render.processes import entry_url

    inv = ctx.inventory
    verified = [u.__dict__ for u in out.verification.units] if out.verification else []
    restored = [u.__dict__ for u in out.restored.units] if out.restored else []
    if output == "json":
        doc = {"status": out.status, "run": str(out.record.path), "failure": out.failure,
               "verified": verified,
               "restored": [u["unit"] for u in restored if u["ok"] and u["intended"].startswith("restore: revision")],
               "restore": restored, "stages": [{"stage": n, "seconds": s} for n, s in out.stages],
               "changes": out.changes.model_dump() if out.changes is not None else None}
        if operation != "down" and out.status in ("successful", "nothing-to-do"):
            doc["url"] = entry_url(ctx.plan)    # where clients go: the router of a fleet
        echo_json(doc)
        return
    con = reporter.con
    if out.status == "successful":
        if operation == "down":
            con.print(esc(f"✓ down: no engine container left on {len(inv.nodes)} node(s) (read back); "
                          f"record: {out.record.path}"))
            return
        con.print(esc(f"✓ serving (verified on every node): {entry_url(ctx.plan)}/v1/chat/completions "
                      f"(model {inv.model.served_name}); record: {out.record.path}"))
    elif out.status == "nothing-to-do":
        con.print("✓ nothing to do: " + ("no engine container runs" if operation == "down" else
                                         "every node runs the intended revision"))
    elif out.status in ("dry-run", "declined"):
        con.print(f"{out.status}: nothing was changed")
    else:
        back = [u["unit"] for u in restored if u["ok"] and u["intended"].startswith("restore: revision")]
        broken = [f"{u['unit']} ({u['cause']})" for u in restored if not u["ok"]]
        con.print(esc(f"✗ {out.failure}" if out.failure else f"✗ {operation} {out.status}"))
        if broken:
            con.print(esc(f"✗ {operation} {out.status}; the rollback failed too: previous revision restored on: "
                          f"{', '.join(back) or 'no node'}"))
            for b in broken:
                con.print(esc(f"  ✗ still broken: {b}"))
        else:
            nothing = "none (nothing ran before)" if not back else ""
            con.print(esc(f"✗ {operation} {out.status}; previous revision restored on: {', '.join(back) or nothing}"))
        con.print(esc(f"Logs: {out.record.path}"))


def run_diff_hosts(inventory: Path, output: str, facts: Path | None, run_root: Path) -> None:
    """What `up` would change per node, with the keys of every changed file (read-only)."""
    from deployctl.backends.hosts.up import host_changes
    from deployctl.core.errors import LayoutError

    reporter = CliReporter(output == "json", "up")
    ctx = open_context(inventory, "full", facts=facts, run_root=run_root, note=reporter.step)
    from deployctl.app.executors import ssh

    try:
        with ssh() as executor:
            _plan, changes, keys = host_changes(ctx.inventory, ctx.inventory_dir, plan=ctx.plan, executor=executor)
    except LayoutError as exc:
        raise ctx.located(exc) from None
    if output == "json":
        doc = changes.model_dump()
        for h in doc["hosts"]:
            h["keys"] = keys.get(h["node"], {})
        echo_json(doc)
        return
    reporter.changes(changes)
    for node, files in keys.items():
        for name, lines in files.items():
            reporter.step(f"{node} {name}:")
            for line in lines or ["(no key-level difference: formatting only)"]:
                reporter.step(f"    {line}")
    if changes.nothing_to_do:
        reporter.step("✓ no difference: every node runs the rendered revision")


def run_status(inventory: Path, output: str, expect_up: bool = False, run_root: Path | None = None) -> None:
    from deployctl.backends.hosts.status import cluster_status

    ctx = open_context(inventory, "deployed", run_root=run_root)
    from deployctl.app.executors import ssh

    with ssh() as executor:
        st = cluster_status(ctx.inventory, ctx.inventory_dir, plan=ctx.plan, executor=executor)
    code = st.exit_code(expect_up)
    if output == "json":
        echo_json({"state": st.state, "degraded": st.state == "degraded", "live_revision": st.live,
                               "note": st.note, "nodes": st.rows, "instances": st.instances,
                               "router": st.router, "findings": st.findings})
        raise typer.Exit(code)
    from rich.table import Table

    t = Table()
    for col in ("node", "instance", "ranks", "runs revision", "current", "engine", "env", "ready", "problem"):
        t.add_column(col)
    for r in st.rows:
        ready = {True: "yes", False: "no", None: "-"}[r["ready"]]
        env = {True: "=", False: "differs", None: "-"}[r["env_matches"]]
        engine = r["engine"] + (f" ({r['exit_code']})" if r["exit_code"] is not None else "")
        t.add_row(*(esc(v) for v in (r["node"], r["instance"], r["ranks"], r["revision"] or "-",
                                     r["current"] or "-", engine, env, ready, r["problem"])))
    con = _console()
    con.print(t)
    if len(st.instances) > 1:
        con.print(_instances_table(st))
    if st.router and st.router.get("error"):
        con.print(esc(f"✗ {st.router['what']}: {st.router['error']}"))
    live = f" (history revision {st.live})" if st.live else ""
    line = {"serving": f"[green]✓ serving: every rank is up, ready and on its recorded revision{live}[/]",
            "degraded": "[red]✗ degraded[/]", "unknown": "[red]? unknown: a host could not be read[/]",
            "down": "[yellow]■ down[/]"}[st.state]
    con.print(line + (esc(f" ({st.note})") if st.note else ""))
    for finding in st.findings:
        con.print(esc(f"! {finding}"))
    raise typer.Exit(code)


def _instances_table(st):
    from rich.table import Table

    t = Table(title="Instances" + (f" behind {st.router['what']}" if st.router else ""), title_justify="left")
    for col in ("instance", "role", "nodes", "history revision", "state", "router"):
        t.add_column(col)
    colour = {"serving": "green", "draining": "yellow", "down": "red", "degraded": "red"}
    for i in st.instances:
        nodes = ", ".join(i["nodes"]) if len(i["nodes"]) <= 3 else f"{i['nodes'][0]} .. {i['nodes'][-1]}"
        rev = "-" if i["history_revision"] is None else str(i["history_revision"]) + (
            f" ({i['history_result']} run)" if i["history_result"] != "successful" else "")
        t.add_row(esc(i["instance"]), i["role"], esc(nodes), esc(rev), f"[{colour[i['state']]}]{i['state']}[/]",
                  esc(i["router"] or "-"))
    return t


def run_logs(inventory: Path, output: str, host: list[str], since: str | None, tail: int, run_root: Path,
             max_log_mb: float | None = None) -> None:
    from deployctl.backends.hosts.logs import collect_logs

    ctx = open_context(inventory, "deployed", run_root=run_root)
    from deployctl.app.executors import ssh

    with ssh() as executor:
        logs, record = collect_logs(ctx.inventory, ctx.inventory_dir, run_root, hosts=host, since=since, tail=tail,
                                    max_log_mb=max_log_mb, plan=ctx.plan, executor=executor)
    failed = sorted(n for n, r in logs.items() if r.error)
    if output == "json":
        doc = {"run": str(record.path), "failed": failed,
               "logs": {n: {"error": r.error} if r.error else r.texts for n, r in logs.items()},
               "truncated": {n: r.truncated for n, r in logs.items() if r.truncated}}
        echo_json(doc)
        raise typer.Exit(1 if failed else 0)
    con = _console()
    for node, r in logs.items():
        for name, text in ({"error": r.error} if r.error else r.texts).items():
            con.print(f"[bold]== {esc(node)} {esc(name)}[/]")
            for line in text.splitlines()[-min(tail, 20):]:
                con.print(esc(line))
            if name in r.truncated:
                con.print(esc(f"! {node} {name}: log truncated ({r.truncated[name]}): {r.files[name]}"))
    con.print(esc(f"full logs saved under {record.path}/hosts/"))
    if failed:
        con.print(esc(f"✗ could not read the logs of: {', '.join(failed)}"))
    raise typer.Exit(1 if failed else 0)
