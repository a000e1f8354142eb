"""`deployctl scale --apply`: carry out a decision on the hosts.

Up: the next spare servers (as many as one instance of the role has) become a new instance, named after the role
(decode-1, ...), written into the scale state; then `up` of the deployment as scaled: preflight, render, push,
start, read back, and the rolling path puts the new instance behind the router (a new instance has nothing to
drain). Nothing else may restart: the change set is checked before anything is done, and an add that would
restart another instance is declined. A failure puts the state back (the pipeline has stopped what it started).

Down: only an instance scale added is removed, the last one of the role: taken out at the router, its requests
in flight waited for (drained), its engine container removed and read back, the state written, and the
`scale-down` entry written into the hosts' history.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from deployctl.core.models.scaling import AddedInstance, ScaleState
from deployctl.core.scaling.effective import next_name
from deployctl.io.scale_store import read_state, write_state


@dataclass
class Change:
    """What one apply did: ``ok``, the instance and its nodes, how long it took, what went wrong."""

    action: str                  # up | down
    role: str
    instance: str = ""
    nodes: list[str] = field(default_factory=list)
    ok: bool = False
    seconds: float = 0.0
    detail: str = ""
    run: str = ""                # the up run's record (up)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class Applier:
    """``open_ctx``: the deployment as scaled now (re-reads the state: app/context.py); ``run_up``: `up` of a
    context with the given options and change check (backends/hosts/up.py run_hosts_operation, wired by the
    CLI)."""

    open_ctx: Callable[[], Any]
    run_up: Callable[[Any, Any, Callable[[Any], bool]], Any]
    run_root: Path
    executor: Any
    opts: Any                    # UpOptions
    run_id: str
    clock: Callable[[], float] = time.monotonic

    def _state(self, cluster: str) -> ScaleState:
        return read_state(self.run_root, cluster) or ScaleState(cluster=cluster)

    def add(self, ctx, role: str, why: str, live: set[str] | frozenset[str] = frozenset()) -> Change:
        """Start one more instance of ``role``; ``live``: the instances that answered the last reading (the new
        one may load its weights from those of its role, where the engine can: Plan.weight_peers)."""
        start = self.clock()
        plan = ctx.plan
        mine = plan.role(role)
        if not mine:
            return Change("up", role, detail=f"the deployment has no {role} instance to copy")
        from deployctl.backends.hosts.router_control import Remote, control_for, control_gap

        if control_for(plan, Remote(self.executor, {t.name: t for t in ctx.targets}, self.opts.ssh_timeout)) is None:
            return Change("up", role, detail=f"not added: {control_gap(plan)}; a new instance could not be put "
                          "behind it")
        size = len(mine[-1].nodes)
        if len(ctx.spares) < size:
            return Change("up", role, detail=f"one more {role} instance needs {size} spare server(s); "
                          f"{len(ctx.spares)} left ({', '.join(ctx.spares) or 'none'}): add servers under "
                          "deploy.scaling.spares")
        cluster = ctx.inventory.cluster.name
        before = self._state(cluster)
        name = next_name(role, [i.name for i in plan.instances])
        nodes = list(ctx.spares[:size])
        # the running instances of its role, newest first (a choice: any of them holds the same shards)
        peers = [i.name for i in reversed(mine) if i.name in live]
        added = AddedInstance(role=role, name=name, nodes=nodes, run_id=self.run_id, peers=peers,
                              since=datetime.now(timezone.utc).isoformat(timespec="seconds"))
        write_state(self.run_root, before.model_copy(update={"added": [*before.added, added]}))
        change = Change("up", role, name, nodes)
        try:
            scaled = self.open_ctx()
            declined: list[str] = []

            def only_new(changes) -> bool:
                others = [f"{h.node} ({h.instance}: {h.action})" if h.action != "keep" else
                          f"{h.node} (the router on it: {h.ms_action})" for h in changes.hosts
                          if h.instance != name and (h.action != "keep" or h.ms_action not in (None, "keep"))]
                declined.extend(others)
                return not others

            opts = replace(self.opts, record_as="scale-up", record_why=f"scale added {name} on "
                           f"{', '.join(nodes)}: {why}", yes=False)
            out = self.run_up(scaled, opts, only_new)
        except Exception as exc:  # noqa: BLE001 - the state goes back, then the error is the caller's
            write_state(self.run_root, before)
            raise exc
        change.run = str(getattr(out.record, "path", ""))
        change.seconds = round(self.clock() - start, 1)
        if out.status != "successful":
            write_state(self.run_root, before)
            change.detail = (f"adding {name} would restart {', '.join(declined)}: declined" if declined else
                             f"up {out.status}: {out.failure or ''}".strip())
            return change
        change.ok = True
        return change

    def remove(self, ctx, role: str, why: str, drain_timeout: float) -> Change:
        from deployctl.backends.hosts.router_control import Remote, control_for, wait_until
        from deployctl.backends.hosts.scaling import scale_down_entry, stop_instance

        start = self.clock()
        cluster = ctx.inventory.cluster.name
        state = self._state(cluster)
        ours = [a for a in state.added if a.role == role]
        if not ours:
            return Change("down", role, detail=f"no {role} instance was added by scale: the inventory's own "
                          "instances are removed by editing the inventory")
        victim = ours[-1]
        change = Change("down", role, victim.name, list(victim.nodes))
        plan = ctx.plan
        targets = {t.name: t for t in ctx.targets}
        control = control_for(plan, Remote(self.executor, targets, self.opts.ssh_timeout))
        if control is None:
            change.detail = "no router in front of the instances can take one out"
            return change
        control.drain(victim.name)
        if not wait_until(lambda: control.in_flight(victim.name) == 0, drain_timeout):
            control.ready(victim.name)
            change.detail = (f"{victim.name} still had requests in flight after {drain_timeout:g} s of draining: "
                             "put back, nothing removed")
            return change
        stop_instance(plan, victim.name, self.executor, targets, self.opts.ssh_timeout)
        write_state(self.run_root, state.model_copy(update={"added": [a for a in state.added if a is not victim]}))
        problems = []
        forget = getattr(control, "forget", None)      # a router that keeps a removed server listed (HAProxy)
        if forget is not None:
            try:
                forget(victim.name)
            except Exception as exc:  # noqa: BLE001 - stopped and out of the state: said, not undone
                problems.append(f"{control.what} still lists it ({str(exc)[:200]}): no request goes to it")
        after = self.open_ctx()
        failed = scale_down_entry(after.plan, self.run_id, f"scale removed {victim.name} from "
                                  f"{', '.join(victim.nodes)}: {why}", self.executor, after.targets,
                                  self.opts.ssh_timeout)
        change.ok = True
        change.seconds = round(self.clock() - start, 1)
        if failed:
            problems.append(f"history entry not written on: {', '.join(failed)}")
        change.detail = "; ".join(problems)
        return change

    def rejoin(self, ctx) -> list[str]:
        """The instances scale added that the router no longer sends to (it restarted and forgot what it was told
        at run time): told again. Their names."""
        from deployctl.backends.hosts.router_control import Remote, control_for

        if not ctx.plan.joined:
            return []
        control = control_for(ctx.plan, Remote(self.executor, {t.name: t for t in ctx.targets}, self.opts.ssh_timeout))
        if control is None:
            return []
        view = control.view()
        back = []
        for name in sorted(ctx.plan.joined):
            # listed: serving, or out on purpose (drained, in maintenance), or failing its checks (watch's business)
            if view.get(name, "absent").split(" ")[0] in ("UP", "DOWN", "DRAIN", "MAINT", "NOLB"):
                continue
            if not control.serving(name):
                control.ready(name)
                back.append(name)
        return back
