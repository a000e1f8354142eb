"""`deployctl preflight`: probe the hosts read-only, report per host and per finding, save the facts."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import typer

from deployctl.cli._output import echo_json, esc


def _progress_printer(names: list[str]):
    """Live per-host state on stderr: a redrawn table on a terminal, one line per change otherwise."""
    from deployctl.cli._output import run_console

    con = run_console(stderr=True)
    state = {n: "waiting" for n in names}
    lock = threading.Lock()
    if not con.is_terminal:
        def plain(host: str, what: str) -> None:
            if what.endswith("done") or "failed" in what:
                con.print(esc(f"  {host}: {what}"))
        return plain, None
    from rich.live import Live
    from rich.table import Table

    def table():
        t = Table(show_header=False, box=None)
        for n, s in state.items():
            mark = "✓" if s.endswith("done") else ("✗" if "failed" in s else "…")
            t.add_row(mark, esc(n), esc(s))
        return t

    live = Live(table(), console=con, transient=True, refresh_per_second=8)

    def update(host: str, what: str) -> None:
        with lock:
            state[host] = what
            live.update(table())
    return update, live


def start_record(run_root: Path):
    """The run record under <run-root>/runs/<id>-preflight/ (status running)."""
    from deployctl.io.records import RunRecord
    from deployctl.core.errors import UsageError

    try:
        record = RunRecord.create(run_root, "preflight")
        record.status("running")
    except OSError as exc:
        raise UsageError(f"cannot write the run record under {run_root}: {exc.strerror or exc}",
                         hint="pass --run-dir with a directory you can write") from None
    return record


def save_facts(record, result, inv, inventory: Path, seconds: float) -> Path:
    """facts.json (for --facts), run.json (what `up`/`diff` read to pick the latest usable facts), status, rc."""
    from deployctl.io.facts_store import FACTS_FILE, RUN_FILE, run_summary

    path = record.write(FACTS_FILE, result.to_file(inv).model_dump_json(indent=2) + "\n")
    record.write_json(RUN_FILE, run_summary(inv, inventory, result, record.run_id, seconds))
    record.finish("failed" if result.failed else "successful", 1 if result.failed else 0)
    return path


def run(inventory: Path, output: str, trust_new_hosts: bool, timeout: float, connect_timeout: float,
        workers: int | None, ping_sample: int, run_root: Path) -> None:
    from deployctl.app.inventory import inventory_problems
    from deployctl.app.plan import for_discovery
    from deployctl.app.executors import ssh
    from deployctl.features.preflight.run import judge_gaps, run_preflight

    ctx = for_discovery(inventory)
    raw, inv, gaps = ctx.raw, ctx.inventory, list(ctx.gaps)
    record = start_record(run_root)
    progress, live = (None, None) if output == "json" else _progress_printer([n.name for n in inv.nodes])
    start = time.monotonic()
    try:
        if live:
            live.start()
        with ssh(trust_new_hosts=trust_new_hosts, connect_timeout=connect_timeout) as executor:
            result = run_preflight(inv, inventory.parent, executor, timeout=timeout, workers=workers,
                                   ping_sample=ping_sample, progress=progress)
        judge_gaps(inv, gaps, result, lambda facts: inventory_problems(raw, facts=facts)[1])
    except BaseException as exc:
        record.finish("canceled" if isinstance(exc, KeyboardInterrupt) else "failed", 1)
        raise
    finally:
        if live:
            live.stop()
    seconds = time.monotonic() - start
    facts_path = save_facts(record, result, inv, inventory, seconds)
    if output == "json":
        doc = json.loads(result.to_file(inv).model_dump_json())
        doc.update({"facts_file": str(facts_path), "run": str(record.path), "needs_facts": result.gaps,
                    "seconds": round(seconds, 2), "ok": not result.failed})
        echo_json(doc)
    else:
        print_report(inv, result, seconds, facts_path)
    raise typer.Exit(1 if result.failed else 0)


def _host_row(h) -> list[str]:
    if not h.reachable:
        return [h.name, h.address, "-", "-", "-", f"UNREACHABLE ({h.error_kind})", "-", "-", f"{h.seconds:.1f}s"]
    npus = f"{len(h.npu.chips)}" if h.npu else "?"
    bad = [c for c in (h.npu.chips if h.npu else ()) if c.health != "OK"]
    health = "OK" if h.npu and not bad else (", ".join(f"{c.phy_id}:{c.health}" for c in bad) or "?")
    down = [d.phy_id for d in h.devices.values() if d.link_up is False]
    links = "UP" if h.devices and not down and all(d.link_up for d in h.devices.values()) else (
        "DOWN " + ",".join(map(str, down)) if down else "?")
    ips = sum(1 for d in h.devices.values() if d.ip)
    return [h.name, h.address, h.driver.package if h.driver else "?", h.firmware.version if h.firmware else "?",
            npus, health, links, f"{ips}/{len(h.devices)}", f"{h.seconds:.1f}s"]


def gap_lines(gaps: list[dict], hosts: dict) -> list[str]:
    """One line per node and missing kind (an A3 node without SDIDs is one line, not 16)."""
    groups: dict[tuple, list[dict]] = {}
    for g in gaps:
        groups.setdefault((g["node"], g["what"]), []).append(g)
    lines = []
    for (node, _), notes in groups.items():
        first = notes[0]
        where = f"{first['file']}:{first['line']}" if first["line"] else first["file"]
        more = f" (and {len(notes) - 1} more devices)" if len(notes) > 1 else ""
        h = hosts.get(node)
        if first["discovered"]:
            status = "discovered"
        elif h is not None and not h.reachable:
            status = f"NOT discovered ({h.error_kind})"
        else:
            status = "NOT discovered (see the needs-facts finding)"
        lines.append(f"{where} {first['path']}: {first['message']}{more} -> {status}")
    return lines


def print_gaps(con, result) -> None:
    if not result.gaps:
        return
    con.print("Needs facts: the inventory leaves these to preflight, which reads them from the hosts "
              "(saved in the facts file below):")
    for line in gap_lines(result.gaps, result.facts):
        con.print(esc(f"  • {line}"))


def print_report(inv, result, seconds: float, facts_path: Path) -> None:
    from rich.table import Table

    from deployctl.cli._output import run_console

    con = run_console()
    facts = result.facts
    up = sum(1 for h in facts.values() if h.reachable)
    con.print(f"Preflight of [bold]{esc(inv.cluster.name)}[/]: {len(facts)} hosts, {up} reachable, "
              f"{seconds:.1f} s")
    hosts = Table()
    for col in ("host", "address", "driver", "firmware", "NPUs", "health", "links", "device IPs", "time"):
        hosts.add_column(col)
    for h in facts.values():
        hosts.add_row(*(esc(v) for v in _host_row(h)))
    con.print(hosts)
    fails = [f for f in result.findings if f.severity == "FAIL"]
    warns = [f for f in result.findings if f.severity == "WARN"]
    if result.findings:
        table = Table(title=f"Findings: {len(fails)} FAIL, {len(warns)} WARN", title_justify="left")
        for col in ("", "rule", "host", "device", "finding", "fix"):
            table.add_column(col)
        for f in result.findings:
            sev = "[red]FAIL[/]" if f.severity == "FAIL" else "[yellow]WARN[/]"
            table.add_row(sev, esc(f.rule), esc(f.host or "all"), "" if f.device is None else str(f.device),
                          esc(f.message), esc(f.hint))
        con.print(table)
    print_gaps(con, result)
    con.print(esc(f"Not checked: {'; '.join(result.not_checked)}"))
    use = "every command (plan, render, up, diff, ...) uses them for this inventory" if not fails else \
        "deployctl uses only a run without FAIL"
    con.print(esc(f"Facts saved to {facts_path}: {use}; validate, plan and render take --facts {facts_path}"))
    if fails:
        con.print(f"[red]✗ {len(fails)} check(s) failed[/]")
    else:
        con.print(f"[green]✓ all checks passed[/]{' with ' + str(len(warns)) + ' warning(s)' if warns else ''}")
    sys.stdout.flush()
