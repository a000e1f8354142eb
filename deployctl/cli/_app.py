"""The typer app and its global options (--debug, --version, --max-output-mb, --fan-out); the commands register on it
(cmd_offline.py, cmd_deployment.py, cmd_tools.py, in the order `deployctl --help` lists them)."""

from __future__ import annotations

import os
from typing import Annotated, Optional

import typer

from deployctl.cli._options import DebugOpt, FanOutOpt, MaxOutputOpt
from deployctl.core.docs_url import GUIDES, doc


app = typer.Typer(
    name="deployctl",
    help="Plan, render and launch deployments of large MoE models on Ascend A2/A3 clusters (engines: "
         "`deployctl engines` shows each one's supported combinations).\n\n"
         "Start with `deployctl init` (a commented sample inventory and examples), "
         "`deployctl validate -i inventory.yaml`, then `deployctl plan` to see the layout, "
         "ranks and memory fit per die, then `deployctl render -o DIR` for every file the engine needs. "
         "`deployctl preflight` probes the hosts (and discovers their device IPs); `up`, `status`, `diff`, "
         "`history`, `rollback`, `logs`, `down` run the deployment, verified on the hosts. "
         "Kubernetes: `render --target k8s` and `up|status|diff|history|rollback|down --target k8s` "
         f"(the engine's Helm chart). Errors and fixes: {doc('troubleshooting.md')} (every guide: {GUIDES}).",
    no_args_is_help=True, pretty_exceptions_enable=False, rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)

_state = {"debug": False}


def _version(value: bool):
    if value:
        from deployctl import __version__

        typer.echo(f"deployctl {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: DebugOpt = False,
    version: Annotated[Optional[bool], typer.Option("--version", callback=_version, is_eager=True,
                                                    help="Print the version and exit.")] = None,
    max_output_mb: MaxOutputOpt = None,
    fan_out: FanOutOpt = None,
):
    _state["debug"] = debug or os.environ.get("DEPLOYCTL_DEBUG") == "1"
    if max_output_mb is not None:       # read by every SSH executor (deployctl.io.executor.limit_bytes)
        from deployctl.io.executor import OUTPUT_ENV

        os.environ[OUTPUT_ENV] = f"{max_output_mb:g}"
    if fan_out is not None:             # read by every fan-out (deployctl.io.executor.fan_out_width)
        from deployctl.io.executor import FAN_OUT_ENV

        os.environ[FAN_OUT_ENV] = str(fan_out)
