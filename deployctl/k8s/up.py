"""`up | down | status | diff --target k8s`: the Helm release of a plan, followed through the API.

up: render values + manifests -> check the Nodes (names, IPs the rank table uses, accelerator-type,
NPUs) -> diff with the live release -> confirm -> `helm upgrade --install` -> delete the pods of the
instances that changed (they restart together) -> follow the pods until every one is ready. The first
pod that fails for good (CrashLoopBackOff, image pull, unschedulable past a grace period) or is still
not ready at the deadline is named with its events, and the release goes back to its previous
revision (or is uninstalled when there was none).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from deployctl.deploy.records import RunRecord
from deployctl.errors import ExecutionError, Problem
from deployctl.k8s import helm
from deployctl.k8s.api import RELEASE_LABEL, KubeApi, KubeTarget, kube_target
from deployctl.k8s.diff import (INSTANCE_LABEL, InstanceAction, ObjectChange, diff_objects, instance_actions,
                                settled, stale_instances)
from deployctl.k8s.rollout import Progress, describe, progress
from deployctl.k8s.render import Release, render_release
from deployctl.models.helm_values import ChartValues
from deployctl.models.plan import Plan


@dataclass
class K8sOptions:
    dry_run: bool = False
    yes: bool = False
    skip_checks: bool = False
    ready_timeout: float = 1800
    poll: float = 2.0
    unschedulable_grace: float = 120
    run_root: Path = Path(".deployctl")
    inventory_dir: Path = Path(".")


@dataclass
class K8sOutcome:
    status: str                 # nothing-to-do, dry-run, declined, successful, failed
    record: RunRecord
    changes: list[ObjectChange] = field(default_factory=list)
    actions: list[InstanceAction] = field(default_factory=list)
    failure: str = ""
    restored: str = ""          # what the failure left: "revision N" or "uninstalled"


class Reporter:
    def changes(self, changes: list[ObjectChange], actions: list[InstanceAction]) -> None: ...
    def step(self, message: str) -> None: ...
    def failure(self, message: str) -> None: ...


def release_docs(release: Release) -> list[dict]:
    """The rendered objects helm installs with the release (test hooks aside)."""
    import yaml

    docs = [d for d in yaml.safe_load_all(release.manifests) if d]
    return [d for d in docs if "helm.sh/hook" not in (d.get("metadata", {}).get("annotations") or {})]


def check_nodes(plan: Plan, nodes: list[dict], chart: ChartValues) -> list[Problem]:
    """The Nodes the pods are pinned to exist, carry the plan's IPs, accelerator-type and NPUs (pure)."""
    from deployctl.k8s.values import k8s_node

    inv = plan.inventory
    by_name = {n["metadata"]["name"]: n for n in nodes}
    accel, resource, per_pod = chart.npu.acceleratorType, chart.npu.resource, chart.npu.perPod
    out = []
    if inv.kubernetes.rank_table == "cluster":
        fit = [n for n in nodes if n["metadata"].get("labels", {}).get("accelerator-type") == accel]
        if len(fit) < len(plan.nodes):
            out.append(Problem(f"{len(fit)} Node(s) labelled accelerator-type={accel}, the plan needs "
                               f"{len(plan.nodes)}", path="nodes",
                               hint="label the NPU servers (MindCluster's node labelling) or add servers"))
        return out
    for node in plan.nodes:
        name = k8s_node(plan, node.name)
        live = by_name.get(name)
        if live is None:
            out.append(Problem(f"no Kubernetes Node named '{name}'", path=node.name,
                               hint="set nodes[].k8s_node to the server's Node name (kubectl get nodes)"))
            continue
        addresses = [a["address"] for a in (live.get("status") or {}).get("addresses") or []
                     if a.get("type") == "InternalIP"]
        if node.container_ip not in addresses:
            out.append(Problem(f"Node {name} has InternalIP {', '.join(addresses) or 'none'}, but the rank table "
                               f"names it {node.container_ip}", path=node.name,
                               hint="with hostNetwork the pod IP is the Node's InternalIP: set the node's "
                                    "address/container_ip to it, or fix kubelet --node-ip"))
        label = (live["metadata"].get("labels") or {}).get("accelerator-type")
        if label != accel:
            out.append(Problem(f"Node {name} has accelerator-type={label or '(none)'}, the pods select {accel}",
                               path=node.name, hint=f"kubectl label node {name} accelerator-type={accel}"))
        npus = (live.get("status") or {}).get("allocatable", {}).get(resource)
        if npus is None or int(str(npus)) < per_pod:
            out.append(Problem(f"Node {name} offers {npus or 0} {resource}, a pod needs {per_pod}", path=node.name,
                               hint="is the Ascend device plugin running there, and are all NPUs healthy?"))
    return out


