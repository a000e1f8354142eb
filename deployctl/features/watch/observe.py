"""One round of reading a node: the facts it asks (deployctl.probes, in one SSH command per node,
deployctl.io.batch) and what their answers say, parsed here and only here (the host's text is hostile input:
bounded, parsed by the facts' parsers, never echoed unescaped).

Per node: the engine containers' state (docker inspect), the health URLs (or ready lines) of the engine, the
NPUs' health (`npu-smi info`), the link of each device the plan uses (`hccn_tool -i N -link -g`) and the
engine log since the last round, matched against known fatal lines (the driver's ``fatal_log`` and HCCL's
error codes, docs/troubleshooting.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime

from deployctl.io.batch import ProbeOutput
from deployctl.core.render.processes import processes
from deployctl.core.models.hostdata import printable
from deployctl.probes import containers, hccn_tool, npu_smi
from deployctl.probes.containers import LOG_BYTES

MAX_FATAL = 5               # matched lines kept per node and round
# HCCL error codes (docs/troubleshooting.md "HCCL error codes"): a rank that printed one has left its world
HCCL_FATAL = (r"\bEI00(0[69]|1[3-6])\b", r"Getting socket times out", r"transport init error",
              r"Error ROCE CQE", r"error cqe status")
BAD_NPU = ("Alarm", "Critical")
_TS = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?(Z|[+-]\d\d:\d\d)\s")


@dataclass(frozen=True)
class Fault:
    node: str
    kind: str                    # unreachable, container, not-ready, npu, link, fatal-log, hang
    cause: str                   # printable, for people
    device: int | None = None    # the NPU / device id it concerns
    confirm: bool = False        # only a fault when seen in consecutive rounds (a slow answer is not a hang)

    @property
    def key(self) -> tuple:
        return (self.node, self.kind, self.device)


@dataclass
class NodeObs:
    node: str
    error: str = ""                                     # the host could not be read
    containers: dict[str, str] = field(default_factory=dict)        # name -> running / exited (137) / absent
    started: dict[str, str] = field(default_factory=dict)           # name -> StartedAt
    ready: bool | None = None
    npu: dict[int, str] = field(default_factory=dict)   # device -> OK / Warning / Alarm / ...
    links_down: tuple[int, ...] = ()
    fatal: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)      # what did not parse
    hang: str = ""                                      # the hang probe's verdict on the instance it is master of

    def faults(self) -> list[Fault]:
        if self.error:
            return [Fault(self.node, "unreachable", self.error, confirm=True)]
        out = [Fault(self.node, "container", f"{name} {state}") for name, state in self.containers.items()
               if state != "running"]
        if not out and self.ready is False:
            out.append(Fault(self.node, "not-ready", "the engine does not answer its health check (hung?)",
                             confirm=True))
        if not out and self.ready is True and self.hang:      # it answers its health check, but cannot infer
            out.append(Fault(self.node, "hang", self.hang))
        out += [Fault(self.node, "npu", f"NPU {dev} health {h}", dev) for dev, h in self.npu.items() if h in BAD_NPU]
        out += [Fault(self.node, "link", f"device {dev} link DOWN (hccn_tool)", dev) for dev in self.links_down]
        out += [Fault(self.node, "fatal-log", f"engine log: {line}") for line in self.fatal[:1]]
        return out


def node_commands(plan, node: str, window_s: int) -> list[tuple[str, list[str]]]:
    engine = processes(plan, node).engine
    cmds = [(f"w.c.{i}", containers.INSPECT.command(name)) for i, name in enumerate(engine.containers)]
    cmds += [(f"w.h.{i}", containers.HTTP_OK.command(url)) for i, url in enumerate(engine.health_urls)]
    if not engine.health_urls and engine.ready_line:
        cmds.append(("w.ready", containers.READY_COUNT.command(engine.ready_container, engine.ready_line)))
    cmds.append(("w.npu", npu_smi.NPU_INFO.command()))
    cmds += [(f"w.link.{d}", hccn_tool.LINK.command(d)) for d in plan.node(node).device_ids]
    cmds.append(("w.log", containers.LOG.command(engine.ready_container, window_s)))
    return cmds


def _time(text: str) -> datetime | None:
    """docker's RFC 3339 time (nanoseconds cut to microseconds); None when it is not one."""
    m = _TS.match(text + " ")
    if not m:
        return None
    frac = (m.group(2) or "0")[:6].ljust(6, "0")
    zone = "+00:00" if m.group(3) == "Z" else m.group(3)
    try:
        return datetime.fromisoformat(f"{m.group(1)}.{frac}{zone}")
    except ValueError:
        return None


