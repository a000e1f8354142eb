"""An engine that answers its health check but cannot infer: the watch's hang probe (deploy.recovery.hang_probe,
docs/watch.md).

The idea is MindIE-Motor's virtual inference (docs/dev/scaling-sources.md "Catching an engine that answers /health but
cannot infer"): while an instance is idle, send it a one-token completion of the watch's own; count the ones in a row
that fail, but not while the NPU is busy (its AI Cube usage at or above ``npu_busy_pct``: a busy NPU explains a slow
answer); ``failures`` in a row make the instance hung. Where the engine spec knows the request (``infer_probe``), one
thread per instance does, every watch interval:

1. read the instance's load from its engine's own gauges (running + waiting requests, every metrics endpoint of the
   instance, read on its master: ``ENGINE_LOAD``). Idle is a count of at most the probes of the watch's own that
   failed in a row (a hung engine may still count them); a load that cannot be read is never idle, and nothing is
   sent;
2. when idle, send the probe (``INFER``: the request, timeout ``timeout_s``, ``warmup_timeout_s`` for the first one
   after the engine's (re)start), from the master, over the executor. The probe that would make the verdict also
   reads the NPU's AI Cube usage at the same time, over the same seconds (``NPU_USAGE``, on the master's first
   device: MindIE-Motor samples during its probe too). npu-smi must not run twice at once on a host (hiascend
   npusmi_0004): that batch holds the node's lock of ``npu_locks``, which the watch's rounds hold while they read
   the nodes (`npu-smi info`);
3. judge (``judge``, pure): an answer (2xx) clears the count and a verdict; an answer the engine refused (4xx: the
   probe itself is wrong for it) clears them too and is a note; a timeout, a 5xx or a failed connection is a failure,
   unless the NPU was busy (then the count starts again, as MindIE-Motor's does). ``failures`` of them make the
   verdict, which stands until an answer clears it.

The watch turns a verdict into a fault of kind ``hang`` on the instance's master node (observe.NodeObs.hang), which
fails the instance and feeds its recovery like a dead engine (recover.DEAD). Everything a host said is parsed by
the facts (deployctl.probes): bounded, typed, never spliced anywhere.
"""

from __future__ import annotations

import threading
import time
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import Callable

from deployctl.core.engine_spec.protocol import InferProbe
from deployctl.core.models.hostdata import printable
from deployctl.core.models.plan import Plan
from deployctl.core.models.recovery import HangProbe
from deployctl.io.executor import Executor, HostTarget
from deployctl.io.fanout import fan_out
from deployctl.probes.engine_load import ENGINE_LOAD, EngineLoad
from deployctl.probes.infer import INFER, InferAnswer
from deployctl.probes.npu_smi_watch import NPU_USAGE, NpuUsage, npu_chip

SSH_S = 10.0            # s: on top of a probe's own timeout, for the SSH round trip and the host's python3
LOAD_TIMEOUT = 10.0     # s: reading the gauges (the script's own HTTP timeout is 3 s)
MAX_NOTES = 200         # distinct notes of the probe per watch run


@dataclass(frozen=True)
class Target:
    """One instance's probe: the request, the gauges that say whether it is idle, the NPU that says it is busy."""

    instance: str
    probe: InferProbe
    metrics: tuple[str, ...]          # http://host:port/metrics of every API process of the instance
    npu: tuple[int, int]              # npu-smi's (NPU, chip) of the master's first device
    device: int                       # that device's physical id


@dataclass(frozen=True)
class Count:
    """Where an instance's probes stand."""

    started: str | None = None        # the engine start they are of (a new start: warm-up again)
    warm: bool = False                # a probe answered since that start
    failures: int = 0                 # in a row
    last: str = ""                    # how the last one failed
    same: bool = True                 # every failure of the row failed that way
    verdict: str = ""                 # the cause, while the instance is hung


@dataclass(frozen=True)
class Judged:
    count: Count
    note: str = ""                    # for people, once (a refused probe)


def failure(answer: InferAnswer | None, timeout: float) -> str:
    """How a probe failed, for the cause ("" : it did not)."""
    if answer is None:
        return f"did not answer within {timeout:g} s"
    if answer.outcome == "timeout":
        return f"timed out after {timeout:g} s"
    if answer.outcome == "error":
        return f"could not connect ({answer.error})"
    return f"answered HTTP {answer.status}" if answer.status is not None and answer.status >= 500 else ""


def usage_text(target: Target, usage: NpuUsage | None, why: str) -> str:
    where = f"device {target.device} (NPU {target.npu[0]} chip {target.npu[1]})"
    if usage is not None and usage.peak is not None:
        return f"{where} AI Cube usage {usage.peak:g} % at most (npu-smi info watch -s u)"
    if usage is not None and usage.refused:
        why = f"npu-smi: {usage.refused}; it needs HDK 26.0.RC1 or later"
    return f"{where} AI Cube usage not read ({why or 'npu-smi printed no sample'})"


