"""`deployctl engines`: the support matrix of every engine kind (table, JSON rows or the README's Markdown)."""

from __future__ import annotations

import json

import typer

from deployctl.app import engines
from deployctl.cli._output import _console, esc

MARK = {"yes": "✓", "no": "✗", "unverified": "?"}
STYLE = {"yes": "green", "no": "red", "unverified": "yellow"}


def _quants(row: dict) -> str:
    return ", ".join(f"{q} {MARK.get(v, v)}" for q, v in row["quantizations"].items()) or "unverified"


def _validated(row: dict) -> str:
    hw = row.get("validated", {}).get("hardware", {})
    return ", ".join(f"{name.upper()}: {'≥ ' if v['at_least'] else ''}{v['servers']} "
                     f"server{'s' if v['servers'] > 1 else ''} (world {v['world_size']})"
                     for name, v in hw.items()) or "-"


def print_matrix(kind: str, rows: list[dict]) -> None:
    from rich.table import Table

    con = _console()
    display = engines.resolve(kind).display
    table = Table(title=f"{display} ({kind}): supported combinations", title_justify="left")
    for col in ("model", "version", "runtime", "supported", "quantizations", "validated servers", "source"):
        table.add_column(col)
    for r in rows:
        style = STYLE.get(r["supported"], "")
        supported = f"[{style}]{esc(r['supported'])}[/]" if style else esc(r["supported"])
        table.add_row(esc(r["display"]), esc(r["version"]), esc(r["runtime"]), supported,
                      esc(_quants(r) if r["supported"] != "no" else "-"), esc(_validated(r)), esc(r["source"]))
    con.print(table)
    notes = list(dict.fromkeys(n for r in rows for n in r.get("notes", [])))
    for n in notes:
        con.print(f"  note: {esc(n)}")
    keys = engines.resolve(kind).role_keys
    con.print(f"Per-role settings (pd-split layout.<role>.engine): {esc(', '.join(keys)) if keys else 'none'}; "
              "layout.<role>.model: max_batch_size, max_prefill_tokens; layout.<role>.env (HCCL_BUFFSIZE too)")
    con.print("A combination no source covers is allowed with a WARN (unverified); `no` is refused (exit 2).")


def run_engines(output: str, markdown: bool) -> None:
    kinds = sorted(engines.KINDS)
    if markdown:
        typer.echo("\n\n".join(engines.resolve(k).support_table() for k in kinds))
        return
    rows = [{"engine": k, **row, "role_keys": list(engines.resolve(k).role_keys)} for k in kinds
            for row in engines.resolve(k).support_rows()]
    if output == "json":
        typer.echo(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    for k in kinds:
        print_matrix(k, [r for r in rows if r["engine"] == k])
