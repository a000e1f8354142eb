"""`deployctl history` output, the same for hosts and k8s."""

from __future__ import annotations

from deployctl.cli._output import echo_json, esc
from deployctl.cli._output import run_console as _console


def print_history(rows, output: str, title: str, findings: list[str] | None = None) -> None:
    """``findings``: what the hosts said that was not used (hosts backend only; printed after the table)."""
    if output == "json":
        doc = {"title": title, "revisions": [r.to_dict() for r in rows]}
        if findings is not None:
            doc["findings"] = findings
        echo_json(doc)
        return
    from rich.table import Table

    con = _console()
    if not rows:
        con.print(esc(f"{title}: no deployment recorded yet"))
        for finding in findings or []:
            con.print(esc(f"! {finding}"))
        return
    t = Table(title=title, title_justify="left")
    for col in ("rev", "", "time", "user", "operation", "result", "what", "changed"):
        t.add_column(col)
    for r in rows:
        mark = "live" if r.live else ("" if r.available or r.operation == "restart" else "gone")
        t.add_row(*(esc(v) for v in (str(r.revision), mark, r.time, r.user, r.operation, r.result, r.summary,
                                     r.changed)))
    con.print(t)
    con.print(esc("roll back with: deployctl rollback -i INV [--to REV]  (default: the last successful "
                  "revision before the live one)"))
    for finding in findings or []:
        con.print(esc(f"! {finding}"))


def run_history(inventory, output: str, run_root=None) -> None:
    """Hosts: the history every host keeps, merged, with what runs now marked live."""
    from deployctl.app.context import open_context
    from deployctl.backends.hosts import history as hist
    from deployctl.app.executors import ssh
    from deployctl.backends.hosts.up import read_state

    ctx = open_context(inventory, "deployed", run_root=run_root)
    inv = ctx.inventory
    with ssh() as executor:
        _plan, states = read_state(inv, ctx.inventory_dir, plan=ctx.plan, executor=executor)
    ok = {n: s for n, s in states.items() if not s.error}
    if not ok:
        from deployctl.core.errors import ExecutionError

        raise ExecutionError("no host could be read", hint="fix SSH to the hosts (deployctl preflight shows why)")
    rows = hist.rows(hist.merged(ok), ok)
    print_history(rows, output, f"history of {inv.cluster.name} (hosts)", hist.findings(ok))
    unread = sorted(n for n, s in states.items() if s.error)
    if unread and output != "json":
        _console().print(esc("! not read: " + "; ".join(f"{n} ({states[n].error})" for n in unread)))
