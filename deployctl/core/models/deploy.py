"""What is deployed on a host, and what `up` will change (pure data)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from deployctl.core.models.hostdata import HistoryEntry, LockDoc, Manifest
from deployctl.core.models.base import Frozen


class ContainerState(Frozen):
    name: str
    status: str                       # running, exited, created, ... or "absent"
    exit_code: int | None = None
    started_at: str | None = None
    mounted_rev: str | None = None    # the revision directory it mounts (what it really runs)
    env: dict[str, str] = Field(default_factory=dict)   # its environment, as docker inspect shows it


class DeployedState(Frozen):
    node: str
    error: str | None = None          # the host could not be read (unreachable, ...)
    current_rev: str | None = None
    previous_rev: str | None = None
    files: dict[str, str] = Field(default_factory=dict)        # name -> sha256 of the current revision
    run: str | None = None            # the `up` run that deployed the current revision
    containers: dict[str, ContainerState] = Field(default_factory=dict)
    ready: bool | None = None         # every health URL of the engine (its engine spec says which) answered 200
    revisions: dict[str, Manifest] = Field(default_factory=dict)   # rev on disk -> its manifest
    history: list[HistoryEntry] = Field(default_factory=list)      # this host's copy of the deployment history
    lock: LockDoc | None = None       # who holds the lock file (None: nobody, or not a deployctl lock: findings)
    findings: list[str] = Field(default_factory=list)   # what the host said that did not parse ("node1: ...")


FileKind = Literal["new", "changed", "unchanged", "removed"]
Action = Literal["start", "restart", "keep"]


class FileChange(Frozen):
    path: str
    kind: FileKind


class HostChange(Frozen):
    node: str
    instance: str
    rev: str
    current_rev: str | None
    files: list[FileChange]
    action: Action
    reason: str
    ms_action: Action | None = None   # pd-split MS node: the controller/coordinator containers

    @property
    def push(self) -> bool:
        return self.rev != self.current_rev


class ChangeSet(Frozen):
    hosts: list[HostChange]

    @property
    def nothing_to_do(self) -> bool:
        return all(h.action == "keep" and not h.push and h.ms_action in (None, "keep") for h in self.hosts)
