"""diff: rendered revisions vs what runs on the hosts -> what `up` changes (pure).

A multi-node instance is one HCCL world: when any of its nodes must (re)start, all of them do.
Instances whose nodes are unchanged and running are left alone.
"""

from __future__ import annotations

from typing import Mapping, Protocol

from deployctl.core.render.processes import processes
from deployctl.core.models.deploy import ChangeSet, DeployedState, FileChange, HostChange
from deployctl.core.models.plan import Plan


class NodeRevision(Protocol):
    """What one node should run, as the diff reads it: revision.NodeBundle (rendered) or runstate.NodeIntent."""

    @property
    def rev(self) -> str: ...

    @property
    def digests(self) -> dict[str, str]: ...         # file name -> sha256


def _files(bundle: NodeRevision, state: DeployedState) -> list[FileChange]:
    want = bundle.digests
    have = state.files
    out = [FileChange(path=name, kind="new" if name not in have else
                      ("unchanged" if have[name] == digest else "changed")) for name, digest in want.items()]
    out += [FileChange(path=name, kind="removed") for name in sorted(set(have) - set(want))]
    return out


def diff_deployment(plan: Plan, bundles: Mapping[str, NodeRevision], deployed: dict[str, DeployedState],
                    engine_name: str, ms_names: tuple[str, ...] = ()) -> ChangeSet:
    """Per node: files new/changed/unchanged/removed and whether its container starts, restarts or stays."""
    first: dict[str, tuple[str, str]] = {}
    for node in plan.nodes:
        bundle, s = bundles[node.name], deployed[node.name]
        c = s.containers.get(engine_name)
        if c is None or c.status == "absent":
            first[node.name] = ("start", "no engine container")
        elif c.status != "running":
            first[node.name] = ("start", f"engine container is {c.status}")
        elif s.current_rev != bundle.rev:
            first[node.name] = ("restart", f"revision {s.current_rev} -> {bundle.rev}")
        else:
            first[node.name] = ("keep", "up to date and running")
    moving = {plan.node(n).instance for n, (a, _) in first.items() if a != "keep"}
    hosts = []
    for node in plan.nodes:
        bundle, s = bundles[node.name], deployed[node.name]
        action, reason = first[node.name]
        if action == "keep" and node.instance in moving:
            action, reason = "restart", f"instance {node.instance} restarts (HCCL needs every rank)"
        ms_action = None
        router = processes(plan, node.name).router
        if router is not None:
            changed = any(f.kind != "unchanged" for f in _files(bundle, s) if f.path in router.restart_files)
            running = all(s.containers.get(n) is not None and s.containers[n].status == "running" for n in ms_names)
            follows = bool(moving) and router.restart_with_engines
            ms_action = "start" if not running else ("restart" if changed or follows else "keep")
        hosts.append(HostChange(node=node.name, instance=node.instance, rev=bundle.rev, current_rev=s.current_rev,
                                files=_files(bundle, s), action=action, reason=reason, ms_action=ms_action))
    return ChangeSet(hosts=hosts)