def release_history(target: KubeTarget) -> int | None:
    """The release's last deployed revision, or None when it is not installed."""
    try:
        out = helm.run_helm(["history", target.release, "--max", "20", "--output", "json", *target.helm_args()],
                            "helm history")
    except ExecutionError as exc:
        if "not found" in exc.message:
            return None
        raise
    deployed = [r["revision"] for r in json.loads(out or "[]") if r.get("status") in ("deployed", "superseded")]
    return max(deployed) if deployed else None


def follow(api: KubeApi, docs: list[dict], opts: K8sOptions, reporter: Reporter) -> tuple[Progress, list[str]]:
    """Poll the pods until all are ready; return the last progress and the failing pods, described."""
    deadline = time.monotonic() + opts.ready_timeout
    pending_since: dict[str, float] = {}
    last = ""
    while True:
        prog = progress(docs, api.pods())
        if prog.line() != last:
            last = prog.line()
            reporter.step(f"  ready: {last}")
        if prog.done:
            return prog, []
        now = time.monotonic()
        for p in prog.pods:
            if p.unschedulable:
                pending_since.setdefault(p.name, now)
            else:
                pending_since.pop(p.name, None)
        bad = [p for p in prog.pods if p.fatal or
               (p.unschedulable and now - pending_since[p.name] >= opts.unschedulable_grace)]
        if now >= deadline:
            bad = [p for p in prog.pods if not p.ready]
            have = Counter(p.group for p in prog.pods)
            missing = [f"{g}: {n - have[g]} pod(s) not created" for g, n in prog.expected.items() if have[g] < n]
            return prog, [describe(p, api.pod_events(p.name)) for p in bad] + missing
        if bad:
            return prog, [describe(p, api.pod_events(p.name)) for p in bad]
        time.sleep(opts.poll)


def _restore(api: KubeApi, target: KubeTarget, previous: int | None, opts: K8sOptions, reporter: Reporter) -> str:
    if previous is None:
        reporter.step(f"uninstalling {target.release} (nothing was deployed before this run)")
        helm.run_helm(["uninstall", target.release, *target.helm_args()], "helm uninstall")
        return "uninstalled"
    reporter.step(f"rolling back {target.release} to revision {previous}")
    helm.run_helm(["rollback", target.release, str(previous), *target.helm_args()], "helm rollback")
    restart_stale(api, target, reporter, opts)     # the instances this run restarted go back too
    return f"revision {previous}"


def restart_stale(api: KubeApi, target: KubeTarget, reporter: Reporter, opts: K8sOptions) -> list[str]:
    """Delete all pods of every instance with a pod behind its StatefulSet's update revision (OnDelete)."""
    deadline = time.monotonic() + 60
    sets = api.statefulsets()
    while not settled(sets) and time.monotonic() < deadline:   # the controller catches up with the upgrade
        time.sleep(min(opts.poll, 1.0))
        sets = api.statefulsets()
    stale = sorted(stale_instances(sets, api.pods()))
    for inst in stale:
        gone = api.delete_pods(f"{RELEASE_LABEL}={target.release},{INSTANCE_LABEL}={inst}")
        reporter.step(f"  instance {inst}: restarting its {len(gone)} pod(s) together (new revision)")
    return stale


def run_up(inv, opts: K8sOptions, reporter: Reporter, confirm) -> K8sOutcome:
    from deployctl.planning.plan import plan_layout

    plan = plan_layout(inv)
    target = kube_target(inv, opts.inventory_dir)
    record = RunRecord.create(opts.run_root, "up-k8s")
    record.status("running")
    try:
        return _up(plan, target, record, opts, reporter, confirm)
    except BaseException:
        record.finish("failed", 1)
        raise


