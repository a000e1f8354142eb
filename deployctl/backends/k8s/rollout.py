"""Follow a rollout: which pods are ready, which are failing and why (pure, over pod and event dicts).

A pod counts once it runs the rendered pod template (its checksum annotation) and is not being
deleted. Failing for good: a container waiting in CrashLoopBackOff, ImagePullBackOff, ErrImagePull,
CreateContainerConfigError, ...; unschedulable for longer than a grace period (old pods of a restarted
instance may still hold the NPUs for a while).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from deployctl.backends.k8s import infer_operator, lws
from deployctl.backends.k8s.diff import INSTANCE_LABEL

FATAL_WAITING = ("CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError",
                 "CreateContainerError", "InvalidImageName", "RunContainerError")
COMPONENT = "app.kubernetes.io/component"
WORKLOADS = ("StatefulSet", "Deployment", lws.KIND, infer_operator.KIND)      # what makes a release's pods
# the kinds whose pods a controller names from the template (pod_templates, pod_names)
TEMPLATED = {lws.KIND: lws, infer_operator.KIND: infer_operator}


@dataclass(frozen=True)
class PodState:
    name: str
    group: str                  # instance name, or ms-controller / ms-coordinator
    node: str
    phase: str
    ready: bool
    restarts: int
    reason: str = ""            # why it is not ready (waiting reason, last exit, unschedulable)
    fatal: bool = False
    unschedulable: bool = False


@dataclass
class Progress:
    ready: dict[str, int] = field(default_factory=dict)      # group -> ready pods
    expected: dict[str, int] = field(default_factory=dict)   # group -> pods
    pods: list[PodState] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return all(self.ready.get(g, 0) >= n for g, n in self.expected.items())

    def line(self) -> str:
        return ", ".join(f"{g} {self.ready.get(g, 0)}/{n}" for g, n in self.expected.items())


def group_of(labels: dict) -> str:
    return labels.get(INSTANCE_LABEL) or labels.get(COMPONENT, "?")


def expected_pods(rendered: list[dict]) -> tuple[dict[str, int], dict[str, set[str]]]:
    """Pods per group, and the annotations (key=value) one of which each pod of the group must carry: its
    checksum, or where the chart hashes whole pod templates (LeaderWorkerSet, InferServiceSet: their controllers,
    not deployctl, replace the pods) the hash of one of the group's templates."""
    counts: dict[str, int] = {}
    checksums: dict[str, set[str]] = {}
    for d in rendered:
        if d["kind"] in ("StatefulSet", "Deployment"):
            made = [(d["spec"]["template"], int(d["spec"].get("replicas", 1)))]
        elif d["kind"] in TEMPLATED:
            made = TEMPLATED[d["kind"]].pod_templates(d)
        else:
            continue
        for template, n in made:
            meta = template["metadata"]
            group = group_of(meta["labels"])
            counts[group] = counts.get(group, 0) + n
            mark = lws.checksum(template)
            if mark:
                checksums.setdefault(group, set()).add(mark)
    return counts, checksums


def pod_state(pod: dict) -> PodState:
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    conditions = {c["type"]: c for c in status.get("conditions") or []}
    ready = conditions.get("Ready", {}).get("status") == "True"
    restarts = sum(c.get("restartCount", 0) for c in status.get("containerStatuses") or [])
    reason, fatal, unschedulable = "", False, False
    sched = conditions.get("PodScheduled", {})
    if sched.get("status") == "False":
        unschedulable = sched.get("reason") == "Unschedulable"
        reason = f"{sched.get('reason', 'not scheduled')}: {sched.get('message', '')}".rstrip(": ")
    for c in status.get("containerStatuses") or []:
        waiting = (c.get("state") or {}).get("waiting")
        last = (c.get("lastState") or {}).get("terminated")
        if waiting and waiting.get("reason"):
            fatal = fatal or waiting["reason"] in FATAL_WAITING
            reason = f"{waiting['reason']}: {waiting.get('message', '')}".rstrip(": ")
            if last:
                reason += f" (last exit {last.get('exitCode')}: {last.get('reason') or last.get('message') or ''})"
        elif not ready and not reason and "running" in (c.get("state") or {}):
            reason = "the container runs, its readiness probe fails"
    return PodState(name=meta["name"], group=group_of(meta.get("labels") or {}), node=spec.get("nodeName", ""),
                    phase=status.get("phase", "Unknown"), ready=ready, restarts=restarts, reason=reason,
                    fatal=fatal, unschedulable=unschedulable)


