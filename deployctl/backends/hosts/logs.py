"""`deployctl logs`: collect engine logs from every host (in parallel) into a run record.

Each container's log is streamed to ``hosts/<node>/<container>.log`` as it arrives, never held in memory,
up to ``max_log`` bytes (DEPLOYCTL_MAX_LOG_MB, `--max-log-mb`; 32 MB): a log cut there, or by the deadline,
is kept and reported as truncated. What is shown is the end of each file (at most SHOW_BYTES).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from deployctl.io.records import RunRecord
from deployctl.backends.hosts.remote import container_names
from deployctl.core.render.processes import has_router
from deployctl.core.errors import UsageError
from deployctl.io.executor import DEFAULT_LOG_MB, LOG_ENV, HostError, fan_out_width, fmt_mb, limit_bytes
from deployctl.io.batch import PREAMBLE
from deployctl.io.targets import ssh_targets
from deployctl.io.executor import HostTarget
from deployctl.core.models.inventory import Inventory
from deployctl.core.models.plan import Plan

if TYPE_CHECKING:
    from deployctl.io.ssh import SshExecutor

SHOW_BYTES = 256 * 1024       # of each log's end, for the terminal / JSON (the file has all that was read)
LOG_TIMEOUT = 60.0


@dataclass
class HostLogs:
    """One host's logs: container -> the end of its log (text), files, truncation notes, or the error."""

    texts: dict[str, str] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    truncated: dict[str, str] = field(default_factory=dict)
    error: str | None = None


def logs_argv(container: str, tail: int, since: str | None) -> list[str]:
    """docker logs with its stderr merged (the PATH of the probes: docker may live in /usr/local/bin)."""
    extra = ["--since", since] if since else []
    return ["sh", "-c", PREAMBLE + '; exec "$@" 2>&1', "deployctl-logs", "docker", "logs", "--tail", str(tail),
            *extra, container]


def read_end(path: Path, limit: int = SHOW_BYTES) -> str:
    """The last ``limit`` bytes of a file as text, from a line start when the cut falls inside a line."""
    with open(path, "rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        fh.seek(max(0, size - limit))
        data = fh.read(limit)
    if size > limit and b"\n" in data:
        data = data.split(b"\n", 1)[1]
    return data.decode(errors="replace")


def fetch_host_logs(executor: SshExecutor, target: HostTarget, names: list[str], host_dir: Path, tail: int,
                    since: str | None, max_log: int, timeout: float = LOG_TIMEOUT) -> HostLogs:
    out = HostLogs()
    host_dir.mkdir(parents=True, exist_ok=True)
    for name in names:
        path = host_dir / f"{name}.log"
        try:
            with open(path, "wb") as fh:
                res = executor.stream(target, logs_argv(name, tail, since), timeout, fh, max_log)
        except HostError as exc:
            out.error = exc.message + (f" ({exc.hint})" if exc.hint else "")
            return out
        except OSError as exc:             # the run record's disk
            out.error = f"cannot save the log of {name} to {path}: {exc.strerror or exc}"
            return out
        out.files[name] = str(path)
        if res.stopped == "limit":
            out.truncated[name] = f"longer than {fmt_mb(max_log)}: only its first {fmt_mb(max_log)} was saved"
        elif res.stopped == "timeout":
            out.truncated[name] = (f"still streaming after {timeout:g} s: what came until then "
                                   f"({fmt_mb(res.nbytes)}) was saved")
        out.texts[name] = read_end(path)
    return out


def collect_logs(inv: Inventory, inventory_dir: Path, run_root: Path, hosts: list[str] | None = None,
                 since: str | None = None, tail: int = 200,
                 max_log_mb: float | None = None, plan: Plan | None = None, *,
                 executor: SshExecutor) -> tuple[dict[str, HostLogs], RunRecord]:
    """`deployctl logs` over the command's ``executor`` (app/executors.py)."""
    from deployctl.core.sizing.planner import plan_layout

    plan = plan if plan is not None else plan_layout(inv)
    engine, ms = container_names(plan)
    targets = ssh_targets(inv, inventory_dir)
    if hosts:
        unknown = sorted(set(hosts) - {t.name for t in targets})
        if unknown:
            raise UsageError(f"unknown host(s): {', '.join(unknown)}",
                             hint=f"known: {', '.join(t.name for t in targets)}")
        targets = [t for t in targets if t.name in hosts]
    max_log = limit_bytes(LOG_ENV, DEFAULT_LOG_MB, max_log_mb)

    record = RunRecord.create(run_root, "logs")

    def one(t: HostTarget) -> HostLogs:
        names = [engine] + (list(ms) if has_router(plan, t.name) else [])
        return fetch_host_logs(executor, t, names, record.path / "hosts" / t.name, tail, since, max_log)

    with ThreadPoolExecutor(max_workers=max(1, min(fan_out_width(), len(targets)))) as pool:
        results = list(pool.map(one, targets))
    record.finish("successful", 0)
    return {t.name: r for t, r in zip(targets, results)}, record
