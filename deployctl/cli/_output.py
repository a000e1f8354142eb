"""Human output: rich tables for plan and render (JSON output bypasses this module)."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path


# Not a terminal (a pipe, a file, CI logs): rich would assume 80 columns and break lines inside commands,
# paths and URLs. Lines are then never wrapped (soft_wrap) and tables get this much room (they take only
# what their cells need).
PIPE_WIDTH = 4096


@lru_cache(maxsize=1)
def _console_class():
    """rich's Console, except that no text it prints can carry an escape sequence or control character: its own
    styles (the control segments and the ANSI codes of styles) are the only ones that reach the terminal, however
    the text came in (deployctl.core.textsafe; host text in a table cell, a message, an exception)."""
    from rich.console import Console
    from rich.segment import Segment

    from deployctl.core.textsafe import clean

    class SafeConsole(Console):
        def _render_buffer(self, buffer):
            return super()._render_buffer(
                seg if seg.control else Segment(clean(seg.text), seg.style, seg.control) for seg in buffer)

    return SafeConsole


def _make_console(stderr: bool = False):
    console = _console_class()
    con = console(highlight=False, stderr=stderr)
    if con.is_terminal:
        return con                      # a terminal: its own width, rich wraps as usual
    return console(highlight=False, stderr=stderr, width=PIPE_WIDTH, soft_wrap=True)


def echo_json(doc, **kwargs) -> None:
    """Print a JSON document on stdout, every string in it cleaned of escape sequences and control characters
    (host text reaches `jq -r` and log viewers as it reaches the terminal: deployctl.core.textsafe)."""
    import json

    import typer

    from deployctl.core.textsafe import clean_data

    typer.echo(json.dumps(clean_data(doc), **{"indent": 2, **kwargs}))


def _console():
    """The console of plan and render (stdout)."""
    return _make_console()


def run_console(stderr: bool = False):
    """The console of the commands that act on a deployment (stderr in JSON mode, where stdout is the JSON)."""
    return _make_console(stderr)


def confirm_changes(reporter) -> bool:
    """Ask before applying; refuse (with why) when stdin is not a terminal."""
    import sys

    import typer

    if not sys.stdin.isatty():
        reporter.failure("not a terminal: pass -y to apply, or --dry-run to only look")
        return False
    return typer.confirm("Apply these changes?", default=False)


def esc(value) -> str:
    """User and host values (names, paths, what a host printed) may contain [brackets] and escape sequences:
    never let rich read them as markup, never let them reach the terminal as control sequences."""
    from rich.markup import escape

    from deployctl.core.textsafe import clean

    return escape(clean(value))


def _rank_range(inst, node: str) -> str:
    ranks = [r.rank for r in inst.ranks if r.node == node]
    return f"{ranks[0]}-{ranks[-1]}" if len(ranks) > 1 else str(ranks[0])


WEIGHT_PARTS = (("routed_experts", "routed experts"), ("shared_experts", "shared experts"), ("dense_ffn", "dense FFN"),
                ("attention", "attention"), ("embedding_lm_head", "embedding + lm_head"), ("router", "expert router"),
                ("vision", "vision tower"))


def print_plan(plan) -> None:
    from rich.table import Table

    inv = plan.inventory
    con = _console()
    con.print(f"[bold]{esc(inv.cluster.name)}[/]: {plan.model_display} {inv.model.quant} on "
              f"{len(plan.nodes)} x {plan.hardware.upper()} ({inv.devices_per_node} x {inv.cluster.hbm_gb} GiB "
              f"dies per server), preset [bold]{plan.preset}[/]")
    if len(plan.instances) > 2 or len({i.role for i in plan.instances}) < len(plan.instances):
        con.print(_instance_tree(plan))       # a fleet: instances (each its own world) and their nodes
    else:
        nodes = Table(title="Nodes (master first)", title_justify="left")
        for col in ("node", "address", "container_ip", "instance", "role", "ranks", "master"):
            nodes.add_column(col)
        for n in plan.nodes:
            inst = plan.instance(n.instance)
            master = "yes" + (" + router" if n.runs_router else "") if n.is_master else ""
            nodes.add_row(*(esc(v) for v in (n.name, n.address, n.container_ip, n.instance, n.role,
                                              _rank_range(inst, n.name), master)))
        con.print(nodes)
    e = plan.engine
    con.print(f"Engine: {esc(e.display)} {esc(e.version or 'unknown')} "
              f"(version from {esc(e.version_source)})")
    for w in e.warnings:
        con.print(f"  [yellow]WARN[/] {esc(w)}")
    for w in e.notes:
        con.print(f"  note: {esc(w)}")
    from deployctl.core.render.processes import has_router, processes

    ports = inv.engine_spec.host_ports(inv)
    router = next((n for n in plan.nodes if has_router(plan, n.name)), None)
    routed = processes(plan, router.name) if router is not None else None
    extra = f"; router on {router.name}: {', '.join(map(str, routed.router.ports))}" if routed else ""
    con.print(esc("Ports: " + ", ".join(f"{k} {v}" for k, v in ports.items()) + extra))
    if routed is not None:
        con.print(esc(f"Clients use the router: {routed.serves}"))
    mem = Table(title="Instances and memory fit per die", title_justify="left")
    mem.add_column("")
    alike: dict[tuple, list] = {}        # identical instances of a fleet share one column
    for inst in plan.instances:
        alike.setdefault((inst.role, len(inst.nodes), inst.degrees), []).append(inst)
    shown = [group[0] for group in alike.values()]
    for group in alike.values():
        inst, n = group[0], len(group[0].nodes)
        names = [i.name for i in group]
        name = inst.name if len(group) == 1 else f"{len(group)} x: " + (", ".join(names) if len(group) <= 3 else
                                                                        f"{names[0]}, {names[1]} .. {names[-1]}")
        mem.add_column(f"{name} ({n} node{'s' if n > 1 else ''})", justify="right")
    # a dense model has no experts: no expert degrees, no expert rows; the parts shown add up to the total
    moe = any(i.memory.weights_breakdown_gb.get("routed_experts", 0) > 0 for i in shown)
    parts = [(key, name) for key, name in WEIGHT_PARTS
             if any(i.memory.weights_breakdown_gb.get(key, 0) > 0 for i in shown)]
    rows = [
        ("world size", lambda i: str(i.world_size)),
        ("batch / prefill tokens", lambda i: _limits(plan, i)),
        ("tp / dp / pp / cp", lambda i: f"{i.degrees.tp} / {i.degrees.dp} / {i.degrees.pp} / {i.degrees.cp}"),
        *([("moe_tp / moe_ep", lambda i: f"{i.degrees.moe_tp} / {i.degrees.moe_ep}")] if moe else []),
        ("HBM per die", lambda i: f"{inv.cluster.hbm_gb} GiB = {i.memory.hbm_gb:.1f} GB"),
        ("usable (memory fraction)",
         lambda i: f"{i.memory.usable_gb:.1f} GB ({i.memory.fraction_name} {i.memory.memory_fraction})"),
        ("weights resident", lambda i: f"{i.memory.weights_gb:.1f} GB"),
        *[(f"  {name}", lambda i, key=key: f"{i.memory.weights_breakdown_gb.get(key, 0):.2f} GB")
          for key, name in parts],
        ("workspace", lambda i: f"{i.memory.workspace_gb:.1f} GB"),
        ("HCCL buffers", lambda i: f"{i.memory.comm_buffers_gb:.2f} GB"),
        ("KV budget", lambda i: f"{i.memory.kv_budget_gb:.1f} GB"),
        ("KV per token", lambda i: f"{i.memory.kv_bytes_per_token / 1000:.1f} KB"),
        ("max tokens in cache", lambda i: f"{i.memory.max_tokens:,}"),
        (f"max sequences @ {inv.model.max_seq_len}", lambda i: f"{i.memory.max_sequences:,}"),
    ]
    if any(i.memory.state_bytes_per_seq for i in shown):       # hybrid / compressed attention: a fixed cost a sequence
        rows.insert(-2, ("state per sequence", lambda i: f"{i.memory.state_bytes_per_seq / 1e6:.1f} MB"))
    for label, cell in rows:
        mem.add_row(label, *[cell(i) for i in shown])
    con.print(mem)
    for note in dict.fromkeys(n for i in plan.instances for n in i.memory.notes):
        con.print(f"  note: {esc(note)}")
    for line in role_settings(plan):
        con.print(esc(line))
    from deployctl.core.input.roles import for_role

    for inst in shown:
        limit = for_role(inv, inst.role).model.max_batch_size
        if inst.role != "prefill" and inst.memory.max_sequences < limit:
            con.print(f"[yellow]! {inst.name}: the KV cache holds {inst.memory.max_sequences} sequences of "
                      f"{inv.model.max_seq_len} tokens, fewer than max_batch_size {limit}; "
                      "long requests will queue or be preempted[/]")


def _limits(plan, inst) -> str:
    from deployctl.core.input.roles import for_role
    from deployctl.core.sizing.limits import max_prefill_tokens

    view = for_role(plan.inventory, inst.role)
    return f"{view.model.max_batch_size} / {max_prefill_tokens(view, inst.role):,}"


def role_settings(plan) -> list[str]:
    """pd-split: what each role sets over the engine and model blocks (layout.<role>.engine / model / env)."""
    import json

    from deployctl.core.input.roles import ROLES, role_block

    out = []
    for role in ROLES:
        block = role_block(plan.inventory, role)
        if block is None:
            continue
        parts = [f"engine.{k} {json.dumps(v, separators=(',', ':')) if not isinstance(v, list) else ' '.join(map(str, v))}"
                 for k, v in block.engine.items()]
        if block.model is not None:
            parts += [f"model.{k} {v}" for k, v in block.model.model_dump().items() if v is not None]
        parts += [f"env {k}={v}" for k, v in block.env.items()]
        if parts:
            out.append(f"{role} role sets: " + "; ".join(parts))
    return out


def _instance_tree(plan):
    from rich.tree import Tree

    from deployctl.core.render.processes import has_router

    roles = {r: len(plan.role(r)) for r in ("mixed", "prefill", "decode") if plan.role(r)}
    head = " + ".join(f"{n} {r}" for r, n in roles.items())
    front = f"router {plan.router.url} on {plan.router.node}" if plan.router else next(
        (f"the engine's router on {n.name}" for n in plan.nodes if n.runs_router), "no router")
    tree = Tree(esc(f"{len(plan.instances)} instances ({head}) on {len(plan.nodes)} servers, {front}"))
    for inst in plan.instances:
        d = inst.degrees
        branch = tree.add(esc(f"{inst.name} ({inst.role}): {len(inst.nodes)} server(s), world {inst.world_size}, "
                              f"tp {d.tp} dp {d.dp} pp {d.pp} cp {d.cp}, moe_ep {d.moe_ep}"))
        for name in inst.nodes:
            n = plan.node(name)
            tags = ", ".join(t for t, on in (("master", n.is_master), ("router", has_router(plan, name))) if on)
            branch.add(esc(f"{name} {n.container_ip} ranks {_rank_range(inst, name)}" + (f" ({tags})" if tags else "")))
    return tree


def print_estimate(est) -> None:
    """The performance estimate under the plan: labelled estimated, the binding term, each instance's step."""
    from deployctl.core.sizing.estimate import describe

    con = _console()
    lines = describe(est)
    con.print(f"[bold]Performance (estimated)[/]: {esc(lines[0])}")
    for line in lines[1:]:
        con.print(f"  {esc(line)}")
    for a in est.assumptions:
        con.print(f"  assumes: {esc(a)}")
    for w in est.warnings:
        con.print(f"  [yellow]WARN[/] {esc(w)}")