def progress(rendered: list[dict], pods: list[dict]) -> Progress:
    counts, checksums = expected_pods(rendered)
    out = Progress(expected=counts)
    for pod in pods:
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            continue
        state = pod_state(pod)
        wants = checksums.get(state.group)
        annotations = meta.get("annotations") or {}
        if wants and not any(annotations.get(k) == v for k, _, v in (w.partition("=") for w in wants)):
            continue            # an old pod of a restarted instance
        out.pods.append(state)
        if state.ready:
            out.ready[state.group] = out.ready.get(state.group, 0) + 1
    return out


def describe(state: PodState, events: list[dict]) -> str:
    """One pod that is not ready, by name, with what Kubernetes says about it."""
    where = f" on {state.node}" if state.node else ""
    lines = [f"pod {state.name} ({state.group}){where}: {state.phase}, not ready"
             + (f", {state.restarts} restarts" if state.restarts else "")
             + (f": {state.reason}" if state.reason else "")]
    seen: dict[tuple[str, str], int] = {}     # the same warning again is one line with a count
    for e in events:
        if e.get("type") == "Warning":
            key = (e.get("reason", ""), e.get("message", ""))
            seen[key] = seen.pop(key, 0) + (e.get("count") or 1)
    for (reason, message), count in list(seen.items())[-5:]:
        lines.append(f"    {reason}: {message}" + (f" (x{count})" if count > 1 else ""))
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ verification
# What `up | rollback | down --target k8s` read back after applying: one UnitCheck per pod (and per
# missing pod, and for the helm release), intended vs observed, with the cause of each mismatch.

def _checksums(doc: dict) -> dict[str, str]:
    ann = (((doc.get("spec") or {}).get("template") or {}).get("metadata") or {}).get("annotations") or {}
    return {k: v for k, v in ann.items() if k.startswith("checksum/")}


def _owner(obj: dict, kind: str) -> dict | None:
    return next((o for o in obj["metadata"].get("ownerReferences") or [] if o.get("kind") == kind), None)


def _pod_unit(pod: dict, intended: str, template: str, current: str, template_cause: str):
    from deployctl.backends.common.pipeline import UnitCheck

    state = pod_state(pod)
    where = f" on {state.node}" if state.node else ""
    observed = f"{'Ready' if state.ready else 'not ready'} ({state.phase}){where}, template {template or '?'}"
    if template_cause:
        cause = template_cause
    elif template != current:
        cause = f"runs an old template ({template or 'none'}; the current one is {current or 'unknown'})"
    elif not state.ready:
        cause = state.reason or "not ready"
    else:
        cause = ""
    return UnitCheck(f"pod {state.name} ({state.group})", intended, observed, not cause, cause)


def check_pods(rendered: list[dict], workloads: list[dict], replicasets: list[dict], pods: list[dict]) -> list:
    """Every pod the rendered StatefulSets/Deployments/LeaderWorkerSets want exists, runs its workload's current template
    (StatefulSet status.updateRevision / the newest ReplicaSet's pod-template-hash), whose pod template is
    the rendered one (checksum annotation), and is Ready."""
    from deployctl.backends.common.pipeline import UnitCheck

    live = {(w["kind"], w["metadata"]["name"]): w for w in workloads}
    by_name = {p["metadata"]["name"]: p for p in pods}
    out = []
    for doc in rendered:
        kind, name = doc["kind"], doc["metadata"]["name"]
        if kind in TEMPLATED:
            out += check_templated(doc, live.get((kind, name)), by_name)
            continue
        if kind not in ("StatefulSet", "Deployment"):
            continue
        replicas = int(doc["spec"].get("replicas", 1))
        group = group_of(doc["spec"]["template"]["metadata"].get("labels") or {})
        have = live.get((kind, name))
        if have is None:
            out.append(UnitCheck(f"{kind} {name} ({group})", f"{replicas} pod(s) Ready", "missing", False,
                                 f"the {kind} does not exist"))
            continue
        template_cause = ""
        if _checksums(have) != _checksums(doc):
            template_cause = f"{kind} {name} does not carry the rendered pod template (its checksum differs)"
        if kind == "StatefulSet":
            current = (have.get("status") or {}).get("updateRevision", "")
            for i in range(replicas):
                pod = by_name.get(f"{name}-{i}")
                intended = f"Ready, template {current or '?'}"
                if pod is None or pod["metadata"].get("deletionTimestamp"):
                    out.append(UnitCheck(f"pod {name}-{i} ({group})", intended,
                                         "terminating" if pod else "missing", False,
                                         "the pod is being deleted" if pod else "no such pod"))
                    continue
                template = (pod["metadata"].get("labels") or {}).get("controller-revision-hash", "")
                out.append(_pod_unit(pod, intended, template, current, template_cause))
            continue
        uid = have["metadata"].get("uid")
        owned = [rs for rs in replicasets if (_owner(rs, "Deployment") or {}).get("uid") == uid]
        newest = max(owned, key=lambda rs: int((rs["metadata"].get("annotations") or {}).get(
            "deployment.kubernetes.io/revision", 0)), default=None)
        current = ((newest or {}).get("metadata", {}).get("labels") or {}).get("pod-template-hash", "")
        names = {rs["metadata"]["name"] for rs in owned}
        mine = [p for p in pods if (_owner(p, "ReplicaSet") or {}).get("name") in names
                and not p["metadata"].get("deletionTimestamp")]
        intended = f"Ready, template {current or '?'}"
        for pod in sorted(mine, key=lambda p: p["metadata"]["name"]):
            template = (pod["metadata"].get("labels") or {}).get("pod-template-hash", "")
            out.append(_pod_unit(pod, intended, template, current, template_cause))
        on_current = sum(1 for p in mine if (p["metadata"].get("labels") or {}).get("pod-template-hash") == current)
        if on_current < replicas:
            out.append(UnitCheck(f"Deployment {name} ({group})", f"{replicas} pod(s) on template {current or '?'}",
                                 f"{on_current} pod(s)", False, f"{replicas - on_current} pod(s) missing"))
    return out


