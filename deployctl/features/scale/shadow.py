"""Shadow mode: read every role's load each interval, decide, and say what should change and why, without
changing anything. Each decision, with the readings it used, goes to the run record (runs/<id>-scale/
events.jsonl) and to the caller."""

from __future__ import annotations

import time
from collections import deque
from typing import Callable

from deployctl.core.scaling.decide import Decision, Reading, decide
from deployctl.core.scaling.readings import Sample, role_readings


class Shadow:
    """Readings kept per role for the longest window a decision looks at; one decision per role and round."""

    def __init__(self, plan, policy, capacity: dict[str, float], read: Callable[[], list[Sample]],
                 clock: Callable[[], float] = time.monotonic, record=None) -> None:
        self.plan, self.policy, self.capacity, self.read, self.clock, self.record = (
            plan, policy, capacity, read, clock, record)
        keep = int(max(policy.scale_up.for_s, policy.scale_down.for_s) / policy.interval_s) + 3
        self.readings: dict[str, deque[Reading]] = {}
        self.keep = keep
        self.previous: dict[str, Sample] = {}
        self.counts = {role: sum(1 for i in plan.instances if i.role == role)
                       for role in dict.fromkeys(i.role for i in plan.instances)}
        self.last_change: dict[str, float] = {}
        self.rounds = 0
        self.mode = "shadow"
        self.answered: set[str] = set()     # instances whose every process answered the last reading

    def replan(self, plan, read: Callable[[], list[Sample]], changed: str) -> None:
        """After an instance of role ``changed`` was added or removed: the new plan's counts and reader; the
        role's readings start again (they were of the old count) and its cool-down starts now."""
        self.plan, self.read = plan, read
        self.counts = {role: sum(1 for i in plan.instances if i.role == role)
                       for role in dict.fromkeys(i.role for i in plan.instances)}
        self.readings.pop(changed, None)
        self.last_change[changed] = self.clock()

    def round(self) -> list[Decision]:
        samples = self.read()
        now = self.clock()
        failed = {s.instance for s in samples if s.error}
        self.answered = {s.instance for s in samples if not s.error} - failed
        for role, r in role_readings(samples, self.previous).items():
            self.readings.setdefault(role, deque(maxlen=self.keep)).append(r)
        self.previous.update({s.target: s for s in samples if not s.error})
        self.rounds += 1
        out = [decide(self.policy, role, count, list(self.readings.get(role, ())), now,
                      self.last_change.get(role), self.capacity.get(role))
               for role, count in self.counts.items()]
        if self.record is not None:
            docs = [{"event": "decision", "round": self.rounds, "mode": self.mode, **d.as_dict()} for d in out]
            unanswered = sorted({s.instance for s in samples if s.error})
            if unanswered:
                docs.append({"event": "unanswered", "round": self.rounds, "instances": unanswered})
            self.record.append_jsonl("events.jsonl", docs)
        return out
