"""The hosts backend of the deploy pipeline: up, rollback and down over SSH (reads, lock, history) and
ansible-runner (changes). The executor and the playbook runner are passed in, so the logic is
unit-tested with fakes (tests/backends/hosts/test_hosts_backend.py) and end to end on the simulated hosts.
"""

from __future__ import annotations

import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from deployctl.backends.hosts import history as hist
from deployctl.backends.hosts.ansible_run import Playbooks, common_vars
from deployctl.backends.hosts.diff import diff_deployment
from deployctl.backends.hosts.runstate import Desired, HostsRun, NodeIntent, Reach, Runner, UpOptions
from deployctl.core.models.hostdata import clean_entry, seal
from deployctl.backends.hosts.hostlock import HostLock
from deployctl.backends.common.lockinfo import LockOwner
from deployctl.backends.common.pipeline import Applied, Outcome, Reporter, UnitCheck, Verification
from deployctl.io.records import RunRecord
from deployctl.backends.hosts.remote import container_names, ran_before, read_deployed
from deployctl.core.render.processes import has_router
from deployctl.backends.hosts.revision import cluster_dir
from deployctl.backends.hosts.verify import Want, verify_nodes
from deployctl.core.engine_spec.router import RouterControl
from deployctl.core.errors import DeployctlError, ExecutionError, Problem
from deployctl.io.executor import Executor, HostTarget
from deployctl.core.models.deploy import ChangeSet, DeployedState
from deployctl.core.models.inventory import Inventory
from deployctl.core.models.plan import Plan

__all__ = ["Desired", "DownChanges", "HostsBackend", "NodeIntent", "Runner", "UpOptions", "host_targets_abs",
           "require_readable"]     # Desired, NodeIntent, Runner, UpOptions: from runstate, named here too


@dataclass(frozen=True)
class DownChanges:
    running: dict[str, list[str]]         # node -> containers that exist there
    already_down: bool
    purge: str = ""                       # down --purge: the cluster directory whose deployctl files go
    files_left: bool = False              # purge: some host still holds deployctl's revisions or history

    @property
    def nothing_to_do(self) -> bool:
        return not any(self.running.values()) and self.already_down and not (self.purge and self.files_left)

    def model_dump(self) -> dict:
        return {"containers": self.running, "already_down": self.already_down, "purge": self.purge}


