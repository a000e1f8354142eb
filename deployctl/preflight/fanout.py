"""Fan probes out to every host in parallel: one SSH connection per host, bounded thread pool."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Callable

from deployctl.executors.base import Executor, HostError, HostTarget
from deployctl.preflight.batch import ProbeOutput, batch_argv, split_outputs

Commands = list[tuple[str, list[str]]]
Progress = Callable[[str, str], None]


@dataclass
class HostRun:
    """What came back from one host: probe outputs, or the error that made it unusable."""

    target: HostTarget
    outputs: dict[str, ProbeOutput] = field(default_factory=dict)
    error: HostError | None = None
    clock_offset_s: float | None = None
    seconds: float = 0.0


def _clock_offset(executor: Executor, target: HostTarget, timeout: float) -> float | None:
    """Remote clock minus local clock, corrected by half the round trip."""
    t0 = time.time()
    res = executor.run(target, ["date", "+%s.%N"], timeout)
    t1 = time.time()
    try:
        return float(res.stdout.strip()) - (t0 + t1) / 2
    except ValueError:
        return None


def probe_host(executor: Executor, target: HostTarget, commands: Commands, timeout: float,
               progress: Progress | None = None, measure_clock: bool = True, parallel: bool = False) -> HostRun:
    run = HostRun(target)
    start = time.monotonic()
    try:
        if progress:
            progress(target.name, "connecting")
        if measure_clock:
            run.clock_offset_s = _clock_offset(executor, target, timeout)
        if progress:
            progress(target.name, f"running {len(commands)} probes")
        result = executor.run(target, batch_argv(commands, per_command_timeout=max(5, int(timeout)),
                                                 parallel=parallel), timeout)
        run.outputs = split_outputs(result.stdout)
        if progress:
            progress(target.name, "done")
    except HostError as exc:
        run.error = exc
        if progress:
            progress(target.name, f"failed: {exc.kind}")
    run.seconds = time.monotonic() - start
    return run


def fan_out(executor: Executor, targets: list[HostTarget], commands_for: Callable[[HostTarget], Commands],
            timeout: float, workers: int = 32, progress: Progress | None = None,
            measure_clock: bool = True, parallel: bool = False) -> dict[str, HostRun]:
    """Probe all hosts at once (at most ``workers`` in flight); results keep the targets' order.

    A host that cannot be reached, authenticated or that times out becomes a HostRun with ``error``;
    the others are not affected.
    """
    if not targets:
        return {}
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(targets)))) as pool:
        futures = [pool.submit(probe_host, executor, t, commands_for(t), timeout, progress, measure_clock,
                               parallel) for t in targets]
        return {t.name: f.result() for t, f in zip(targets, futures)}
