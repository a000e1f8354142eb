"""One error handler: DeployctlError -> message + exit code; tracebacks only with --debug."""

from __future__ import annotations

import json
import sys
import traceback


def handle(exc: BaseException, debug: bool) -> int:
    """Print ``exc`` for the user and return the exit code (spec §2: 1 failed, 2 bad input)."""
    from deployctl.core.errors import DeployctlError
    from deployctl.core.textsafe import clean, clean_data

    if debug:
        traceback.print_exception(exc)
    if isinstance(exc, DeployctlError):
        if _json_requested():
            print(json.dumps(clean_data(exc.to_dict()), indent=2))
        else:      # messages quote what hosts printed: no escape sequence reaches the terminal
            print(clean(exc.render()), file=sys.stderr)
        return exc.exit_code
    text = clean(str(exc))
    if len(text) > 1000:      # e.g. a value from a hostile inventory: keep the message readable
        text = text[:1000] + f"… ({len(text) - 1000} more characters)"
    print(f"✗ unexpected error: {type(exc).__name__}: {text}\n"
          "This is a deployctl bug. Rerun with --debug and report the traceback.", file=sys.stderr)
    return 1


def _json_requested() -> bool:
    args = sys.argv
    for i, a in enumerate(args):
        if a in ("--output", "-O") and i + 1 < len(args) and args[i + 1] == "json":
            return True
        if a in ("--output=json", "-Ojson"):
            return True
    return False