def _up(plan: Plan, target: KubeTarget, record: RunRecord, opts: K8sOptions, reporter: Reporter,
        confirm) -> K8sOutcome:
    from deployctl.render import render_plan

    release = render_release(plan)
    docs = release_docs(release)
    record.write("plan.json", render_plan(plan)[0].content)
    values_file = record.write("values.yaml", release.values_text)
    record.write("manifests.yaml", release.manifests)
    api = KubeApi(target)
    live = api.release_objects()
    if not opts.skip_checks:
        problems = check_nodes(plan, api.nodes(), release.values)
        if problems:
            raise ExecutionError(f"{len(problems)} problem(s) with the cluster's Nodes: nothing was changed",
                                 problems=problems, hint="fix them, or pass --skip-checks")
    changes = diff_objects(docs, live)
    actions = instance_actions(docs, live)
    record.write_json("changes.json", {"objects": [c.__dict__ for c in changes],
                                       "instances": [a.__dict__ for a in actions]})
    reporter.changes(changes, actions)
    if all(c.change == "unchanged" for c in changes):
        record.finish("successful", 0)
        return K8sOutcome("nothing-to-do", record, changes, actions)
    if opts.dry_run:
        record.finish("successful", 0)
        return K8sOutcome("dry-run", record, changes, actions)
    if not opts.yes and not confirm(changes):
        record.finish("canceled", 0)
        return K8sOutcome("declined", record, changes, actions)
    previous = release_history(target)
    if api.ensure_namespace():
        reporter.step(f"created namespace {target.namespace} (Pod Security: privileged, for hostNetwork/hostPath)")
    reporter.step(f"helm upgrade --install {target.release} (namespace {target.namespace})")
    helm.run_helm(["upgrade", "--install", target.release, str(helm.chart_dir()), "--values", str(values_file),
                   *target.helm_args()], "helm upgrade --install")
    restart_stale(api, target, reporter, opts)
    prog, failing = follow(api, docs, opts, reporter)
    record.write_json("rollout.json", {"expected": prog.expected, "ready": prog.ready,
                                       "pods": [p.__dict__ for p in prog.pods], "failing": failing})
    if not failing:
        record.finish("successful", 0)
        return K8sOutcome("successful", record, changes, actions)
    failure = "\n".join(failing)
    for line in failing:
        reporter.failure(line)
    restored = _restore(api, target, previous, opts, reporter)
    record.finish("failed", 1)
    return K8sOutcome("failed", record, changes, actions, failure, restored)


def run_diff(inv, inventory_dir: Path) -> tuple[list[ObjectChange], list[InstanceAction]]:
    from deployctl.planning.plan import plan_layout

    target = kube_target(inv, inventory_dir)
    docs = release_docs(render_release(plan_layout(inv)))
    live = KubeApi(target).release_objects()
    return diff_objects(docs, live), instance_actions(docs, live)


def run_status(inv, inventory_dir: Path) -> tuple[Progress, list[str], bool]:
    """Pods of the live release against its live StatefulSets/Deployments (no rendering, no helm)."""
    target = kube_target(inv, inventory_dir)
    api = KubeApi(target)
    workloads = [o for o in api.release_objects() if o["kind"] in ("StatefulSet", "Deployment")]
    pods = api.pods()
    prog = progress(workloads, pods)
    problems = [describe(p, api.pod_events(p.name)) for p in prog.pods if not p.ready]
    stale = stale_instances([w for w in workloads if w["kind"] == "StatefulSet"], pods)
    problems += [f"instance {i}: some pods run an older revision of their StatefulSet; `deployctl up --target k8s`"
                 " restarts the instance" for i in sorted(stale)]
    return prog, problems, not workloads or not prog.done or bool(stale)


def run_down(inv, inventory_dir: Path) -> str:
    target = kube_target(inv, inventory_dir)
    if release_history(target) is None:
        return "not-installed"
    helm.run_helm(["uninstall", target.release, *target.helm_args()], "helm uninstall")
    return "uninstalled"
