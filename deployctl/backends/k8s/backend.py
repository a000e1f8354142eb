"""The k8s backend of the deploy pipeline: `up | rollback | down --target k8s` of one Helm release.

K8sBackend implements deployctl.backends.common.pipeline.Backend for one Helm release; the Kubernetes API client
(KubeApi) and the helm runner (HelmClient) are passed to its constructor, so its logic is unit-tested
with fakes (tests/backends/k8s/test_k8s_backend.py) and end to end against a real control plane (kube-apiserver,
controller-manager, scheduler; kwok nodes) with the real helm (tests/backends/k8s/test_up_k8s*.py, tests/k8scluster.py).

Stages (the pipeline owns their order, the confirmation, the lock's lifetime and the undo)::

    read       the release's live objects, `helm status`, `helm history`
    preflight  up: the Nodes (names, the IPs the rank table uses, accelerator-type, NPUs)
    render     up: values + manifests of the plan; rollback: `helm get manifest --revision N`; down: nothing
    diff       rendered vs live objects, which instances restart (with the live helm revision)
    lock       the Lease deployctl-<release> (lease.py), and no pending helm operation on the release
    apply      up: `helm upgrade --install --description "deployctl run <id> by user@host"`; rollback:
               `helm rollback <release> N`; then delete the pods of the instances behind their StatefulSet's
               update revision (they restart together) and follow the pods until every one is ready; the
               first pod failing for good, or not ready at the deadline, is named with its events.
               down: `helm uninstall`, then wait until no pod of the release is left.
    verify     read back: every expected pod exists, runs its workload's current template, is Ready, and
               helm says `deployed` at the revision this run made (down: nothing of the release is left)
    undo       `helm rollback` to the revision deployed before the run (uninstall when there was none),
               then the same read back of what is left
    record     the run record, and the revision's note (run, user, result) for `history` (history.py)
"""

from __future__ import annotations

import threading
import time
from functools import cached_property
from pathlib import Path
from typing import Callable

from deployctl.core.render.chart_values import CHART_NAME
from deployctl.backends.common.lockinfo import LockOwner
from deployctl.backends.common.pipeline import Applied, Outcome, UnitCheck, Verification
from deployctl.io.records import RunRecord
from deployctl.core.errors import ExecutionError, Problem
from deployctl.backends.k8s import history as hist
from deployctl.backends.k8s import infer_operator, lws
from deployctl.io.kube import KubeTarget
from deployctl.backends.k8s.diff import ObjectChange, diff_objects, instance_actions
from deployctl.backends.k8s.follow import follow, instance_docs, replace_stale_roles, restart_stale
from deployctl.backends.k8s.lease import LeaseLock
from deployctl.core.render.k8s_nodes import check_nodes
from deployctl.backends.k8s.render import Release, render_release
from deployctl.backends.k8s.rollout import WORKLOADS, check_gone, check_pods, check_release
from deployctl.backends.k8s.scalers import foreign_scalers, rescaled
from deployctl.backends.k8s.state import (OPERATIONS, K8sChanges, K8sDesired, K8sOptions, K8sState, _settling, manifest_docs,
                                 release_docs)
from deployctl.core.models.plan import Plan

# ------------------------------------------------------------------------------------------ the backend

