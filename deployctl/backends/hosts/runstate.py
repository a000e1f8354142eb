"""The typed things one hosts run (up, rollback, down) hands between its steps: the CLI's options, the intent
(what each node should run), how its hosts are reached, and what the run has done so far.

``HostsRun`` is the only mutable state of a run: it is owned by the backend (hosts.HostsBackend) and handed to the
steps that change it (ansible_run.run_up: the smoke hosts and answers; rolling.roll: the batch out of the router and
what moved), never the backend itself.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Protocol

from deployctl.core.engine_spec.router import RouterControl
from deployctl.io.ansible import PlaybookResult
from deployctl.io.executor import Executor, HostTarget


@dataclass
class UpOptions:
    """Options of up / rollback / down on the hosts (the CLI's flags)."""

    dry_run: bool = False
    yes: bool = False
    skip_preflight: bool = False
    trust_new_hosts: bool = False
    ready_timeout: int = 1800          # MindIE loads hundreds of GB of weights: minutes, not seconds
    smoke_timeout: int = 120
    ssh_timeout: float = 60
    pull: bool = False                 # docker pull the image on every node before starting
    run_root: Path = Path(".deployctl")
    inventory_dir: Path = Path(".")
    to: int | None = None              # rollback --to REV
    purge: bool = False                # down --purge
    strategy: str = "rolling"          # up with several instances behind a router: rolling | recreate
    max_unavailable: int = 1           # rolling: instances out of the router at once
    drain_timeout: int = 600           # rolling: s to wait for the requests in flight on a drained instance
    record_as: str = ""                # the history's operation when not the command's (scale-up by `scale`)
    record_why: str = ""               # said in the history entry's summary (why scale added an instance)


@dataclass(frozen=True)
class NodeIntent:
    """What one node should run (a diff.NodeRevision, as revision.NodeBundle is: ``rev``, ``digests``)."""

    node: str
    rev: str
    digests: dict[str, str]
    env_digest: str = ""
    env_keys: tuple[str, ...] = ()


@dataclass
class Desired:
    nodes: dict[str, NodeIntent] = field(default_factory=dict)   # empty for down
    push: bool = True                    # up: the revisions go to the hosts; rollback: they are there
    rendered: Path | None = None          # up: the rendered tree (archives are packed from it)
    # up: where the archives go. The tree and its archives hold secret env values in clear, so both live in a
    # private temporary directory (0700) removed at the end of the run; the run record keeps a masked copy
    packs: Path | None = None
    entry: dict | None = None             # rollback: the history entry it goes back to


class Runner(Protocol):
    """Runs one playbook: deployctl.io.ansible.run_playbook (ansible-runner), or a test's fake."""

    def __call__(self, private_dir: Path, playbook: str, *, forks: int,
                 on_event: Callable[[dict], None] | None = None, cancel: threading.Event | None = None,
                 ident: str | None = None) -> PlaybookResult: ...


@dataclass(frozen=True)
class Reach:
    """The run's hosts over SSH: who, through what, in which directory, with which timeout per command."""

    executor: Executor
    targets: list[HostTarget]
    cdir: str                           # the deployment's directory on every host (revision.cluster_dir)
    timeout: float                      # s per command (--ssh-timeout)


@dataclass
class Rollout:
    """A rolling update's plan (rolling.plan_rollout): the router that drains, the batches of instances in order."""

    control: RouterControl
    batches: list[list[str]]            # instance names, in order
    warnings: list[str]
    new: frozenset[str] = frozenset()   # instances with no engine container yet (scale added them): no drain


@dataclass
class HostsRun:
    """What one run has done so far (mutable, owned by the backend)."""

    moved: list[str] = field(default_factory=list)            # nodes this run changed: the undo restores them
    rollout: Rollout | None = None                            # up, several instances behind a router
    rolling_batch: list[str] = field(default_factory=list)    # the instances out of the router right now
    smoke_hosts: list[str] = field(default_factory=list)      # nodes that must answer the smoke request
    smoke: dict[str, str] = field(default_factory=dict)       # node -> its answer (from the playbook's events)
    reported: set[str] = field(default_factory=set)           # findings about what the hosts said, already shown
