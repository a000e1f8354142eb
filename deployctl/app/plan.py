"""`validate`, `plan`, `render`, `observe`, `bench`: the inventory read once, validated, planned, every refusal
pointing into the file with the lines read that once (app/context.py builds the context)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from deployctl.app.context import load_facts, open_context
from deployctl.backends.common.context import Context

if TYPE_CHECKING:
    from deployctl.io.forked import Forked


def opened(path: Path, facts_path: Path | None = None, run_root: Path | None = None) -> Context:
    """The context of an inventory validated with the facts of ``facts_path`` or of its latest preflight run under
    ``run_root``; what only preflight tells may be missing (``ctx.gaps``)."""
    return offline(path, facts_path, run_root)


def validated(path: Path, facts_path: Path | None = None, run_root: Path | None = None) -> Context:
    """``opened``, and the engine's own checks of the files `render` would write (an engine.config value it
    refuses) said here too (`validate`)."""
    ctx = offline(path, facts_path, run_root)
    _engine_accepts(ctx)
    return ctx


def offline(path: Path, facts_path: Path | None = None, run_root: Path | None = None, *, gaps: bool = True,
            raw=None) -> Context:
    """The context of the commands that need no host (validate, plan, recommend, render, observe render).

    The facts are those of ``facts_path`` (--facts) or, without it, of the latest successful preflight run of this
    inventory under ``run_root`` (``ctx.facts_note`` names it; a run too old or of other hosts is not used, and
    the note says why). With ``gaps``, what only preflight can tell (device IPs, A3 SDIDs, super pod ids,
    network interfaces) may still be missing: the inventory is validated in full otherwise, the plan is made
    without them, and ``ctx.gaps`` lists them (rank tables need them: `render` is called with ``gaps=False``).
    """
    from deployctl.core.errors import InventoryError
    from deployctl.core.input.gaps import NeedsFacts
    from deployctl.io.inventory_file import load_inventory

    raw = raw if raw is not None else load_inventory(path)          # the one read of the file
    note = None
    if facts_path is None and run_root is not None:
        facts_path, note = _latest_facts(path, raw, run_root)
    try:
        ctx = open_context(path, "full", facts=facts_path, raw=raw, scale_root=run_root)
    except InventoryError as exc:
        if not gaps or not exc.problems or not all(isinstance(p, NeedsFacts) for p in exc.problems):
            if gaps and exc.problems:         # what preflight will tell is no problem here: the others are
                from deployctl.core.inventory.validate import count_problems

                exc.problems = [p for p in exc.problems if not isinstance(p, NeedsFacts)]
                exc.message = count_problems(str(path), exc.problems)
            raise with_refusal_behind_gaps(exc, raw, path, facts_path, note) from None
        from deployctl.app.inventory import validate_for_discovery
        from deployctl.app.scaled import scaled

        planned_raw, added, spares = scaled(raw, run_root)
        inv, found = validate_for_discovery(planned_raw, facts=load_facts(facts_path))
        return Context(path, planned_raw, inv, "full", facts_path, note, gaps=tuple(found),
                       joined=tuple(a.name for a in added), spares=spares,
                       peers={a.name: tuple(a.peers) for a in added if a.peers})
    return dataclasses.replace(ctx, facts_note=note) if note else ctx


def _latest_facts(path: Path, raw, run_root: Path) -> tuple[Path | None, str | None]:
    """(the facts of this inventory's latest successful preflight run, the note naming it), or (None, why a run
    that exists is not used), or (None, None)."""
    from deployctl.core.errors import UsageError
    from deployctl.io.facts_store import resolve_facts

    try:
        return resolve_facts(path, run_root, None, raw=raw)
    except UsageError as exc:               # too old, or other hosts: plan as if there were none, and say so
        return None, f"not using preflight facts: {exc.message}"


def for_discovery(path: Path) -> Context:
    """`preflight`, `weights`: the inventory may leave out what preflight discovers (device IPs, A3 SDIDs, super pod
    ids: ``ctx.gaps``); every other problem is refused (exit 2) as `validate` does."""
    return open_context(path, "discovery")


def deployed(path: Path) -> Context:
    """The context of a deployment that exists: device IPs may be left to preflight (they are in the deployed
    files already); every other problem is refused (exit 2) as `validate` does."""
    return open_context(path, "deployed")


def planned(path: Path, facts_path: Path | None = None, run_root: Path | None = None, *,
            gaps: bool = True, raw=None) -> Context:
    """``offline``, with the plan made (``ctx.plan``); a refusal points into the inventory (``ctx.located``)."""
    ctx = offline(path, facts_path, run_root, gaps=gaps, raw=raw)
    ctx.plan                              # noqa: B018 - made now: a refusal is said before anything is written
    return ctx


def planned_apart(path: Path, facts_path: Path | None = None, run_root: Path | None = None, *,
                  gaps: bool = True, raw=None, then: Callable[[Any], Any] | None = None) -> tuple[Context, Any, Forked]:
    """``planned`` for a command that writes files from the plan (`render`): what the engine would refuse in those
    files (a second of an 8,192-server plan) is checked by a forked child while the caller renders and writes
    (io/forked.py). Returns (the context, the plan made here without that check, the child). The child plans
    exactly as ``planned`` does: its ``result()`` raises the refusal ``planned`` would have raised, else gives
    ``then(plan)`` (None without it: what the child can make for the caller meanwhile, e.g. plan.json's text).
    The caller puts its files in place only after ``result()`` returned, within ``first()`` (an error of its own
    gives way to the child's refusal; an interrupt stops the child)."""
    from deployctl.io.forked import Forked

    ctx = offline(path, facts_path, run_root, gaps=gaps, raw=raw)

    def check() -> Any:
        plan = ctx.plan                 # the whole plan, the engine's acceptance included: a refusal is raised
        return then(plan) if then else None

    verdict: Forked = Forked(check)
    with verdict.first():            # the refusal the whole plan meets first is the one to say
        plan = ctx.make_plan(accept=False)
    return ctx, plan, verdict


def with_refusal_behind_gaps(exc, raw, path: Path, facts_path: Path | None, note: str | None = None):
    """When the only problems are facts preflight fills (device IPs, SDIDs, interfaces), plan as if they were
    filled: a layout or memory refusal behind them is said now, with its hint, not after preflight ran."""
    from deployctl.app.inventory import validate_for_discovery
    from deployctl.backends.common.context import located
    from deployctl.core.errors import DeployctlError, LayoutError
    from deployctl.core.input.gaps import NeedsFacts
    from deployctl.core.sizing.planner import plan_layout

    if not exc.problems or not all(isinstance(p, NeedsFacts) for p in exc.problems):
        return exc
    if note:                              # why the facts of a preflight run were not used
        exc.message = f"{exc.message} ({note})"
    try:
        inv, _ = validate_for_discovery(raw, facts=load_facts(facts_path))
        filled = inv.model_copy(update={"nodes": [n.model_copy(update={"interface": n.interface or "preflight0"})
                                                  for n in inv.nodes]})
        plan_layout(filled)
        return exc
    except LayoutError as refusal:
        refusal = located(refusal, path, raw)
        gaps = len(exc.problems)
        exc.problems = list(exc.problems) + [p for p in refusal.problems]
        exc.message = (f"{path}: {len(exc.problems)} problems ({gaps} that preflight fills; whatever it finds: "
                       f"{refusal.message.split(': ', 1)[-1]})")
        exc.hint = refusal.hint
        return exc
    except DeployctlError:
        return exc


def _engine_accepts(ctx: Context) -> None:
    """The engine's own checks of the files `render` would write; the support matrix and the memory fit are
    `plan`'s to say."""
    from deployctl.core.errors import LayoutError
    from deployctl.core.sizing.plan import accepted
    from deployctl.core.sizing.planner import plan_layout

    try:
        plan = plan_layout(ctx.inventory, checked=False)
    except LayoutError:
        return
    try:
        accepted(plan, ctx.inventory.engine_spec)
    except LayoutError as exc:
        raise ctx.located(exc) from None


def workload_load(input_len: int, load: dict | None) -> dict:
    """request_rate, arrival and prefix_hit of a workload from plan/recommend's load flags (a shared prefix of
    TOKENS becomes the hit rate TOKENS / input length)."""
    from deployctl.core.sizing.clients import from_shared_prefix

    load = load or {}
    out = {k: load[k] for k in ("request_rate", "arrival") if load.get(k) is not None}
    if load.get("shared_prefix"):
        out["prefix_hit"] = round(from_shared_prefix(load["shared_prefix"], input_len), 6)
    elif load.get("prefix_hit") is not None:
        out["prefix_hit"] = load["prefix_hit"]
    return out


def estimate(plan, input_len=None, output_len=None, concurrency=None, sku=None, load=None):
    """The performance estimate of a plan for a workload (defaults: the model limits, what the KV cache holds;
    `load`: plan's --request-rate, --arrival, --prefix-hit, --shared-prefix)."""
    from deployctl.core.errors import UsageError
    from deployctl.io.calibration_store import load as load_calibration
    from deployctl.core.sizing.estimate import default_workload, estimate_plan

    w = default_workload(plan)
    w = w.model_copy(update={k: v for k, v in (("input_len", input_len), ("output_len", output_len),
                                                ("concurrency", concurrency)) if v is not None})
    w = w.model_copy(update=workload_load(w.input_len, load))
    try:
        return estimate_plan(plan, w, sku=sku, calibration=load_calibration(plan.inventory.cluster.name))
    except ValueError as exc:          # an unknown SKU name
        raise UsageError(str(exc), hint="name a SKU of the cluster's hardware (deployctl/core/sizing/hardware.yaml)") \
            from None
