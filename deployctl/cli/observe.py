"""`deployctl observe render`: the Prometheus scrape configuration and the Grafana dashboard of a deployment
(deployctl.features.observe does the work; docs/observability.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from deployctl.cli._options import FactsOpt, InventoryOpt, OutputFormat, OutputOpt, RunDirOpt

observe_app = typer.Typer(help="Monitoring: render a Prometheus scrape configuration and a Grafana dashboard.",
                          no_args_is_help=True)


@observe_app.command("render")
def render(
    inventory: InventoryOpt,
    out: Annotated[Path, typer.Option("-o", "--out", metavar="DIR", file_okay=False,
                                      help="Directory for prometheus.yml and grafana-dashboard.json (created if "
                                           "missing; other files in it stay).")],
    npu_exporter: Annotated[bool, typer.Option(
        "--npu-exporter/--no-npu-exporter", help="Also scrape Ascend's npu-exporter (MindCluster) on every node.")]
    = False,
    npu_exporter_port: Annotated[int, typer.Option(
        "--npu-exporter-port", min=1025, max=40000, help="npu-exporter's port (its default 8082).")] = 8082,
    npu_exporter_https: Annotated[bool, typer.Option(
        "--npu-exporter-https/--npu-exporter-http", help="npu-exporter serves https unless started with "
                                                         "-enableHTTP.")] = False,
    interval: Annotated[int, typer.Option("--interval", min=1, max=3600, metavar="SECONDS",
                                          help="Scrape interval.")] = 15,
    output: OutputOpt = OutputFormat.text,
    facts: FactsOpt = None,
    run_dir: RunDirOpt = Path(".deployctl"),
):
    """Write prometheus.yml (a scrape job for every engine's metrics endpoint, the fleet router's HAProxy exporter
    and, with --npu-exporter, Ascend's npu-exporter; labels cluster, node, deployctl_instance, role, and
    Prometheus's own instance, host:port) and grafana-dashboard.json (TTFT, TPOT, throughput, requests in flight
    and queued, KV cache per instance, router backends, NPU health and HBM, restarts). Touches no host.

    Examples:

    \b
      deployctl observe render -i my.yaml -o monitoring/
      deployctl observe render -i my.yaml -o monitoring/ --npu-exporter --npu-exporter-port 8082
      prometheus --config.file=monitoring/prometheus.yml
    """
    from deployctl.app.plan import planned
    from deployctl.features.observe.render import render_files, write_files

    plan = planned(inventory, facts, run_dir).plan       # device IPs are not scraped: they may be left out
    files, found = render_files(plan, npu_exporter_port if npu_exporter else None,
                                "https" if npu_exporter_https else "http", interval)
    try:
        paths = write_files(out, files)
    except OSError as exc:
        from deployctl.core.errors import UsageError

        raise UsageError(f"cannot write {out}: {exc.strerror or exc}",
                         hint="pass -o with a writable directory") from None
    if output.value == "json":
        typer.echo(json.dumps({"files": [str(p) for p in paths], "targets": [
            {"job": t.job, "address": t.address, "path": t.path, "labels": t.labels, "needs": t.needs}
            for t in found]}, indent=2))
        return
    from deployctl.features.observe.scrape import INSTANCE_LABEL

    for t in found:
        typer.echo(f"{t.job:18} {t.labels.get(INSTANCE_LABEL, ''):24} {t.labels.get('node', ''):16} "
                   f"{t.scheme}://{t.address}{t.path}")
    for need in sorted({t.needs for t in found if t.needs}):
        typer.echo(f"WARN: {need}", err=True)
    for p in paths:
        typer.echo(f"wrote {p}", err=True)
