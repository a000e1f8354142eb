"""`deployctl weights check|sync`: are the checkpoint's files the same on every node; copy what differs
(deployctl.features.weights does the work; this loads the inventory, shows progress and prints the tables)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from deployctl.cli._options import InventoryOpt, OutputFormat, OutputOpt
from deployctl.core.docs_url import doc

weights_app = typer.Typer(help="The checkpoint's files on every node: compare them (check), copy what differs "
                               f"(sync). Guide: {doc('weights.md')}", no_args_is_help=True)

HashOpt = Annotated[bool, typer.Option("--hash", help="Compare sha256 too (computed on the nodes, in parallel; "
                                                      "reads every byte: minutes for hundreds of GB).")]
TrustOpt = Annotated[bool, typer.Option("--trust-new-hosts", help="Record unknown host keys on first use.")]
TimeoutOpt = Annotated[float, typer.Option("--timeout", min=1, help="Seconds per SSH command (listing without "
                                                                    "--hash; a copy's stall timeout).")]


@weights_app.command("check")
def check(inventory: InventoryOpt, hashes: HashOpt = False, output: OutputOpt = OutputFormat.text,
          trust_new_hosts: TrustOpt = False, timeout: TimeoutOpt = 60.0):
    """List, on every node in parallel, the files the checkpoint's index names (model.safetensors.index.json's
    shards, config.json and the index itself) under model.weights_path, and show what differs: missing, size,
    or sha256 with --hash. The index is read from the first node that has a readable one. The last line says
    what to do: sync from a node that holds every file right, or, when no node does, how to get the checkpoint
    onto one (--output json: `advice.kind`).

    Exit 0 when every node holds the same files, 1 when anything differs or a node could not be checked,
    2 for a bad inventory.

    Examples:

    \b
      deployctl weights check -i my.yaml
      deployctl weights check -i my.yaml --hash --output json
    """
    from deployctl.features.weights.advice import advise
    from deployctl.features.weights.check import check_weights

    inv, targets, directory = _load(inventory)
    if hashes and output.value != "json":
        typer.echo(f"hashing on {len(targets)} nodes at once (sha256 reads every byte: minutes for hundreds "
                   "of GB)…", err=True)
    with _executor(trust_new_hosts) as executor:
        result = check_weights(executor, targets, directory, hashes=hashes, timeout=timeout)
    if output.value == "json":
        from deployctl.cli._output import echo_json

        echo_json({**result.as_dict(), "advice": advise(result).as_dict()})
    else:
        _print_check(result, len(targets), advise(result))
    raise typer.Exit(0 if result.ok else 1)


@weights_app.command("sync")
def sync(inventory: InventoryOpt,
         source: Annotated[str, typer.Option("--from", metavar="NODE|PATH", help="A node of the inventory, or a "
                                             "directory on this machine holding the checkpoint.")],
         to: Annotated[Optional[str], typer.Option("--to", metavar="NODES", help="Comma-separated nodes to "
                                                   "copy to (default: every node but the source).")] = None,
         hashes: HashOpt = False, output: OutputOpt = OutputFormat.text, trust_new_hosts: TrustOpt = False,
         timeout: TimeoutOpt = 60.0):
    """Copy the files a node lacks or holds differently (size; sha256 with --hash) from the source to it, to
    all such nodes in parallel, through this machine (it holds the SSH keys; the nodes need none for each
    other). Resumable: an interrupted file continues from where it stopped, once its bytes are checked against
    the source's. Then checks again: the outcome is what the nodes hold afterwards. No symbolic link below
    the weights directory is followed on any side: a source holding one is refused, naming it.

    Exit 0 when every node matches the source afterwards, 1 otherwise (also a node without the free space for
    its copies: nothing is copied to it), 2 for a bad inventory or source (links; shards larger than the
    index's metadata.total_size allows).

    Examples:

    \b
      deployctl weights sync -i my.yaml --from node1
      deployctl weights sync -i my.yaml --from /data/models/DeepSeek-R1 --to node3,node4 --hash
    """
    from deployctl.core.errors import UsageError
    from deployctl.io.executor import HostError
    from deployctl.features.weights.sync import Source, sync_weights

    inv, targets, directory = _load(inventory)
    by_name = {t.name: t for t in targets}
    if source in by_name:
        src = Source(source, directory, target=by_name[source])
    elif Path(source).is_dir():
        src = Source(f"local:{Path(source).resolve()}", directory, local=Path(source).resolve())
    else:
        raise UsageError(f"--from {source}: neither a node of the inventory nor a directory on this machine",
                         hint=f"nodes: {', '.join(by_name)}")
    names = [n.strip() for n in to.split(",") if n.strip()] if to else [n for n in by_name if n != source]
    unknown = [n for n in names if n not in by_name]
    if unknown or not names or source in names:
        raise UsageError(f"--to {to}: {'unknown node ' + ', '.join(unknown) if unknown else 'no node to copy to'}"
                         if unknown or not names else f"--to {to} names the source {source}",
                         hint=f"nodes: {', '.join(by_name)}")
    bar = _Bars(output.value != "json")
    try:
        with _executor(trust_new_hosts) as executor:
            result = sync_weights(executor, src, [by_name[n] for n in names], directory, hashes=hashes,
                                  timeout=timeout, progress=bar.advance, on_plan=bar.start)
    except HostError as exc:
        raise UsageError(f"cannot sync from {exc.host}: {exc.message}", hint=exc.hint) from None
    except ValueError as exc:            # an unsafe name in the source's index
        raise UsageError(f"the source's index: {exc}", hint="sync from a checkpoint whose index names plain "
                         "file names") from None
    finally:
        bar.stop()
    if output.value == "json":
        from deployctl.cli._output import echo_json

        echo_json({"source": result.source, "copied": [{"node": n, "file": f, "bytes": b}
                                                        for n, f, b in result.copies],
                   "resumed": [{"node": n, "file": f, "from_byte": b} for n, f, b in result.resumed],
                   "failed": [d.as_dict() for d in result.failed], "skipped": [d.as_dict() for d in result.skipped],
                   "distrusted": [d.as_dict() for d in result.distrusted],
                   "after": result.after.as_dict() if result.after else None, "ok": result.ok})
    else:
        _print_sync(result, len(names))
    raise typer.Exit(0 if result.ok else 1)


def _load(inventory: Path):
    """(inventory, ssh targets, weights directory); a weights_path deployctl will not put in a command: exit 2."""
    from deployctl.app.plan import for_discovery
    from deployctl.core.errors import InventoryError
    from deployctl.io.targets import ssh_targets
    from deployctl.features.weights.listing import safe_dir

    ctx = for_discovery(inventory)
    raw, inv = ctx.raw, ctx.inventory
    try:
        directory = safe_dir(inv.model.weights_path)
    except ValueError as exc:
        raise InventoryError(f"cannot check the weights of {inventory}", problems=[raw.problem(
            ("model", "weights_path"), str(exc), "give the plain absolute path of the checkpoint on the nodes")]) \
            from None
    return inv, ssh_targets(inv, inventory.parent), directory


def _executor(trust_new_hosts: bool):
    """The command's SSH executor (app/executors.py), closed by the caller."""
    from deployctl.app.executors import ssh

    return ssh(trust_new_hosts=trust_new_hosts)


def _diff_table(title: str, diffs):
    from rich.table import Table

    from deployctl.cli._output import esc

    table = Table(title=title, title_justify="left")
    for col in ("node", "file", "differs", "has", "expected"):
        table.add_column(col)
    for d in diffs:
        table.add_row(esc(d.node), esc(d.file or "(all)"), esc(d.kind), esc(d.have), esc(d.want))
    return table


def _print_check(result, nodes: int, advice) -> None:
    from deployctl.cli._output import esc, run_console

    con = run_console()
    what = "sizes and sha256" if result.hashes else "sizes"
    src = f"the index of {result.index_from}" if result.index_from else "no readable index on any node"
    con.print(esc(f"Weights in {result.directory}: {len(result.files)} files ({src}), {nodes} nodes, {what}"))
    if result.ok:
        con.print(f"[green]✓ the same {len(result.files)} files on every node[/]")
        return
    con.print(_diff_table(f"Differences: {len(result.differences)}", result.differences))
    bad = sorted({d.node for d in result.differences})
    where = f"differs on {', '.join(bad)}: " if advice.kind in ("sync", "choose-source") else ""
    con.print(esc(f"✗ {where}{advice.text}"), style="red")


def _print_sync(result, nodes: int) -> None:
    from deployctl.cli._output import esc, run_console

    con = run_console()
    total = sum(b for _, _, b in result.copies)
    con.print(esc(f"Sync from {result.source}: {len(result.copies)} file copies ({total:,} bytes) to "
                  f"{len({n for n, _, _ in result.copies})} of {nodes} nodes"))
    for node, name, start in result.resumed:
        con.print(esc(f"  {node}: {name} resumed at byte {start:,}"))
    for d in result.distrusted:
        con.print(esc(f"  {d.node}: {d.have}"), style="yellow")
    for title, diffs in (("Not copied", result.skipped), ("Copies that failed", result.failed)):
        if diffs:
            con.print(_diff_table(title, diffs))
    after = result.after
    if after is not None and after.ok and not result.failed:
        con.print(f"[green]✓ checked again: every node holds the source's {len(after.files)} files[/]")
    elif after is not None:
        con.print(_diff_table("Still different after the copy", after.differences))
        con.print("[red]✗ not every node matches the source: run the sync again (it resumes)[/]")


class _Bars:
    """One rich progress bar per node being copied to (stderr); nothing in JSON mode."""

    def __init__(self, enabled: bool):
        self.enabled, self.progress, self.tasks = enabled, None, {}

    def start(self, copies) -> None:
        if not self.enabled or not copies:
            return
        from rich.progress import (BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn,
                                   TransferSpeedColumn)

        from deployctl.cli._output import esc, run_console

        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
                                 TransferSpeedColumn(), TimeRemainingColumn(), console=run_console(stderr=True))
        totals: dict[str, int] = {}
        for node, _, size in copies:
            totals[node] = totals.get(node, 0) + size
        for node, size in totals.items():
            self.tasks[node] = self.progress.add_task(esc(node), total=size)
        self.progress.start()

    def advance(self, node: str, nbytes: int) -> None:
        if self.progress is not None and node in self.tasks:
            self.progress.advance(self.tasks[node], nbytes)

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