class HostsBackend:
    """One operation ('up', 'rollback' or 'down') of one inventory on its hosts. What the run has done so far is
    ``state`` (runstate.HostsRun); the steps it calls get the typed parts they use (``reach``, ``playbooks``)."""

    def __init__(self, operation: str, inv: Inventory, plan: Plan, targets: list[HostTarget], executor: Executor,
                 runner: Runner, record: RunRecord, opts: UpOptions, reporter: Reporter,
                 preflight: Callable[[dict[str, DeployedState]], None] | None = None):
        self.operation, self.inv, self.plan, self.targets = operation, inv, plan, targets
        self.executor, self.runner, self.rec, self.opts = executor, runner, record, opts
        self.reporter, self._preflight = reporter, preflight
        self.cdir = cluster_dir(plan)
        self.engine, self.ms = container_names(plan)
        self.reach = Reach(executor, targets, self.cdir, opts.ssh_timeout)
        self.playbooks = Playbooks(runner, record, plan, targets,
                                   common_vars(plan, opts, self.cdir, self.engine, self.ms),
                                   opts.trust_new_hosts, reporter)
        self.state = HostsRun()
        self._private: tempfile.TemporaryDirectory | None = None   # up: the real rendered tree and archives

    # -- read ---------------------------------------------------------------------------------------
    def read(self, health: bool = False) -> dict[str, DeployedState]:
        states = require_readable(read_deployed(self.plan, self.targets, self.executor, self.cdir, health=health,
                                                timeout=self.opts.ssh_timeout))
        merged = hist.merge(states)
        for line in [f for s in states.values() for f in s.findings] + merged.findings:
            if line not in self.state.reported:     # a host's lies are told once per run, not per read
                self.state.reported.add(line)
                self.reporter.failure(f"! {line}")
        if self.operation != "down":
            hist.next_revision(merged)              # a history that cannot take one more entry: refused here
        return states

    def preflight(self, observed: dict[str, DeployedState]) -> None:
        if self.operation == "up" and self._preflight is not None:
            self._preflight(observed)

    # -- render and diff ----------------------------------------------------------------------------
    def render(self, observed: dict[str, DeployedState]) -> Desired:
        if self.operation == "down":
            return Desired(push=False)
        if self.operation == "rollback":
            entry = hist.rollback_target(hist.merged(observed), observed, self.opts.to)
            nodes = {}
            for node, rev in entry["nodes"].items():
                man = observed[node].revisions[rev]
                nodes[node] = NodeIntent(node, rev, dict(man.files), man.env_digest, tuple(man.env_keys))
            self.reporter.step(f"rolling back to revision {entry['revision']} (run {entry['run_id']}, "
                               f"{entry.get('time', '')})")
            return Desired(nodes, push=False, entry=entry)
        return self._render_up()

    def _render_up(self) -> Desired:
        from deployctl.backends.hosts.revision import with_manifests
        from deployctl.backends.hosts.revision import node_bundles
        from deployctl.core.render import render_artifacts
        from deployctl.io.rendered_tree import write_tree

        from deployctl.core.input.secrets import mask_artifacts, secret_env_names

        artifacts = with_manifests(self.plan, render_artifacts(self.plan), self.rec.run_id)
        # the real files (env in clear) only in a private directory, packed and pushed from there; the record
        # keeps them with every secret env value masked
        self._private = tempfile.TemporaryDirectory(prefix="deployctl-push-")
        private = Path(self._private.name)
        rendered = private / "rendered"
        write_tree(rendered, artifacts, force=True)
        write_tree(self.rec.path / "rendered", mask_artifacts(artifacts, secret_env_names(self.inv)), force=True)
        nodes = {}
        for name, b in node_bundles(self.plan, artifacts).items():
            digest, keys = b.env_check()
            nodes[name] = NodeIntent(name, b.rev, b.digests, digest, tuple(keys))
        return Desired(nodes, push=True, rendered=rendered, packs=private / "push")

    def close(self) -> None:
        """Remove the private tree and archives (also done at exit when a run stops early)."""
        if self._private is not None:
            self._private.cleanup()
            self._private = None

    def diff(self, desired: Desired, observed: dict[str, DeployedState]) -> ChangeSet | DownChanges:
        if self.operation == "down":
            running = {n: sorted(c.name for c in s.containers.values() if c.status != "absent")
                       for n, s in observed.items()}
            entries = hist.merged(observed)
            last = entries[-1] if entries else None
            files = any(s.revisions or s.history or s.current_rev for s in observed.values())
            return DownChanges(running, bool(last and last.get("operation") == "down"),
                               self.cdir if self.opts.purge else "", files)
        changes = diff_deployment(self.plan, desired.nodes, observed, self.engine, self.ms)
        self.rec.write_json("changes.json", changes.model_dump())
        return changes

    # -- lock ---------------------------------------------------------------------------------------
    def lock(self) -> HostLock:
        return HostLock(self.executor, self.targets, self.cdir, LockOwner.me(self.rec.run_id),
                        timeout=self.opts.ssh_timeout, break_hint=f"`deployctl {self.operation} -i INV --break-lock`")

    # -- apply --------------------------------------------------------------------------------------
    def apply(self, desired: Desired, changes: ChangeSet | DownChanges, observed: dict[str, DeployedState],
              cancel: threading.Event) -> Applied:
        from deployctl.backends.hosts.ansible_run import run_down, run_up

        state, pb = self.state, self.playbooks
        if self.operation == "down" or isinstance(changes, DownChanges):
            return run_down(pb, state.smoke)
        state.moved = [h.node for h in changes.hosts if h.action != "keep" or h.ms_action not in (None, "keep")]
        if self.operation == "up":
            from deployctl.backends.hosts.rolling import BatchSteps, moving_instances, plan_rollout, roll

            state.rollout, why = plan_rollout(self.plan, changes, self.router_control(), self.opts.strategy,
                                              self.opts.max_unavailable)
            if state.rollout is not None:
                order = " -> ".join("+".join(b) for b in state.rollout.batches)
                self.reporter.step(f"rolling update, {self.opts.max_unavailable} instance(s) at a time: {order}")
                steps = BatchSteps(
                    restart=lambda nodes: run_up(pb, state, desired, changes, observed, cancel, only=nodes),
                    read_back=lambda nodes: self.read_back(desired, nodes),
                    smoke=self.smoke_instance)
                return roll(self.plan, state.rollout, state, steps, self.reporter, self.opts.drain_timeout, cancel)
            running = any(h.action == "restart" for h in changes.hosts)     # a first start has nothing to roll
            if running and len(moving_instances(self.plan, changes)) > 1 and len(self.plan.instances) > 1:
                self.reporter.step(f"all changed instances at once: {why}")
        return run_up(pb, state, desired, changes, observed, cancel)

    def router_control(self) -> RouterControl | None:
        """How to take instances out of the router and back (None: no router can)."""
        from deployctl.backends.hosts.router_control import Remote, control_for

        return control_for(self.plan, Remote(self.executor, {t.name: t for t in self.targets}, self.opts.ssh_timeout))

    def smoke_instance(self, instances: list[str]) -> str:
        """One chat completion to each instance's own endpoint, sent from its master (a rolling update's batch,
        before the router sends to it again): "" when every one answers with a message, else what went wrong."""
        import json

        from deployctl.backends.hosts.router_control import Remote

        remote = Remote(self.executor, {t.name: t for t in self.targets}, self.opts.smoke_timeout + 15)
        body = json.dumps({"model": self.inv.model.served_name, "max_tokens": 16, "stream": False,
                           "messages": [{"role": "user", "content": "Say hello in one word."}]})
        for name in instances:
            master = self.plan.instance(name).master
            serves = self.plan.engine_spec.processes(self.plan, self.plan.node(master)).serves
            if not serves:
                continue       # a P or D instance answers only through the P/D router
            code, text = remote.http(master, "POST", f"{serves}/v1/chat/completions", body)
            try:
                ok = code == 200 and bool(json.loads(text)["choices"][0]["message"]["content"])
            except (ValueError, KeyError, IndexError, TypeError):
                ok = False
            if not ok:
                return f"its own endpoint {serves} answered a chat completion with {code}: {text.strip()[:200]}"
        return ""

    def read_back(self, desired: Desired, nodes: list[str]) -> Verification:
        """Read back what ``nodes`` run (revision, environment, health) against the intent (a rollout's batch)."""
        targets = [t for t in self.targets if t.name in nodes]
        states = read_deployed(self.plan, targets, self.executor, self.cdir, health=True, timeout=self.opts.ssh_timeout)
        wants = {}
        for name in nodes:
            it = desired.nodes[name]
            wants[name] = Want(it.rev, it.env_digest, it.env_keys, router=has_router(self.plan, name))
        return verify_nodes(self.plan, wants, states, self.engine, self.ms, nodes=nodes)

    # -- verify -------------------------------------------------------------------------------------
    def wants(self, desired: Desired, changes: ChangeSet | DownChanges) -> dict[str, Want]:
        out = {}
        smoke = set(self.state.smoke_hosts)
        for node in self.plan.nodes:
            if self.operation == "down":
                out[node.name] = Want(None)
                continue
            it = desired.nodes[node.name]
            out[node.name] = Want(it.rev, it.env_digest, it.env_keys, router=has_router(self.plan, node.name),
                                  smoke=node.name in smoke)
        return out

    def verify(self, desired: Desired, changes: ChangeSet | DownChanges) -> Verification:
        states = read_deployed(self.plan, self.targets, self.executor, self.cdir,
                               health=self.operation != "down", timeout=self.opts.ssh_timeout)
        v = verify_nodes(self.plan, self.wants(desired, changes), states, self.engine, self.ms,
                         self.state.smoke)
        self.rec.write_json("verify.json", [u.__dict__ for u in v.units])
        return v

    def undo(self, desired: Desired, changes: ChangeSet | DownChanges,
             observed: dict[str, DeployedState]) -> Verification:
        from deployctl.backends.hosts.ansible_run import run_restore

        from deployctl.backends.hosts.rolling import put_back

        state = self.state
        if self.operation == "down" or not state.moved:
            put_back(state, self.reporter)
            return Verification([UnitCheck(n, "-", "nothing to restore", True) for n in state.moved])
        self.reporter.step(f"rolling back {', '.join(state.moved)} to what ran before")
        result = run_restore(self.playbooks, state.moved, observed, self.engine, rolling=state.rollout is not None,
                             answers=state.smoke)
        states = read_deployed(self.plan, self.targets, self.executor, self.cdir, health=True,
                               timeout=self.opts.ssh_timeout)
        wants = {}
        for node in state.moved:
            before = observed[node]
            ran = ran_before(before, self.engine)
            man = before.revisions.get(before.current_rev or "")
            wants[node] = Want(before.current_rev if ran else None, man.env_digest if man else "",
                               tuple(man.env_keys) if man else (), router=has_router(self.plan, node) and bool(ran))
        failed_task = f"; {result.failures[0].task} failed" if not result.ok and result.failures else ""
        units = [UnitCheck(u.unit, f"restore: {u.intended}", u.observed, u.ok,
                           u.cause + (failed_task if not u.ok else ""))
                 for u in verify_nodes(self.plan, wants, states, self.engine, self.ms, nodes=state.moved).units]
        self.rec.write_json("restore.json", [u.__dict__ for u in units])
        put_back(state, self.reporter)
        return Verification(units)

    # -- record -------------------------------------------------------------------------------------
    def record(self, outcome: Outcome, desired: Desired) -> None:
        from deployctl.backends.hosts.ansible_run import entry_for, prune, write_entry

        self.close()            # applied and read back (or undone): the archives are no longer needed
        if self.operation == "down" and self.opts.purge:
            # deployctl's own files only (its manifests, links, history entries, this run's lock): the rest stays
            from deployctl.backends.hosts.purge import purge, report

            results = purge(self.executor, self.targets, self.cdir, self.rec.run_id, self.opts.ssh_timeout)
            self.rec.write_json("purge.json", {h: r.__dict__ for h, r in results.items()})
            failed = report(results, self.cdir, self.reporter)
            if failed:
                self.reporter.failure(f"! deployctl's files not removed on: {', '.join(failed)}")
            return
        states = read_deployed(self.plan, self.targets, self.executor, self.cdir, timeout=self.opts.ssh_timeout)
        try:
            entry = entry_for(self.opts.record_as or self.operation, self.inv, self.plan, self.rec.run_id, outcome,
                              desired, hist.next_revision(hist.merge(states)))
            if self.opts.record_why:
                entry["summary"] = f"{self.opts.record_why}; {entry['summary']}"[:500]
            entry = seal(clean_entry(entry))
            problems = write_entry(self.reach, entry)
        except DeployctlError as exc:       # `down` of a history numbered to the end: the containers stopped anyway
            self.reporter.failure(f"! history entry not written: {exc.message} ({exc.hint})")
            return
        if problems:
            self.reporter.failure(f"! history entry not written on: {', '.join(problems)}")
        self.rec.write_json("history-entry.json", entry)
        if outcome.status == "successful" and self.operation != "down":
            prune(self.reach, hist.prune_plan(entry, states, self.inv.deploy.keep_revisions))


def require_readable(states: dict[str, DeployedState]) -> dict[str, DeployedState]:
    """The states, or ExecutionError naming every host that could not be read (nothing is changed)."""
    down = {n: s.error for n, s in states.items() if s.error}
    if down:
        raise ExecutionError(f"cannot read the deployment on {len(down)} host(s): nothing was changed",
                             problems=[Problem(message=e, path=n) for n, e in down.items()],
                             hint="fix SSH to these hosts (deployctl preflight shows why)")
    return states


def host_targets_abs(inv: Inventory, inventory_dir: Path) -> list[HostTarget]:
    """SSH targets with key/known_hosts paths made absolute (ansible runs from another directory)."""
    from deployctl.io.targets import ssh_targets

    return ssh_targets(inv, inventory_dir.resolve())


