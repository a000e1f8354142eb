"""Implementations behind the CLI commands: load -> validate -> plan -> render, then print."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from deployctl.cli import _output
from deployctl.app.context import load_facts, open_context


def load_and_validate(path: Path, facts_path: Path | None = None):
    """The inventory validated in full with the facts of ``facts_path`` (an operation context's inventory)."""
    return open_context(path, "full", facts=facts_path).inventory


def load_for_discovery(path: Path):
    """`preflight`: the inventory may leave out what preflight discovers (device IPs, A3 SDIDs, super pod ids).

    Returns (raw, inventory, needs-facts notes); every other problem is refused (exit 2) as `validate` does.
    """
    ctx = open_context(path, "discovery")
    return ctx.raw, ctx.inventory, list(ctx.gaps)


def make_plan(path: Path, facts_path: Path | None = None):
    from deployctl.core.errors import InventoryError

    try:
        ctx = open_context(path, "full", facts=facts_path)
    except InventoryError as exc:
        raise with_refusal_behind_gaps(exc, path, facts_path) from None
    return ctx.plan            # a refusal points into the inventory (located with the lines read once)


def with_refusal_behind_gaps(exc, path: Path, facts_path: Path | None):
    """When the only problems are facts preflight fills (device IPs, SDIDs, interfaces), plan as if they were
    filled: a layout or memory refusal behind them is said now, with its hint, not after preflight ran."""
    from deployctl.core.errors import DeployctlError, LayoutError
    from deployctl.core.input.gaps import NeedsFacts
    from deployctl.io.inventory_file import load_inventory
    from deployctl.app.inventory import validate_for_discovery
    from deployctl.core.sizing.planner import plan_layout

    if not exc.problems or not all(isinstance(p, NeedsFacts) for p in exc.problems):
        return exc
    try:
        inv, _ = validate_for_discovery(load_inventory(path), facts=load_facts(facts_path))
        filled = inv.model_copy(update={"nodes": [n.model_copy(update={"interface": n.interface or "preflight0"})
                                                  for n in inv.nodes]})
        plan_layout(filled)
        return exc
    except LayoutError as refusal:
        refusal = located(refusal, path)
        gaps = len(exc.problems)
        exc.problems = list(exc.problems) + [p for p in refusal.problems]
        exc.message = (f"{path}: {len(exc.problems)} problems ({gaps} that preflight fills; whatever it finds: "
                       f"{refusal.message.split(': ', 1)[-1]})")
        exc.hint = refusal.hint
        return exc
    except DeployctlError:
        return exc


def located(exc, path: Path, raw=None):
    """A plan refusal pointing into the inventory: its file, and the line of each problem's key path
    (the layout block of the instance that does not fit, ...). Without ``raw`` the file is read again."""
    from deployctl.io.inventory_file import load_inventory
    from deployctl.backends.common.context import located as _located

    if raw is None:
        try:
            raw = load_inventory(path)
        except Exception:  # noqa: BLE001 - it loaded a moment ago; without lines the message still stands
            raw = None
    return _located(exc, path, raw)


def _engine_accepts(inv, path: Path) -> None:
    """The engine's own checks of the files `render` would write (an engine.config value it refuses); the
    support matrix and the memory fit are `plan`'s to say."""
    from deployctl.core.errors import LayoutError
    from deployctl.core.sizing.plan import accepted
    from deployctl.core.sizing.planner import plan_layout

    try:
        plan = plan_layout(inv, checked=False)
    except LayoutError:
        return
    try:
        accepted(plan, inv.engine_spec)
    except LayoutError as exc:
        raise located(exc, path) from None


def run_validate(path: Path, output: str, facts: Path | None = None) -> None:
    from deployctl.core.sizing.layout import effective_preset

    inv = load_and_validate(path, facts)
    _engine_accepts(inv, path)
    summary = {"valid": True, "inventory": str(path), "cluster": inv.cluster.name,
               "hardware": inv.cluster.hardware, "nodes": [n.name for n in inv.nodes],
               "model": inv.model.name, "quant": inv.model.quant, "preset": effective_preset(inv)}
    if output == "json":
        typer.echo(json.dumps(summary, indent=2))
        return
    typer.echo(f"✓ {path} is valid: cluster {inv.cluster.name}, {len(inv.nodes)} x "
               f"{inv.cluster.hardware.upper()} ({inv.devices_per_node} devices each), "
               f"{inv.model.name} {inv.model.quant}, layout {summary['preset']}")
    typer.echo(f"  next: deployctl plan -i {path}")


def plan_estimate(plan, input_len=None, output_len=None, concurrency=None, sku=None):
    """The performance estimate of a plan for a workload (defaults: the model limits, what the KV cache holds)."""
    from deployctl.core.errors import UsageError
    from deployctl.io.calibration_store import load
    from deployctl.core.sizing.estimate import default_workload, estimate_plan

    w = default_workload(plan)
    w = w.model_copy(update={k: v for k, v in (("input_len", input_len), ("output_len", output_len),
                                                ("concurrency", concurrency)) if v is not None})
    try:
        return estimate_plan(plan, w, sku=sku, calibration=load(plan.inventory.cluster.name))
    except ValueError as exc:          # an unknown SKU name
        raise UsageError(str(exc), hint="name a SKU of the cluster's hardware (deployctl/core/sizing/hardware.yaml)") \
            from None


def run_plan(path: Path, output: str, facts: Path | None = None, *, input_len: int | None = None,
             output_len: int | None = None, concurrency: int | None = None, sku: str | None = None) -> None:
    plan = make_plan(path, facts)
    est = plan_estimate(plan, input_len, output_len, concurrency, sku)
    if output == "json":
        from pydantic_core import to_json

        # serialised by pydantic-core (Rust): a 1,024-server plan is 30 MB of JSON, json.dumps(indent=2) takes
        # seconds of it; the text is the same (UTF-8, two-space indent, the models' key order)
        from deployctl.core.input.secrets import plan_doc

        doc = plan_doc(plan)            # secret env values read ***
        doc["estimate"] = est.model_dump(mode="json")
        typer.echo(to_json(doc, indent=2).decode())
        return
    _output.print_plan(plan)
    _output.print_estimate(est)


def run_render(path: Path, out: Path, force: bool, output: str, facts: Path | None = None,
               target: str = "bare-metal", values_only: bool = False) -> None:
    from deployctl.io.rendered_tree import check_target, write_tree

    check_target(out, force, keep=(path,))
    plan = make_plan(path, facts)
    if target == "helm":
        from deployctl.core.errors import LayoutError
        from deployctl.backends.k8s.render import render_helm

        try:
            artifacts = render_helm(plan, with_manifests=not values_only)
        except LayoutError as exc:          # a layout the engine's chart cannot run: point into the inventory
            raise located(exc, path) from None
    else:
        from deployctl.core.render import render_artifacts

        artifacts = render_artifacts(plan)
    write_tree(out, artifacts, force=force, keep=(path,))
    if output == "json":
        typer.echo(json.dumps({"out": str(out), "target": target, "files": [a.path for a in artifacts]}, indent=2))
    elif target == "helm":
        _output.print_render_helm(plan, out, artifacts)
    else:
        _output.print_render(plan, out, artifacts)
