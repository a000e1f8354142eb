"""Follow a rollout: which pods are ready, which are failing and why (pure, over pod and event dicts).

A pod counts once it runs the rendered pod template (its checksum annotation) and is not being
deleted. Failing for good: a container waiting in CrashLoopBackOff, ImagePullBackOff, ErrImagePull,
CreateContainerConfigError, ...; unschedulable for longer than a grace period (old pods of a restarted
instance may still hold the NPUs for a while).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from deployctl.k8s.diff import CHECKSUM, INSTANCE_LABEL

FATAL_WAITING = ("CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError",
                 "CreateContainerError", "InvalidImageName", "RunContainerError")
COMPONENT = "app.kubernetes.io/component"


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


def expected_pods(rendered: list[dict]) -> tuple[dict[str, int], dict[str, str]]:
    """Pods per group, and the checksum annotation the pods of each group must carry."""
    counts: dict[str, int] = {}
    checksums: dict[str, str] = {}
    for d in rendered:
        if d["kind"] not in ("StatefulSet", "Deployment"):
            continue
        template = d["spec"]["template"]["metadata"]
        group = group_of(template["labels"])
        counts[group] = counts.get(group, 0) + int(d["spec"].get("replicas", 1))
        for key, value in (template.get("annotations") or {}).items():
            if key.startswith("checksum/"):
                checksums[group] = f"{key}={value}"
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
        want = checksums.get(state.group)
        if want:
            key, value = want.split("=", 1)
            if (meta.get("annotations") or {}).get(key) != value:
                continue        # an old pod of a restarted instance
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
