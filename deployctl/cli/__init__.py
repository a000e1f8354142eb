"""The `deployctl` command line (typer). Commands are thin; heavy imports happen inside them.

The app and its global options: _app.py; the commands, by area: cmd_offline.py (no host), cmd_deployment.py
(hosts and cluster), cmd_tools.py; what they run: commands.py, deploy.py, k8s.py, preflight.py, bench.py, ...
"""

from __future__ import annotations

import sys

from deployctl.cli._app import _state, app
# the commands register on the app as they are imported, in the order `deployctl --help` lists them
from deployctl.cli import cmd_offline  # noqa: E402,F401,I001
from deployctl.cli import cmd_deployment  # noqa: E402,F401,I001
from deployctl.cli import cmd_tools  # noqa: E402,F401,I001

__all__ = ["app", "main"]


def main() -> None:
    """Entry point: run the app and map errors to messages and exit codes (spec §2)."""
    from deployctl.cli._errors import handle

    try:
        app()
    except Exception as exc:  # noqa: BLE001 - the one place errors become exit codes
        sys.exit(handle(exc, _state["debug"]))
