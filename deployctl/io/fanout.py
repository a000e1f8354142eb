"""Fan probes out to every host in parallel: one SSH connection per host, bounded thread pool."""

from __future__ import annotations

import time
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Callable

from deployctl.io.executor import (Executor, HostError, HostTarget, OutputLimitExceeded, fan_out_width,
                                   short_command)
from deployctl.io.batch import BEGIN, ProbeOutput, batch_argv, split_outputs

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


def flooding_probe(exc: OutputLimitExceeded, commands: Commands) -> OutputLimitExceeded:
    """The cap was hit while a batch ran: name the probe that was printing (the last one begun; a parallel
    batch prints its probes' outputs in order too), without the output read so far."""
    output = exc.output or b""
    at = output.rfind(BEGIN.encode() + b" ")
    name = output[at + len(BEGIN) + 1:].split(b"\n", 1)[0].decode(errors="replace") if at >= 0 else ""
    argv = dict(commands).get(name)
    return exc.relabel(short_command(argv) if argv else exc.command)


def probe_host(executor: Executor, target: HostTarget, commands: Commands, timeout: float,
               progress: Progress | None = None, measure_clock: bool = True, parallel: bool | int = False) -> HostRun:
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
        run.error = flooding_probe(exc, commands) if isinstance(exc, OutputLimitExceeded) else exc
        if progress:
            progress(target.name, f"failed: {exc.kind}")
    run.seconds = time.monotonic() - start
    return run


def fan_out(executor: Executor, targets: list[HostTarget], commands_for: Callable[[HostTarget], Commands],
            timeout: float, workers: int | None = None, progress: Progress | None = None,
            measure_clock: bool = True, parallel: bool | int = False) -> dict[str, HostRun]:
    """Probe all hosts at once (at most ``workers`` in flight); results keep the targets' order.

    A host that cannot be reached, authenticated or that times out becomes a HostRun with ``error``;
    the others are not affected.
    """
    if not targets:
        return {}
    with ThreadPoolExecutor(max_workers=max(1, min(workers or fan_out_width(), len(targets)))) as pool:
        futures = [pool.submit(probe_host, executor, t, commands_for(t), timeout, progress, measure_clock,
                               parallel) for t in targets]
        return {t.name: f.result() for t, f in zip(targets, futures)}


# what a first-stage result lets run next: (host, commands) pairs, for that host or for others
FollowUps = Callable[[HostRun], list[tuple[HostTarget, Commands]]]


def fan_out_pipelined(executor: Executor, targets: list[HostTarget], commands_for: Callable[[HostTarget], Commands],
                      follow_ups: FollowUps, timeout: float, workers: int | None = None, progress: Progress | None = None,
                      follow_progress: Progress | None = None, parallel: bool | int = False,
                      follow_parallel: bool | int = True) -> tuple[dict[str, HostRun], dict[str, HostRun]]:
    """Two stages without a barrier between them: every host's first stage (clock + ``commands_for``),
    and second-stage batches (no clock) that start as soon as ``follow_ups`` says they can.

    ``follow_ups`` is called in this thread with each first-stage HostRun as it comes back (in completion
    order) and returns the second-stage batches that became runnable. One pool of ``workers`` threads
    runs both stages (first-stage batches are queued first). Returns (first, second) runs, each in the
    targets' order; the second holds only the hosts that got a second stage.
    """
    if not targets:
        return {}, {}
    first: dict[str, HostRun] = {}
    second: dict[str, HostRun] = {}
    with ThreadPoolExecutor(max_workers=max(1, min(workers or fan_out_width(), len(targets)))) as pool:
        pending: dict[Future, bool] = {   # future -> is it a first stage
            pool.submit(probe_host, executor, t, commands_for(t), timeout, progress, True, parallel): True
            for t in targets}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                run = future.result()
                if not pending.pop(future):
                    second[run.target.name] = run
                    continue
                first[run.target.name] = run
                for target, commands in follow_ups(run):
                    pending[pool.submit(probe_host, executor, target, commands, timeout, follow_progress, False,
                                        follow_parallel)] = False
    order = [t.name for t in targets]
    return {n: first[n] for n in order}, {n: second[n] for n in order if n in second}


def run_script(executor: Executor, targets: list[HostTarget], argv_for: Callable[[HostTarget], list[str]],
               timeout: float) -> list[str]:
    """Run one command on every target in parallel; returns the hosts where it failed."""
    def one(t: HostTarget) -> str | None:
        try:
            res = executor.run(t, argv_for(t), timeout)
        except HostError as exc:
            return f"{t.name} ({exc.message})"
        return None if res.rc == 0 else f"{t.name} (rc {res.rc}: {(res.stdout + res.stderr).strip()[:200]})"

    if not targets:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(fan_out_width(), len(targets)))) as pool:
        return [x for x in pool.map(one, targets) if x]
