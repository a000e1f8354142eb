"""Pure: faults seen round after round -> the events of this round and each instance's state.

A fault is reported the round it is seen, except the ones that need confirming (a node that did not answer,
an engine that did not answer its health check: once is a slow answer, ``confirm`` rounds in a row a hang).
An instance with a fault on any of its nodes has failed (one dead rank stops its whole HCCL world)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from deployctl.features.watch.observe import Fault, NodeObs


_RANK = {"npu": 0, "link": 1, "fatal-log": 2, "container": 3, "unreachable": 4, "not-ready": 5, "hang": 6}


def event(what: str, instance: str = "", node: str = "", cause: str = "", device: int | None = None,
          **more) -> dict:
    doc = {"ts": round(time.time(), 3), "event": what, "instance": instance, "node": node, "cause": cause}
    if device is not None:
        doc["device"] = device
    doc.update(more)
    return doc


@dataclass
class Tracker:
    plan: object
    confirm: int = 2
    seen: dict[tuple, int] = field(default_factory=dict)      # fault key -> rounds in a row
    since: dict[tuple, float] = field(default_factory=dict)   # fault key -> first round of that row (time.time())
    active: dict[tuple, Fault] = field(default_factory=dict)  # reported faults
    failed: dict[str, float] = field(default_factory=dict)    # instance -> since when (time.time())
    noted: set[str] = field(default_factory=set)

    def _instance(self, node: str) -> str:
        return next((i.name for i in self.plan.instances if node in i.nodes), "")

    def round(self, observed: dict[str, NodeObs], skip: frozenset[str] = frozenset()) -> list[dict]:
        """The events of one round; instances in ``skip`` (being recovered) report nothing."""
        now, events, current = time.time(), [], {}
        for obs in observed.values():
            for f in obs.faults():
                current[f.key] = f
        for obs in observed.values():       # what did not parse: once each (a note, never a fault)
            for note in obs.notes[:5]:
                if note not in self.noted and len(self.noted) < 1000:
                    self.noted.add(note)
                    events.append(event("note", obs.node and self._instance(obs.node), obs.node, note))
        for key in list(self.seen):
            if key not in current:
                del self.seen[key]
                self.since.pop(key, None)
        for key, f in current.items():
            self.seen[key] = self.seen.get(key, 0) + 1
            self.since.setdefault(key, now)
        for inst in self.plan.instances:
            if inst.name in skip:
                continue
            mine = {k: f for k, f in current.items() if f.node in inst.nodes
                    and (not f.confirm or self.seen[k] >= self.confirm)}
            for key, f in mine.items():
                if key not in self.active:
                    self.active[key] = f
                    events.append(event("fault", inst.name, f.node, f.cause, f.device, kind=f.kind))
            for key in [k for k in self.active if k[0] in inst.nodes and k not in mine]:
                f = self.active.pop(key)
                events.append(event("cleared", inst.name, f.node, f.cause, f.device, kind=f.kind))
            if mine and inst.name not in self.failed:
                self.failed[inst.name] = now
                # named by its most telling fault (hardware before what it causes), among equals the one seen
                # first, then by node (never the order the nodes answered in); every cause listed
                first = min(mine.values(), key=lambda f: (_RANK.get(f.kind, 9), self.since.get(f.key, now), f.node,
                                                          -1 if f.device is None else f.device, f.cause))
                events.append(event("instance-failed", inst.name, first.node, first.cause, first.device,
                                    kind=first.kind, causes=[f"{f.node}: {f.cause}" for f in mine.values()]))
            elif not mine and inst.name in self.failed and _serving(inst, observed):
                del self.failed[inst.name]
                events.append(event("instance-serving", inst.name))
        return events

    def faults_of(self, instance) -> list[Fault]:
        return [f for f in self.active.values() if f.node in instance.nodes]

    def reset(self) -> None:
        """Every instance starts with a clean slate (the deployment was taken down: nothing it had is a fault)."""
        self.seen.clear()
        self.since.clear()
        self.active.clear()
        self.failed.clear()

    def forget(self, instance) -> None:
        """A recovered instance starts with a clean slate."""
        for key in [k for k in self.active if k[0] in instance.nodes]:
            del self.active[key]
        self.failed.pop(instance.name, None)


def _serving(inst, observed: dict[str, NodeObs]) -> bool:
    return all(n in observed and not observed[n].error and observed[n].ready is not False for n in inst.nodes)


def instance_state(inst, observed: dict[str, NodeObs], tracker: Tracker, recovering: dict[str, str]) -> str:
    if inst.name in recovering:
        return recovering[inst.name]
    if inst.name in tracker.failed:
        return "failed"
    if any(n not in observed or observed[n].error for n in inst.nodes):
        return "unknown"
    return "serving" if all(observed[n].ready is not False for n in inst.nodes) else "starting"