def print_render_helm(plan, out: Path, artifacts) -> None:
    con = _console()
    k = plan.inventory.kubernetes
    release = plan.inventory.helm_release
    con.print(f"✓ rendered chart values for {len(plan.nodes)} server(s) into [bold]{esc(out)}[/]: values.yaml, "
              f"chart/{', manifests.yaml' if any(a.path == 'manifests.yaml' for a in artifacts) else ''}")
    for inst in plan.instances:
        con.print(esc(f"  instance {inst.name} ({inst.role}): {len(inst.nodes)} pod(s), master on {inst.master}"))
    con.print(esc(f"  install: helm upgrade --install {release} {out}/chart --namespace {k.namespace} "
                  f"--create-namespace --values {out}/values.yaml"))
    workload = plan.inventory.kubernetes.workload
    if workload != "statefulset":
        con.print(esc(f"  or: deployctl up --target {workload} -i INV (its controller makes and rolls the pods)"))
    else:
        con.print(esc("  or: deployctl up --target k8s -i INV (also restarts only the instances that changed)"))


def print_render(plan, out: Path, artifacts) -> None:
    con = _console()
    con.print(f"✓ rendered {len(artifacts)} files for {len(plan.nodes)} node(s) into [bold]{esc(out)}[/]")
    by_dir: dict[str, list[str]] = {}
    for a in artifacts:
        head, _, name = a.path.rpartition("/")
        by_dir.setdefault(head, []).append(name)
    for folder, files in by_dir.items():
        con.print(esc(f"  {out / folder if folder else out}/: {', '.join(files)}"))
    master = plan.nodes[0]
    con.print(esc(f"  start the master first: copy {out / master.name}/ to {master.address} and run start.sh "
                  "there"))
    from deployctl.core.render.processes import has_router, processes

    router = next((n for n in plan.nodes if has_router(plan, n.name)), None)
    if router is not None:
        start = processes(plan, router.name).router.start
        con.print(esc(f"  then, when every node runs, start the router: {out / router.name}/{start} on "
                      f"{router.address}"))


