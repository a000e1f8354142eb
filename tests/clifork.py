"""Run the `deployctl` console script as users do, cheaply: a fork of the test process runs ``deployctl.cli.main``
with the argv, working directory, environment, stdin (/dev/null), stdout and stderr (pipes to files) a fresh
process would have, and exits with its code. What it saves is the interpreter's start and the imports (about
0.3 s of CPU a run: most of the fast tier's time, docs/testing.md). The exit code and both streams are the
console script's: main() maps errors to codes and messages as it does there.

A real process is used instead when the test process has other threads (a fork keeps only the caller's), and
always under DEPLOYCTL_TEST_EXEC=1 (CI's full run can compare).
"""

from __future__ import annotations

import gc
import io
import os
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

WARM = ("deployctl.cli", "deployctl.cli.commands", "deployctl.app.context", "deployctl.core.inventory.validate",
        "deployctl.core.sizing.planner", "deployctl.core.render", "deployctl.core.engines.mindie", "deployctl.core.engines.vllm_ascend",
        "deployctl.core.models.inventory", "rich.console", "rich.table")


def _warm() -> None:
    import importlib

    for name in WARM:
        importlib.import_module(name)


def run(exe: Path, args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    argv = [str(exe), *map(str, args)]
    if os.environ.get("DEPLOYCTL_TEST_EXEC") == "1" or threading.active_count() > 1 or not hasattr(os, "fork"):
        return subprocess.run(argv, capture_output=True, text=True, cwd=cwd, env=env)
    _warm()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush()
        sys.stderr.flush()
        gc.freeze()              # the child's collector leaves the inherited heap alone: no copy-on-write of it
        try:
            pid = os.fork()
        except BaseException:
            gc.unfreeze()
            raise
        if pid:
            gc.unfreeze()
        if pid == 0:             # the child: never returns into pytest
            code = 1
            try:
                code = _child(argv, cwd, env, out.fileno(), err.fileno())
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        code = os.waitstatus_to_exitcode(status)
        return subprocess.CompletedProcess(argv, code, _text(out.read()), _text(err.read()))


def _text(data: bytes) -> str:
    import locale

    return data.decode(locale.getpreferredencoding(False))     # as subprocess.run(text=True) decodes


def _child(argv: list[str], cwd: Path, env: dict[str, str], out: int, err: int) -> int:
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(out, 1)
    os.dup2(err, 2)
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    # a fresh interpreter in the C locale of this environment: UTF-8 mode, surrogateescape on the streams
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8", errors="surrogateescape")
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="surrogateescape")
    sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
                                  line_buffering=True)
    sys.argv = argv
    _fresh_reporting()
    code = 0
    try:
        from deployctl.cli import main

        main()
    except SystemExit as exc:
        if exc.code is None:
            code = 0
        elif isinstance(exc.code, int):
            code = exc.code
        else:
            print(exc.code, file=sys.stderr)
            code = 1
    except BaseException:  # noqa: BLE001 - as the interpreter does: the traceback on stderr, exit 1
        import traceback

        traceback.print_exc()
        code = 1
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001
            code = code or 120           # what the interpreter does when it cannot flush at exit
    return code


def _fresh_reporting() -> None:
    """Warnings and log records as a fresh interpreter reports them (pytest records both in this process)."""
    import logging
    import warnings

    warnings.resetwarnings()
    for action, category in (("ignore", ResourceWarning), ("ignore", ImportWarning),
                             ("ignore", PendingDeprecationWarning), ("ignore", DeprecationWarning)):
        warnings.simplefilter(action, category)
    warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
    warnings.showwarning = warnings._showwarning_orig
    warnings._showwarnmsg_impl = lambda msg: sys.stderr.write(warnings._formatwarnmsg(msg))
    logging.root.handlers[:] = []
    logging.root.setLevel(logging.WARNING)
