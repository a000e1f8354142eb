"""`deployctl recommend`: rank the layouts of the inventory's servers for a workload and an SLO, and optionally
write the best one into a copy of the inventory (deployctl.core.sizing.recommend does the work; this prints it)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import typer

from deployctl.cli._output import esc


def _objective(inv, input_len, output_len, slo_tpot_ms, slo_ttft_ms, maximize, load=None):
    """The objective; lengths default to the model limits (max_input_len in, max_seq_len - max_input_len out)."""
    from pydantic import ValidationError

    from deployctl.app.plan import workload_load
    from deployctl.core.errors import UsageError
    from deployctl.core.sizing.recommend import Objective

    m = inv.model
    input_len = input_len or m.max_input_len
    try:
        return Objective(input_len=input_len, output_len=output_len or max(1, m.max_seq_len - m.max_input_len),
                         slo_tpot_ms=slo_tpot_ms, slo_ttft_ms=slo_ttft_ms, maximize=maximize,
                         **workload_load(input_len, load))
    except ValidationError as exc:
        err = exc.errors()[0]
        raise UsageError(f"invalid objective: {'.'.join(map(str, err['loc']))}: {err['msg']}",
                         hint="lengths are positive token counts, SLOs positive milliseconds, maximize "
                              "throughput_per_die or throughput") from None


def _write_copy(source: Path, target: Path, layout: dict, comment: str) -> list[str]:
    """Atomically write the inventory with only its layout replaced; the result must validate. Never the source."""
    from deployctl.core.errors import UsageError
    from deployctl.core.input.raw import decode_inventory, parse_yaml
    from deployctl.io.inventory_file import read_inventory_bytes
    from deployctl.app.inventory import validate_inventory
    from deployctl.core.sizing.recommend import apply_layout

    if target.exists() and (target.is_dir() or target.resolve() == source.resolve()):
        what = "a directory" if target.is_dir() else "the inventory itself"
        raise UsageError(f"--apply {target}: it is {what}; recommend writes a copy and never changes the source",
                         hint=f"e.g. --apply {source.with_name(source.stem + '-recommended' + source.suffix)}")
    text = decode_inventory(read_inventory_bytes(source), str(source))
    new = apply_layout(text, layout, comment)
    validate_inventory(parse_yaml(new, str(target), source.parent))    # relative paths as seen from the source
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(new, encoding="utf-8")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    notes = []
    if target.resolve().parent != source.resolve().parent and "hccn_conf:" in new:
        notes.append(f"hccn_conf paths are relative to {source.parent}: copy those files next to {target} too")
    return notes


def _fmt(v: float, digits: int = 0) -> str:
    return f"{v:,.{digits}f}"


def _print(rec, top: int) -> None:
    from rich.table import Table

    from deployctl.cli._output import _console

    con = _console()
    obj = rec.objective
    slo = ", ".join(x for x in (f"TPOT <= {obj.slo_tpot_ms:g} ms" if obj.slo_tpot_ms else "",
                                f"TTFT <= {obj.slo_ttft_ms:g} ms" if obj.slo_ttft_ms else "") if x) or "no SLO"
    con.print(f"Layouts ranked for {obj.input_len} in / {obj.output_len} out, {slo}, maximizing "
              f"{obj.maximize.replace('_', ' ')} (estimated, SKU {esc(rec.sku)}; "
              f"{len(rec.candidates)} of {rec.considered} layouts plan and pass the engine's checks)")
    table = Table(show_lines=False)
    for col in ("#", "layout", "conc.", "TTFT p50/p90 ms", "TPOT p50/p90 ms", "tok/s/die", "tok/s", "SLO", "binding"):
        table.add_column(col, justify="left" if col in ("layout", "SLO", "binding") else "right")
    for c in rec.candidates[:top]:
        table.add_row(str(c.rank), esc(c.shape), str(c.concurrency), f"{_fmt(c.ttft_ms)} / {_fmt(c.ttft_p90_ms)}",
                      f"{_fmt(c.tpot_ms, 1)} / {_fmt(c.tpot_p90_ms, 1)}",
                      _fmt(c.per_die_tokens_per_s, 1), _fmt(c.output_tokens_per_s), "yes" if c.meets_slo else
                      f"no (x{c.slo_ratio:.2f})", esc("; then ".join([c.binding, ", ".join(c.top_terms[1:])])))
    con.print(table)
    for note in rec.notes:
        con.print(f"[yellow]! {esc(note)}[/]")
    if rec.dropped:
        con.print("not proposed: " + ", ".join(f"{n} ({why})" for why, n in sorted(rec.dropped.items())))
    if rec.candidates:
        best = rec.candidates[0]
        for note in best.notes + best.engine_warnings:
            con.print(f"  #1: {esc(note)}")
        from deployctl.core.sizing.recommend import layout_block

        con.print("the #1 layout block (--apply FILE writes it into a copy of the inventory):")
        con.print(esc(layout_block(best.layout).rstrip()), soft_wrap=True)


def run_recommend(inventory_path: Path, input_len: int | None = None, output_len: int | None = None,
                  slo_tpot_ms: float | None = None, slo_ttft_ms: float | None = None, top: int = 5,
                  apply_to: Path | None = None, output: str = "text", sku: str | None = None,
                  maximize: str = "throughput_per_die", facts: Path | None = None,
                  run_root: Path | None = None, notes: bool = True, load: dict | None = None) -> int:
    """Print the ranked layouts (text table or JSON); with ``apply_to`` write the best into that copy.

    Returns 0 when the best layout meets the SLO (or no SLO was given), 1 when none does. Raises LayoutError
    (exit 2) when no layout of these servers plans at all, UsageError for bad arguments.
    """
    from deployctl.app.plan import opened
    from deployctl.core.errors import LayoutError, UsageError
    from deployctl.core.sizing.recommend import recommend_report

    ctx = opened(inventory_path, facts, run_root)
    inv = ctx.inventory
    if output != "json" and notes:
        from deployctl.cli._output import print_offline_notes

        print_offline_notes(ctx)
    obj = _objective(inv, input_len, output_len, slo_tpot_ms, slo_ttft_ms, maximize, load)
    try:
        from deployctl.io.calibration_store import load

        rec = recommend_report(inv, obj, sku, calibration=load(inv.cluster.name))
    except ValueError as exc:          # an unknown SKU name
        raise UsageError(str(exc), hint="name a SKU of the cluster's hardware (deployctl/core/sizing/hardware.yaml)") \
            from None
    if not rec.candidates:
        why = ", ".join(f"{n} {k}" for k, n in sorted(rec.dropped.items())) or "none"
        raise LayoutError(f"{inventory_path}: no layout of these {len(inv.nodes)} servers plans for "
                          f"{inv.model.name} {inv.model.quant} (dropped: {why})",
                          hint="add servers or use a smaller quantization")
    written = []
    if apply_to is not None:
        best = rec.candidates[0]
        comment = (f"deployctl recommend: #1 of {len(rec.candidates)} for {obj.input_len} in / {obj.output_len} out "
                   f"(estimated {best.tpot_ms:.1f} ms TPOT, {best.per_die_tokens_per_s:.1f} tok/s/die at "
                   f"concurrency {best.concurrency})")
        written = _write_copy(inventory_path, apply_to, best.layout, comment)
    if output == "json":
        doc = rec.model_dump(mode="json")
        doc["candidates"] = doc["candidates"][:top]
        doc["total_candidates"] = len(rec.candidates)
        doc["applied_to"] = str(apply_to) if apply_to else None
        doc["notes"] += written
        typer.echo(json.dumps(doc, indent=2))
    else:
        _print(rec, top)
        if apply_to is not None:
            typer.echo(f"wrote {apply_to} (layout #1; everything else as in {inventory_path})")
            for note in written:
                typer.echo(f"! {note}")
    best = rec.candidates[0]
    return 0 if best.meets_slo or not (obj.slo_tpot_ms or obj.slo_ttft_ms) else 1