def fatal_lines(text: str, patterns: tuple[str, ...], since: datetime | None) -> tuple[str, ...]:
    """The log lines (timestamped by docker) that match a fatal pattern, printed after ``since``."""
    regexes = [re.compile(p) for p in patterns]
    out = []
    for line in text[-LOG_BYTES:].splitlines()[-2000:]:
        ts = _time(line)
        if ts is None or (since is not None and ts < since):
            continue
        body = line.split(" ", 1)[1] if " " in line else ""
        if any(r.search(body) for r in regexes):
            out.append(printable(body.strip(), 200))
            if len(out) >= MAX_FATAL:
                break
    return tuple(out)


def parse_node(plan, node: str, out: dict[str, ProbeOutput], error: str = "") -> NodeObs:
    obs = NodeObs(node, error=printable(error, 300))
    if error:
        return obs
    engine = processes(plan, node).engine
    for i, name in enumerate(engine.containers):
        res = out.get(f"w.c.{i}")
        if res is None or res.rc != 0:
            obs.containers[name] = "absent"
            continue
        doc, notes = containers.INSPECT.parse(res.text, node, name)
        obs.notes += notes
        if doc is None:
            obs.containers[name] = "unknown"
            continue
        st = doc.state
        obs.containers[name] = st.Status if st.Status == "running" else f"{st.Status} (exit {st.ExitCode})"
        obs.started[name] = st.StartedAt or ""
    checks = [out.get(f"w.h.{i}") for i in range(len(engine.health_urls))]
    if checks:
        obs.ready = all(c is not None and containers.HTTP_OK.parse(c.text) for c in checks)
    elif "w.ready" in out:
        count = containers.READY_COUNT.parse(out["w.ready"].text) if out["w.ready"].rc == 0 else None
        obs.ready = count is not None and count >= engine.ready_count
    _npu(obs, plan, node, out.get("w.npu"))
    down, silent = [], []
    for dev in plan.node(node).device_ids:
        res = out.get(f"w.link.{dev}")
        if res is None or res.rc == 124:      # no answer (the round's batch cut short, timed out): not a link DOWN
            silent.append(dev)
            continue
        try:
            if not hccn_tool.LINK.parse(res.text[:4096]).up:
                down.append(dev)
        except ValueError as exc:
            obs.notes.append(f"{node}: {printable(str(exc), 160)}")
    if silent:
        obs.notes.append(f"{node}: hccn_tool -link did not answer for device{'s' if len(silent) > 1 else ''} "
                         f"{', '.join(map(str, silent))}")
    obs.links_down = tuple(down)
    log = out.get("w.log")
    if log is not None:
        since = _time(obs.started.get(engine.ready_container, ""))
        obs.fatal = fatal_lines(containers.LOG.parse(log.text), tuple(engine.fatal_log) + HCCL_FATAL, since)
    return obs


def _npu(obs: NodeObs, plan, node: str, res: ProbeOutput | None) -> None:
    if res is None or res.rc != 0:
        obs.notes.append(f"{node}: npu-smi info did not answer")
        return
    try:
        info = npu_smi.NPU_INFO.parse(res.text[:1 << 20])
    except ValueError as exc:
        obs.notes.append(f"{node}: {printable(str(exc), 160)}")
        return
    used = set(plan.node(node).device_ids)
    obs.npu = {c.phy_id: str(c.health) for c in info.chips if c.phy_id in used}