def judge(count: Count, answer: InferAnswer | None, usage: NpuUsage | None, target: Target, *, failures: int,
          busy_pct: float, timeout: float, usage_why: str = "") -> Judged:
    """The count after one probe (``answer`` None: killed before it printed, a timeout; ``usage`` read only with the
    probe that could make the verdict). Pure."""
    if answer is not None and answer.status is not None and answer.status < 500:
        note = "" if answer.ok else (f"{target.instance} answered the hang probe with HTTP {answer.status} "
                                     f"({target.probe.url}): the probe does not fit it; not counted")
        return Judged(Count(started=count.started, warm=True), note)
    how = failure(answer, timeout)
    peak = usage.peak if usage is not None else None
    if peak is not None and peak >= busy_pct:       # the NPU is busy: a slow answer is no hang
        return Judged(Count(started=count.started, warm=count.warm))
    n = count.failures + 1
    same = count.same and (count.failures == 0 or how == count.last)
    verdict = count.verdict
    if n >= failures and not verdict:
        what = (f"a 1-token completion {how}, {n} time{'s' if n > 1 else ''} in a row" if same else
                f"{n} 1-token completions in a row failed (the last {how})")
        verdict = (f"answers its health check but {what}; "
                   + usage_text(target, usage, usage_why))
    return Judged(replace(count, failures=n, last=how, same=same, verdict=verdict, warm=True))


def idle(loads: list[EngineLoad], failed: int) -> tuple[bool | None, str]:
    """(idle, why not known): requests running or waiting on every endpoint, summed; at most ``failed`` (the
    watch's own probes a hung engine may still count) is idle. None when any endpoint's count is unknown."""
    total = 0.0
    for load in loads:
        if load.error:
            return None, f"its metrics did not answer ({load.error})"
        if load.running is None or load.waiting is None:
            return None, "its metrics have no running/waiting gauges"
        total += load.running + load.waiting
    return total <= failed, ""


def targets(plan: Plan) -> tuple[dict[str, Target], dict[str, str]]:
    """Every instance's probe, and why the others are not probed (the engine spec's answer)."""
    spec = plan.engine_spec
    metrics: dict[str, list[str]] = {}
    for m in spec.metrics_targets(plan):
        metrics.setdefault(m.instance, []).append(f"http://{m.address}{m.path}")
    out, gaps = {}, {}
    for inst in plan.instances:
        probe = spec.infer_probe(plan, inst.name)
        if isinstance(probe, str):
            gaps[inst.name] = probe
        elif not metrics.get(inst.name):
            gaps[inst.name] = "its engine serves no metrics to tell whether it is idle"
        else:
            dev = plan.node(probe.node).device_ids[0]
            out[inst.name] = Target(inst.name, probe, tuple(metrics[inst.name]),
                                    npu_chip(plan.inventory.cluster.hardware, dev), dev)
    return out, gaps


