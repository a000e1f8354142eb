"""`validate`, `plan`, `render`: the composition root reads, validates and plans (app/plan.py); these print."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from deployctl.core.heap import bulk, keep_until_exit

from deployctl.cli import _output


@bulk()        # a short-lived command building a large plan: no collector passes over it
def run_validate(path: Path, output: str, facts: Path | None = None, run_root: Path | None = None) -> None:
    from deployctl.app.plan import validated
    from deployctl.core.sizing.layout import effective_preset

    ctx = validated(path, facts, run_root)
    inv = ctx.inventory
    summary = {"valid": True, "inventory": str(path), "cluster": inv.cluster.name,
               "hardware": inv.cluster.hardware, "nodes": [n.name for n in inv.nodes],
               "model": inv.model.name, "quant": inv.model.quant, "preset": effective_preset(inv),
               **_output.offline_notes(ctx)}
    if output == "json":
        typer.echo(json.dumps(summary, indent=2))
    else:
        _output.print_offline_notes(ctx)
        typer.echo(f"✓ {path} is valid: cluster {inv.cluster.name}, {len(inv.nodes)} x "
                   f"{inv.cluster.hardware.upper()} ({inv.devices_per_node} devices each), "
                   f"{inv.model.name} {inv.model.quant}, layout {summary['preset']}")
        typer.echo(f"  next: deployctl plan -i {path}")
    keep_until_exit(ctx)


@bulk()        # a short-lived command building a large plan: no collector passes over it
def run_plan(path: Path, output: str, facts: Path | None = None, *, input_len: int | None = None,
             output_len: int | None = None, concurrency: int | None = None, sku: str | None = None,
             run_root: Path | None = None, load: dict | None = None) -> None:
    from deployctl.app.plan import estimate, planned_apart

    # the engine's acceptance of the files this plan renders is checked apart while the estimate and the JSON
    # are made; nothing is printed before its verdict, and its refusal comes first (as when checked in turn)
    ctx, plan, verdict = planned_apart(path, facts, run_root)
    with verdict.first():
        est = estimate(plan, input_len, output_len, concurrency, sku, load=load)
        text = None
        if output == "json":
            # serialised by pydantic-core (Rust): a 1,024-server plan is 30 MB of JSON, json.dumps(indent=2)
            # takes seconds of it; the text is the same (UTF-8, two-space indent, the models' key order)
            from deployctl.core.input.secrets import plan_json

            # secret env values read ***
            text = plan_json(plan, {"estimate": est, **_output.offline_notes(ctx)}).decode()
        verdict.result()
    if text is not None:
        typer.echo(text)
    else:
        _output.print_offline_notes(ctx)
        _output.print_plan(plan)
        _output.print_estimate(est)
    keep_until_exit(ctx)


@bulk()        # a short-lived command building a large plan: no collector passes over it
def run_render(path: Path, out: Path, force: bool, output: str, facts: Path | None = None,
               target: str = "bare-metal", values_only: bool = False, run_root: Path | None = None) -> None:
    from deployctl.io.rendered_tree import check_target, write_tree

    from deployctl.app.plan import planned_apart

    check_target(out, force, keep=(path,))
    raw, asked = None, target
    if target in ("lws", "infer-operator"):       # the chart with this kubernetes.workload over the inventory's
        from deployctl.io.inventory_file import load_inventory, with_workload

        raw, target = with_workload(load_inventory(path), target), "helm"
    # rank tables need every device IP; the engine's acceptance of the files is checked apart while they are
    # rendered and written, and they are put in place only if it accepts them
    from deployctl.core.input.secrets import plan_json

    # and the child that checks it serialises plan.json (45 MB at 8,192 servers) meanwhile
    ctx, plan, verdict = planned_apart(path, facts, run_root, gaps=False, raw=raw,
                                       then=plan_json if target != "helm" else None)
    if ctx.facts_note and output != "json":
        typer.echo(f"note: {ctx.facts_note}", err=True)
    with verdict.first():                   # a refusal of the plan itself comes before any of what follows
        if target == "helm":
            from deployctl.core.errors import LayoutError
            from deployctl.backends.k8s.render import render_helm

            try:
                artifacts = render_helm(plan, with_manifests=not values_only)
            except LayoutError as exc:      # a layout the engine's chart cannot run: point into the inventory
                raise ctx.located(exc) from None
        else:
            from deployctl.core.render import render_artifacts

            artifacts = render_artifacts(plan, plan_json=verdict.result)
        write_tree(out, artifacts, force=force, keep=(path,), ready=verdict.result)
    if output == "json":
        typer.echo(json.dumps({"out": str(out), "target": asked, "files": [a.path for a in artifacts]}, indent=2))
    elif target == "helm":
        _output.print_render_helm(plan, out, artifacts)
    else:
        _output.print_render(plan, out, artifacts)
    keep_until_exit(ctx, artifacts)