def check_templated(doc: dict, have: dict | None, pods: dict[str, dict]) -> list:
    """One UnitCheck per pod a rendered LeaderWorkerSet or InferServiceSet ``doc`` wants (``have``: the live one,
    ``pods``: by name): it exists, is not being deleted, carries its template's checksum and is Ready."""
    from deployctl.backends.common.pipeline import UnitCheck

    kind, name = doc["kind"], doc["metadata"]["name"]
    how = TEMPLATED[kind]
    group = group_of((doc.get("metadata") or {}).get("labels") or {})
    if have is None:
        return [UnitCheck(f"{kind} {name} ({group})", f"{sum(n for _, n in how.pod_templates(doc))} pod(s) Ready",
                          "missing", False, f"the {kind} does not exist")]
    cause = "" if [lws.checksum(t) for t, _ in how.pod_templates(have)] == [
        lws.checksum(t) for t, _ in how.pod_templates(doc)] else (
        f"{kind} {name} does not carry the rendered pod templates (a checksum differs)")
    out = []
    for pod_name, template in how.pod_names(doc):
        want = lws.checksum(template).partition("=")[2][:12]
        intended = f"Ready, template {want or '?'}"
        unit = f"pod {pod_name} ({group_of((template.get('metadata') or {}).get('labels') or {})})"
        pod = pods.get(pod_name)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            out.append(UnitCheck(unit, intended, "terminating" if pod else "missing", False,
                                 "the pod is being deleted" if pod else "no such pod"))
            continue
        got = lws.checksum({"metadata": pod.get("metadata") or {}}).partition("=")[2][:12]
        out.append(_pod_unit(pod, intended, got, want, cause))
    return out


def check_release(release: str, status: dict | None, revision: int | None):
    """helm's view: the release is `deployed`, at the revision this run made (None: any)."""
    from deployctl.backends.common.pipeline import UnitCheck

    intended = f"deployed at revision {revision}" if revision else "deployed"
    if not status:
        return UnitCheck(f"release {release}", intended, "not installed", False, "helm has no such release")
    st, version = (status.get("info") or {}).get("status", "?"), status.get("version")
    observed = f"{st} at revision {version}"
    if st != "deployed":
        cause = f"helm status is {st}"
    elif revision is not None and version != revision:
        cause = f"revision {version} is live, not {revision} (another operator?)"
    else:
        cause = ""
    return UnitCheck(f"release {release}", intended, observed, not cause, cause)


def check_gone(release: str, status: dict | None, objects: list[dict], pods: list[dict]) -> list:
    """After an uninstall: no helm release, no workload and no pod of the release left."""
    from deployctl.backends.common.pipeline import UnitCheck

    out = []
    for o in objects:
        if o["kind"] in WORKLOADS:
            out.append(UnitCheck(f"{o['kind']} {o['metadata']['name']}", "gone", "still present", False,
                                 "the uninstall left it"))
    for p in pods:
        state = pod_state(p)
        deleting = bool(p["metadata"].get("deletionTimestamp"))
        out.append(UnitCheck(f"pod {state.name} ({state.group})", "gone",
                             "terminating" if deleting else f"{state.phase}", False,
                             "still shutting down" if deleting else "the uninstall left it"))
    if status:
        st = (status.get("info") or {}).get("status", "?")
        out.append(UnitCheck(f"release {release}", "uninstalled", f"{st} at revision {status.get('version')}",
                             False, "helm still has the release"))
    else:
        left = f"{len(out)} pod(s)/workload(s) left" if out else "no pod or workload left"
        out.append(UnitCheck(f"release {release}", "uninstalled", f"not installed, {left}", not out,
                             "" if not out else "objects of the release remain"))
    return out