def offline_notes(ctx) -> dict:
    """Where the facts came from and what preflight still has to tell, as printed (stderr) and as JSON."""
    from deployctl.core.input.gaps import NOUNS

    left = []
    for what in dict.fromkeys(g.what for g in ctx.gaps):
        gaps = [g for g in ctx.gaps if g.what == what]
        whole = {g.node for g in gaps if g.device is None}          # a node that lists no device at all
        single = [g for g in gaps if g.device is not None and g.node not in whole]
        parts = ([f"every device of {len(whole)} node(s)"] if whole and what in ("ip", "sdid") else
                 [f"{len(whole)} node(s)"] if whole else [])
        if single:
            parts.append(f"{len(single)} device(s) on {len({g.node for g in single})} node(s)")
        left.append(f"{NOUNS[what]} of {' and '.join(parts)}")
    return {"facts": str(ctx.facts) if ctx.facts else None, "facts_note": ctx.facts_note,
            "left_to_preflight": left,
            "needs_facts": [{"node": g.node, "device": g.device, "what": g.what} for g in ctx.gaps]}


def print_offline_notes(ctx) -> None:
    """The notes of offline_notes on stderr (stdout stays what the command prints)."""
    import typer

    if ctx.facts_note:
        typer.echo(f"note: {ctx.facts_note}", err=True)
    left = offline_notes(ctx)["left_to_preflight"]
    if left:
        typer.echo(f"note: left to preflight: {'; '.join(left)}. The plan does not need them; the rank tables "
                   f"do: run `deployctl preflight -i {ctx.path}` before `render` or `up`.", err=True)