class K8sBackend:
    """The effects of up, rollback or down of one Helm release (deployctl.backends.common.pipeline.Backend)."""

    def __init__(self, operation: str, target: KubeTarget, api, helm, record: RunRecord, opts: K8sOptions,
                 reporter, *, plan: Plan | None = None, release: Callable[[], Release] | None = None,
                 to: int | None = None, owner: LockOwner | None = None, chart: Path | None = None):
        if operation not in OPERATIONS:
            raise ValueError(f"unknown operation {operation}")
        self.operation, self.target, self.api, self.helm = operation, target, api, helm
        self.run_record, self.opts, self.reporter, self.plan, self.to = record, opts, reporter, plan, to
        self._release_fn = release or (lambda: render_release(plan))
        self.owner = owner or LockOwner.me(record.run_id)
        self._chart = chart
        self.lease: LeaseLock | None = None
        self.applied_revision: int | None = None   # the revision apply made
        self.undo_revision: int | None = None      # the revision the undo made
        self.restored_to = ""                      # after an undo: "revision N" or "uninstalled"
        self._fresh = False                        # the release had no history before this run

    @property
    def user(self) -> str:
        return f"{self.owner.user}@{self.owner.host}"

    @cached_property
    def release(self) -> Release:
        return self._release_fn()

    @property
    def name(self) -> str:
        return self.target.release

    def _where(self) -> str:
        return f"{self.name} (namespace {self.target.namespace})"

    # -- read, preflight, render, diff: no change anywhere

    def read(self) -> K8sState:
        return K8sState(self.api.release_objects(), self.helm.status(), self.helm.history())

    def preflight(self, observed: K8sState) -> None:
        if self.operation != "up" or self.plan is None:
            return
        problems = check_nodes(self.plan, self.api.nodes(), self.release.values)
        kind = {"lws": lws, "infer-operator": infer_operator}.get(self.release.values.workload)
        if kind is not None and not self.api.serves(f"{kind.GROUP}/{kind.VERSION}", kind.KIND):
            problems.append(Problem(f"the cluster does not serve {kind.KIND} ({kind.GROUP}/{kind.VERSION}), which "
                                    f"kubernetes.workload {self.release.values.workload} renders",
                                    path="kubernetes.workload", hint=kind.HINT))
        problems += self._scalers()
        if problems:
            raise ExecutionError(f"{len(problems)} problem(s) with the cluster: nothing was changed",
                                 problems=problems, hint="fix them, or pass --skip-preflight")

    def _scalers(self) -> list[Problem]:
        """HPAs on the release's workloads (scalers.py): `up` and they would set the replicas in turn."""
        hpas = self.api.horizontal_pod_autoscalers()
        if hpas is None:
            self.reporter.step("! HorizontalPodAutoscalers not listed (not served, or not allowed): whether one "
                               "scales the release's workloads was not checked")
            return []
        return foreign_scalers(release_docs(self.release), hpas)

    def render(self, observed: K8sState) -> K8sDesired:
        if self.operation == "down":
            return K8sDesired([])
        if self.operation == "rollback":
            rows = hist.history_rows(observed.history, hist.read_notes(self.api, self.name))
            target = hist.choose_target(rows, self.to, self.name)
            text = self.helm.manifest(target)
            from deployctl.backends.k8s.render import mask_manifests

            self.run_record.write(f"manifests-revision-{target}.yaml", mask_manifests(text))
            return K8sDesired(manifest_docs(text), revision=target)
        rel = self.release
        if self.plan is not None:
            from deployctl.core.render import render_plan

            self.run_record.write("plan.json", render_plan(self.plan)[0].content)
        values_file = self.run_record.write("values.yaml", rel.values_text)
        self.run_record.write("manifests.yaml", rel.manifests_masked)      # the Secret's data masked
        return K8sDesired(release_docs(rel), values_file)

    def diff(self, desired: K8sDesired, observed: K8sState) -> K8sChanges:
        if self.operation == "down":
            objects = tuple(ObjectChange(o["kind"], o["metadata"]["name"], "removed") for o in observed.objects)
            changes = K8sChanges("down", self.name, objects, (), observed.live_revision)
        else:
            changes = K8sChanges(self.operation, self.name, tuple(diff_objects(desired.docs, observed.objects)),
                                 tuple(instance_actions(desired.docs, observed.objects)), observed.live_revision,
                                 desired.revision)
        self.run_record.write_json("changes.json", changes.to_dict())
        return changes

    # -- lock

    def lock(self) -> LeaseLock:
        if self.operation == "up" and self.api.ensure_namespace():
            self.reporter.step(f"created namespace {self.target.namespace} (Pod Security: privileged, for "
                               "hostNetwork/hostPath)")
        lock = LeaseLock(self.api, self.target.namespace, self.name, self.owner, renew_every=self.opts.lease_renew,
                         break_hint=f"`deployctl {self.operation} --target k8s --break-lock`",
                         on_lost=lambda message: self.reporter.failure(f"! {message}"))
        lock.acquire(break_existing=self.opts.break_lock, report=self.reporter.step)
        try:
            self._refuse_pending()
        except BaseException:
            lock.release()
            raise
        self.lease = lock
        return lock

    def _refuse_pending(self) -> None:
        """helm itself is changing the release (pending-install/upgrade/rollback): refuse, saying since when."""
        status = self.helm.status()
        info = (status or {}).get("info") or {}
        state = info.get("status") or ""
        if not state.startswith("pending-"):
            return
        rev, ns = status.get("version"), self.target.namespace
        since = info.get("last_deployed") or info.get("first_deployed") or "an unknown time"
        who = hist.parse_description(info.get("description") or "")
        by = f" by deployctl run {who[0]} ({who[1]})" if who else " (not under a deployctl lock: plain helm, or a " \
                                                                "deployctl that was killed)"
        deployed = [int(r["revision"]) for r in self.helm.history() if r.get("status") in ("deployed", "superseded")]
        fix = (f"`helm rollback {self.name} {max(deployed)} -n {ns}` ends it" if deployed
               else f"`helm uninstall {self.name} -n {ns}` removes it")
        raise ExecutionError(f"release {self._where()} has a helm operation in progress: {state} of revision {rev} "
                             f"since {since}{by}: nothing was changed",
                             hint=f"wait for it to finish (`helm status {self.name} -n {ns}`); if whoever started "
                                  f"it is gone, {fix}")

    # -- apply

    def _status(self) -> dict | None:
        try:
            return self.helm.status()
        except ExecutionError:
            return None

    def apply(self, desired: K8sDesired, changes: K8sChanges, observed: K8sState,
              cancel: threading.Event) -> Applied:
        self._fresh = observed.status is None and not observed.history
        try:
            if self.operation == "down":
                self.reporter.step(f"helm uninstall {self._where()}")
                self.helm.uninstall()
                return self._wait_gone(cancel)
            if self.operation == "up":
                from deployctl.io.helm import chart_dir

                self.reporter.step(f"helm upgrade --install {self._where()}")
                secret = self.release.secret_text       # the secret env values: never in the run record
                self.helm.upgrade_install(self._chart or chart_dir(CHART_NAME), desired.values_file,
                                          hist.description(self.run_record.run_id, self.user),
                                          **({"secret_text": secret} if secret else {}))
            else:
                self.reporter.step(f"helm rollback {self.name} {desired.revision} (namespace {self.target.namespace})")
                self.helm.rollback(desired.revision)
        except ExecutionError as exc:
            self.applied_revision = (self._status() or {}).get("version") if self.operation != "down" else None
            if self.applied_revision == observed.live_revision:
                self.applied_revision = None       # helm made no new revision
            return Applied(False, exc.message)
        self.applied_revision = (self.helm.status() or {}).get("version")
        return self._roll(desired.docs, cancel, "rollout.json")

    def _roll(self, docs: list[dict], cancel: threading.Event, record_name: str) -> Applied:
        """Restart the stale instances and follow the pods of ``docs`` until ready, failing or canceled."""
        self._unscale(docs)
        replace_stale_roles(self.api, docs, self.reporter, self.opts)
        for batch in restart_stale(self.api, self.name, self.reporter, self.opts):
            # rolling: the instances restart one at a time; the Service keeps sending to the others' ready pods
            prog, failing, canceled = follow(self.api, instance_docs(docs, batch), self.opts, self.reporter, cancel)
            if failing or canceled:
                break
        else:
            prog, failing, canceled = follow(self.api, docs, self.opts, self.reporter, cancel)
        self.run_record.write_json(record_name, {"expected": prog.expected, "ready": prog.ready,
                                             "pods": [p.__dict__ for p in prog.pods], "failing": failing})
        if canceled:
            return Applied(False, "interrupted (Ctrl-C)", canceled=True)
        return Applied(not failing, "\n".join(failing))

    def _unscale(self, docs: list[dict]) -> None:
        """Put back the replicas of a LeaderWorkerSet scaled outside deployctl, which helm leaves (scalers.py)."""
        if not any(d.get("kind") == lws.KIND for d in docs):
            return
        live = [o for o in self.api.release_objects() if o.get("kind") == lws.KIND]
        for change in rescaled(docs, live):
            self.reporter.step(change.line())
            try:
                self.api.scale_custom(lws.GROUP, lws.VERSION, lws.PLURAL, change.name, change.rendered)
            except ExecutionError as exc:      # the copy stays Pending; `status` shows it, the serving one serves
                self.reporter.failure(f"! {change.kind} {change.name} could not be scaled back: {exc.message}")

    def _wait_gone(self, cancel: threading.Event) -> Applied:
        deadline = time.monotonic() + self.opts.gone_timeout
        while True:
            left = self.api.pods()
            if not left:
                return Applied(True)
            if time.monotonic() >= deadline:
                return Applied(True)          # verify names what is left
            if cancel.wait(self.opts.poll):
                return Applied(False, "interrupted (Ctrl-C)", canceled=True)

    # -- verify (read back) and undo

    def _check(self, docs: list[dict], revision: int | None) -> Verification:
        deadline = time.monotonic() + self.opts.verify_settle
        while True:
            workloads = [o for o in self.api.release_objects() if o["kind"] in WORKLOADS]
            units = check_pods(docs, workloads, self.api.replicasets(), self.api.pods())
            units.append(check_release(self.name, self.helm.status(), revision))
            result = Verification(units)
            if result.ok or time.monotonic() >= deadline or not _settling(result):
                return result
            time.sleep(min(self.opts.poll, max(deadline - time.monotonic(), 0.01)))

    def _check_gone(self) -> Verification:
        return Verification(check_gone(self.name, self.helm.status(), self.api.release_objects(), self.api.pods()))

    def verify(self, desired: K8sDesired, changes: K8sChanges) -> Verification:
        if self.operation == "down":
            return self._check_gone()
        return self._check(desired.docs, self.applied_revision)

    def undo(self, desired: K8sDesired, changes: K8sChanges, observed: K8sState) -> Verification:
        if self.operation == "down":
            self.reporter.step("an uninstall cannot be undone: reading back what is left")
            return self._check_gone()
        previous = observed.deployed_revision
        try:
            now = self.helm.status()
            if previous is None:
                self.reporter.step(f"uninstalling {self.name} (nothing was deployed before this run)")
                if now is not None:
                    self.helm.uninstall()
                self.restored_to = "uninstalled"
                self._wait_gone(threading.Event())
                return self._check_gone()
            if now is not None and now.get("version") == observed.live_revision and \
                    (now.get("info") or {}).get("status") == observed.helm_status:
                self.reporter.step(f"helm made no new revision: {self.name} is still at revision {previous}")
            else:
                self.reporter.step(f"rolling back {self.name} to revision {previous}")
                self.helm.rollback(previous)
            self.restored_to = f"revision {previous}"
            self.undo_revision = (self.helm.status() or {}).get("version")
            docs = manifest_docs(self.helm.manifest(previous))
            applied = self._roll(docs, threading.Event(), "undo-rollout.json")
            if not applied.ok:
                self.reporter.failure(applied.failure)
            return self._check(docs, self.undo_revision)
        except ExecutionError as exc:
            self.reporter.failure(f"✗ the undo failed: {exc.message}")
            return Verification([UnitCheck(f"release {self.name}", f"back at revision {previous}"
                                           if previous else "uninstalled", "undo failed", False, exc.message)])

    # -- record

    def record(self, outcome: Outcome, desired: K8sDesired) -> None:
        """Note who made each new revision and how the run ended, where helm's own history cannot say it: a
        rollback (no --description) and a revision that failed (helm keeps it as "superseded" after the undo).
        A successful up needs no note: its helm description names the run and the user."""
        try:
            if (self.operation == "down" and outcome.status == "successful") or self.restored_to == "uninstalled":
                hist.delete_notes(self.api, self.name)
                return
            notes = {}
            if self.applied_revision and (self.operation != "up" or outcome.status != "successful"):
                notes[self.applied_revision] = {"run_id": self.run_record.run_id, "user": self.user,
                                                "operation": self.operation, "result": outcome.status}
            if self.undo_revision and self.undo_revision != self.applied_revision:
                ok = outcome.restored is not None and outcome.restored.ok
                notes[self.undo_revision] = {"run_id": self.run_record.run_id, "user": self.user,
                                             "operation": "undo", "result": "successful" if ok else "failed"}
            if notes:
                hist.write_notes(self.api, self.target.namespace, self.name, notes, reset=self._fresh)
            elif self._fresh:
                hist.delete_notes(self.api, self.name)     # notes of an older install of the same name
        except ExecutionError as exc:
            self.reporter.failure(f"! could not record the run in ConfigMap {hist.notes_name(self.name)} "
                                  f"({exc.message}): `history` will not show its user")


# ------------------------------------------------------------------------------------------ entry points