@dataclass
class HangProber:
    """One thread per probed instance (``start``); ``verdicts`` for the watch's rounds."""

    plan: Plan
    cfg: HangProbe                                # deploy.recovery.hang_probe
    executor: Executor
    hosts: dict[str, HostTarget]
    interval: float
    cancel: threading.Event
    ready: Callable[[str], str | None]            # the engine start of a probe-able instance, else None
    note: Callable[[str], None]
    npu_locks: dict[str, threading.Lock] = field(default_factory=dict)     # node -> held while npu-smi runs there
    probes: dict[str, Target] = field(init=False)
    gaps: dict[str, str] = field(init=False)
    counts: dict[str, Count] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    threads: list[threading.Thread] = field(default_factory=list)
    noted: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.probes, self.gaps = targets(self.plan)

    # ---- what the watch asks -----------------------------------------------------------------------------
    def verdicts(self) -> dict[str, tuple[str, str]]:
        """instance -> (node, cause) of every instance hung now."""
        with self.lock:
            return {n: (self.probes[n].probe.node, c.verdict) for n, c in self.counts.items() if c.verdict}

    def forget(self, instance: str | None = None) -> None:
        """A recovered instance (or, None, every one: the deployment was taken down) starts afresh."""
        with self.lock:
            for name in [instance] if instance else list(self.counts):
                self.counts.pop(name, None)

    def start(self) -> None:
        # the instances the engine gives no probe (``gaps``) are not announced at every start (an event goes to
        # the hooks): docs/watch.md lists them; `watch --once --output json` carries them (``not_probed``)
        for name in self.probes:
            t = threading.Thread(target=self._loop, args=(name,), daemon=True, name=f"hang-probe-{name}")
            self.threads.append(t)
            t.start()

    def join(self, timeout: float = 2.0) -> None:
        for t in self.threads:
            t.join(timeout)

    # ---- one instance --------------------------------------------------------------------------------------
    def _loop(self, name: str) -> None:
        while not self.cancel.is_set():
            t0 = time.monotonic()
            try:
                self.cycle(name)
            except Exception as exc:    # noqa: BLE001 - the probe never ends the watch; it says why it stopped
                self._say(f"hang probe of {name}: {type(exc).__name__}: {printable(str(exc), 200)}")
            self.cancel.wait(max(0.2, self.interval - (time.monotonic() - t0)))

    def cycle(self, name: str) -> None:
        """One probe of ``name`` when it can be probed and is idle."""
        target = self.probes[name]
        started = self.ready(name)
        if started is None:
            return                      # not serving now (a round's hiccup keeps the count; a new start does not)
        with self.lock:
            count = self.counts.get(name, Count())
            if started != count.started:
                count = self.counts[name] = Count(started=started)     # a new engine start: warm up again
        free, why = self._idle(target, count.failures)
        if free is None:
            self._say(f"hang probe: {name} not probed while its load is unknown: {why}")
            return
        if not free:
            return
        cfg = self.cfg
        decisive = count.failures + 1 >= cfg.failures and not count.verdict
        timeout = cfg.timeout_s if count.warm else cfg.warmup_timeout_s
        probed = self._probe(target, timeout, decisive)
        if probed is None:
            return                      # what became of it cannot be told: nothing changes
        answer, usage, usage_why = probed
        judged = judge(count, answer, usage, target, failures=cfg.failures, busy_pct=cfg.npu_busy_pct,
                       timeout=timeout, usage_why=usage_why)
        with self.lock:
            if self.counts.get(name, count).started == count.started:     # not forgotten meanwhile
                self.counts[name] = judged.count
        if judged.note:
            self._say(judged.note)

    def _idle(self, target: Target, failed: int) -> tuple[bool | None, str]:
        names = self.plan.engine_spec.metric_names
        args = (names.running, names.waiting, names.kv_usage, names.generated, names.prompt)
        run = fan_out(self.executor, [self.hosts[target.probe.node]],
                      lambda h: [(f"h.m.{i}", ENGINE_LOAD.command(url, *args)) for i, url in enumerate(target.metrics)],
                      LOAD_TIMEOUT, measure_clock=False, parallel=True)[target.probe.node]
        if run.error is not None:
            return None, f"{target.probe.node} did not answer ({printable(run.error.message, 160)})"
        loads: list[EngineLoad] = []
        for i, url in enumerate(target.metrics):
            res = run.outputs.get(f"h.m.{i}")
            if res is None or res.rc != 0:
                return None, f"{url} was not read"
            try:
                loads.append(ENGINE_LOAD.parse(res.text, *args))
            except ValueError as exc:
                return None, printable(str(exc), 160)
        return idle(loads, failed)

    def _probe(self, target: Target, timeout: float,
               usage: bool) -> tuple[InferAnswer | None, NpuUsage | None, str] | None:
        """The probe's answer (None: killed before it printed one), and, with ``usage``, the NPU's usage over the
        same seconds (None, and why, when it was not read); None when the host's answer cannot be told."""
        rid = f"{int(time.time() * 1e6)}_virtual"
        p = target.probe
        cmds = [("h.p", INFER.command(p.url, p.body, rid, timeout))]
        if usage:
            cmds.append(("h.u", NPU_USAGE.command(*target.npu, self.cfg.timeout_s)))

        with self.npu_locks.setdefault(p.node, threading.Lock()) if usage else nullcontext():
            out = fan_out(self.executor, [self.hosts[p.node]], lambda h: cmds, timeout + SSH_S, measure_clock=False,
                          parallel=True)[p.node]
        if out.error is not None:
            self._say(f"hang probe of {target.instance}: {p.node} did not answer "
                      f"({printable(out.error.message, 160)}); not counted")
            return None
        res = out.outputs.get("h.p")
        answer = None
        if res is not None and res.text.strip():
            try:
                answer = INFER.parse(res.text)
            except ValueError as exc:
                self._say(f"hang probe of {target.instance}: {printable(str(exc), 200)}; not counted")
                return None
        read, why = None, "not asked"
        if usage:
            u = out.outputs.get("h.u")
            try:
                read = NPU_USAGE.parse(u.text, *target.npu) if u is not None else None
                why = "" if u is not None else "npu-smi printed nothing"
            except ValueError as exc:
                why = printable(str(exc), 160)
        return answer, read, why

    def _say(self, text: str) -> None:
        if text in self.noted or len(self.noted) >= MAX_NOTES:
            return
        self.noted.add(text)
        self.note(text)
