"""A deployment stopped on purpose is down, not failed: the watch asks `status` (never a judgement of its own).

After `deployctl down` no engine container is left. A round that finds none on any node (and every node
answered: ``all_gone``) asks the hosts what `status` asks them (``read_deployed``: the containers, the revisions,
the history, the lock) and takes `status`'s verdict (``judge`` of deployctl.backends.hosts.status): the
deployment is ``down`` when every engine container is absent and the hosts' history ends with a successful
`down` (or holds nothing: never deployed). While a deployctl operation holds the deployment's lock (a `down` or
an `up` between removing the containers and recording its outcome) it is ``changing``: the operation judges its
own work. Anything else (the containers removed behind deployctl's back) is not for this module: the watch
reports the faults and recovers as usual.
"""

from __future__ import annotations

from dataclasses import dataclass

from deployctl.backends.common.lockinfo import LockOwner
from deployctl.backends.hosts.remote import read_deployed
from deployctl.backends.hosts.revision import cluster_dir
from deployctl.backends.hosts.status import judge
from deployctl.core.models.deploy import DeployedState
from deployctl.features.watch.observe import NodeObs
from deployctl.io.executor import Executor, HostTarget

READ_TIMEOUT = 30.0       # s: the read-back of `status` (history and manifests included)
RECHECK_S = 30.0          # s: how often the verdict is asked again while every engine container stays gone


@dataclass(frozen=True)
class Stopped:
    state: str            # down (status says so) | changing (a deployctl operation holds the lock)
    cause: str            # for people: status's note, or who holds the lock


def all_gone(plan, observed: dict[str, NodeObs]) -> bool:
    """Every node of the plan answered this round and none has an engine container: the only rounds in which
    `status` can say down (it needs every node's engine container absent, and every node read)."""
    return all(n.name in observed and not observed[n.name].error and observed[n.name].containers
               and all(s == "absent" for s in observed[n.name].containers.values()) for n in plan.nodes)


def verdict(plan, states: dict[str, DeployedState]) -> Stopped | None:
    """Pure: `status`'s judgement of what the hosts said, when it stops the watch from calling failures."""
    st = judge(plan, states)
    if st.state == "down":
        return Stopped("down", st.note or "no engine container")
    holders = {}
    for s in states.values():
        if s.lock is not None:
            owner = LockOwner(**s.lock.model_dump())
            if not owner.gone():
                holders[owner.run_id] = owner
    if holders:
        who = "; ".join(o.who() for o in holders.values())
        return Stopped("changing", f"{who} holds the deployment's lock")
    return None


def read_verdict(plan, targets: list[HostTarget], executor: Executor,
                 timeout: float = READ_TIMEOUT) -> Stopped | None:
    """Read the hosts the way `status` does (containers, revisions, history, lock), then ``verdict``."""
    return verdict(plan, read_deployed(plan, targets, executor, cluster_dir(plan), timeout=timeout))
