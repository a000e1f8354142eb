"""`up | rollback | down | status | diff --target k8s`: the k8s backend (backend.py) with the real API
client and helm, run through the deploy pipeline; status and diff read the live release."""

from __future__ import annotations

from pathlib import Path

from deployctl.backends.common.pipeline import Options, Outcome, run_pipeline
from deployctl.io.records import RunRecord
from deployctl.io.kube import KubeApi, kube_target
from deployctl.backends.k8s.backend import K8sBackend
from deployctl.backends.k8s.state import K8sOptions, release_docs
from deployctl.backends.k8s.diff import InstanceAction, ObjectChange, diff_objects, instance_actions, stale_instances
from deployctl.backends.k8s.render import render_release
from deployctl.backends.k8s.rollout import Progress, describe, progress


def run_k8s_operation(operation: str, inv, opts: K8sOptions, reporter, confirm, *, to: int | None = None,
                      api=None, helm=None, plan=None) -> tuple[Outcome, K8sBackend]:
    """Run up, rollback or down of the inventory's release through the pipeline (``plan``: up's, from the
    operation's context; else planned here)."""
    from deployctl.io.helm import HelmClient

    from deployctl.backends.k8s.gang import with_gang

    target = kube_target(inv, opts.inventory_dir)
    api = api or KubeApi(target)
    if operation != "up":
        plan = None
    else:
        if plan is None:
            from deployctl.core.sizing.planner import plan_layout

            plan = plan_layout(inv)
        plan = with_gang(plan, api)       # kubernetes.gang auto: what the cluster serves
    helm = helm or HelmClient(target)
    record = RunRecord.create(opts.run_root, f"{operation}-k8s")
    backend = K8sBackend(operation, target, api, helm, record, opts, reporter, plan=plan, to=to)
    skip = opts.skip_preflight or operation != "up"
    outcome = run_pipeline(backend, record, Options(dry_run=opts.dry_run, yes=opts.yes, skip_preflight=skip),
                           reporter, confirm)
    return outcome, backend


def run_up(inv, opts: K8sOptions, reporter, confirm, plan=None) -> tuple[Outcome, K8sBackend]:
    return run_k8s_operation("up", inv, opts, reporter, confirm, plan=plan)


def run_rollback(inv, to: int | None, opts: K8sOptions, reporter, confirm) -> tuple[Outcome, K8sBackend]:
    return run_k8s_operation("rollback", inv, opts, reporter, confirm, to=to)


def run_down(inv, opts: K8sOptions, reporter) -> tuple[Outcome, K8sBackend]:
    """Uninstall (no confirmation, as `down` always was)."""
    opts.yes = True
    return run_k8s_operation("down", inv, opts, reporter, lambda changes: True)


def run_diff(inv, inventory_dir: Path, plan=None) -> tuple[list[ObjectChange], list[InstanceAction], list[str]]:
    """The object changes, the instances' actions, and the HPAs that scale the release's workloads (which `up`
    refuses: scalers.py)."""
    from deployctl.core.sizing.planner import plan_layout

    from deployctl.backends.k8s.gang import with_gang
    from deployctl.backends.k8s.scalers import foreign_scalers

    target = kube_target(inv, inventory_dir)
    api = KubeApi(target)
    docs = release_docs(render_release(with_gang(plan if plan is not None else plan_layout(inv), api)))
    live = api.release_objects()
    scalers = [f"{p.message}; {p.hint}" for p in foreign_scalers(docs, api.horizontal_pod_autoscalers() or [])]
    return diff_objects(docs, live), instance_actions(docs, live), scalers


def run_status(inv, inventory_dir: Path) -> tuple[Progress, list[str], bool, list[str], list[str]]:
    """Pods of the live release against its live StatefulSets/Deployments/LeaderWorkerSets (no rendering, no helm);
    the last items: what gang scheduling the release has (gang.pod_groups), what its LeaderWorkerSets report."""
    from deployctl.backends.k8s import infer_operator, lws
    from deployctl.backends.k8s.gang import pod_groups
    from deployctl.backends.k8s.rollout import WORKLOADS
    from deployctl.backends.k8s.scalers import foreign_scalers

    target = kube_target(inv, inventory_dir)
    api = KubeApi(target)
    workloads = [o for o in api.release_objects() if o["kind"] in WORKLOADS]
    pods = api.pods()
    prog = progress(workloads, pods)
    problems = [describe(p, api.pod_events(p.name)) for p in prog.pods if not p.ready]
    stale = stale_instances([w for w in workloads if w["kind"] == "StatefulSet"], pods)
    problems += [f"instance {i}: some pods run an older revision of their StatefulSet; `deployctl up --target k8s`"
                 " restarts the instance" for i in sorted(stale)]
    sets = [w for w in workloads if w["kind"] == infer_operator.KIND]
    old = infer_operator.stale_workloads(sets, api.statefulsets(infer_operator.MADE_BY_OPERATOR)) if sets else {}
    problems += [f"instance {i}: the Infer Operator's StatefulSets run an older pod template (it never updates them); "
                 "`deployctl up --target infer-operator` replaces them" for i in old]
    stale |= set(old)
    scalers = foreign_scalers(workloads, api.horizontal_pod_autoscalers() or [])
    problems += [f"{s.message}; {s.hint}" for s in scalers]
    gang = pod_groups(api, prog.expected) if workloads else []      # pods per instance, whatever makes them
    return prog, problems, not workloads or not prog.done or bool(stale), gang, \
        lws.status_lines(workloads) + infer_operator.status_lines(workloads)


def lock_holder(inv, inventory_dir: Path):
    """(holder, stale) of the release's Lease, or None when nobody holds it (read-only)."""
    from deployctl.backends.k8s.lease import read_lock

    target = kube_target(inv, inventory_dir)
    return read_lock(KubeApi(target), target.release)
