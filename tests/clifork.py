"""Run the `deployctl` console script as users do, cheaply: a fork of the test process runs ``deployctl.cli.main``
with the argv, working directory, environment, stdin (/dev/null), stdout and stderr (pipes to files) a fresh
process would have, and exits with its code. What it saves is the interpreter's start and the imports (about
0.3 s of CPU a run, and with the modules imported and the command tree built once in the parent, 0.25 s more: most of the fast tier's time, docs/dev/testing.md). The exit code and both streams are the
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

_BUILT: list = []          # the click command typer builds from the app, built once in this process


def _warm() -> None:
    """Import every deployctl module (under a second, once per test process) and build the command tree, so a
    child spends its time on the command, not on imports the parent could have done: about 0.25 s a run."""
    if _BUILT:
        return
    import importlib
    import pkgutil

    import deployctl

    for info in pkgutil.walk_packages(deployctl.__path__, "deployctl."):
        if not info.name.endswith(".__main__"):          # that one runs the command line
            importlib.import_module(info.name)
    import jinja2  # noqa: F401 - rendering's template engine, imported by render on first use
    import typer.main

    from deployctl.cli import app

    _BUILT.append((app, typer.main.get_command(app)))
    _read_packaged_data()


def _read_packaged_data() -> None:
    """Plan and render one deployment of each engine in this process, so the packaged data every command reads
    (catalogs, support matrices, acceptance rules, hardware tables, templates: pure caches of files shipped in the
    package, deployctl/core/packaged.py) is read once here rather than in every child: 0.1 s a run. What a
    command prints is not affected: those caches hold the same data in a fresh process."""
    import contextlib
    import io
    import tempfile

    from deployctl.cli import main

    examples = Path(__file__).resolve().parent.parent / "inventories" / "examples"
    argv, cwd = sys.argv, os.getcwd()
    with tempfile.TemporaryDirectory() as out, contextlib.redirect_stdout(io.StringIO()), \
            contextlib.redirect_stderr(io.StringIO()):
        os.chdir(out)        # the default run directory (.deployctl) is looked for here: none
        try:
            for name in ("a3-pd-2p1d.yaml", "vllm-a3-1p1d-qwen3.yaml"):
                for cmd in (["plan"], ["render", "-o", f"{out}/{name}"]):
                    sys.argv = ["deployctl", cmd[0], "-i", str(examples / name), *cmd[1:]]
                    try:
                        main()
                    except SystemExit:
                        pass
        finally:
            sys.argv = argv
            os.chdir(cwd)


def _use_built_command() -> None:
    """In the child: typer builds the same click command from the same app on every call; hand it the one built
    in the parent (a typer without a module-level get_command just builds it again)."""
    import typer.main

    app, command = _BUILT[0]
    build = typer.main.get_command
    typer.main.get_command = lambda typer_instance: command if typer_instance is app else build(typer_instance)


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
    _use_built_command()
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
