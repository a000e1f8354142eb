"""Follow a release's pods after a change: restart the instances behind their StatefulSet's update
revision together, then poll until every pod is ready or one fails for good."""

from __future__ import annotations

import threading
import time
from collections import Counter

from deployctl.io.kube import RELEASE_LABEL
from deployctl.backends.k8s.diff import INSTANCE_LABEL, settled, stale_instances
from deployctl.backends.k8s.rollout import Progress, describe, progress


def follow(api, docs: list[dict], opts, reporter,
           cancel: threading.Event | None = None) -> tuple[Progress, list[str], bool]:
    """Poll the pods until all are ready: (last progress, the failing pods described, canceled)."""
    cancel = cancel or threading.Event()
    deadline = time.monotonic() + opts.ready_timeout
    pending_since: dict[str, float] = {}
    last = ""
    while True:
        prog = progress(docs, api.pods())
        if prog.line() != last:
            last = prog.line()
            reporter.step(f"  ready: {last}")
        if prog.done:
            return prog, [], False
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
            return prog, [describe(p, api.pod_events(p.name)) for p in bad] + missing, False
        if bad:
            return prog, [describe(p, api.pod_events(p.name)) for p in bad], False
        if cancel.wait(opts.poll):
            return prog, [], True


def restart_stale(api, release: str, reporter, opts):
    """Delete all pods of every instance with a pod behind its StatefulSet's update revision (OnDelete).

    Yields each batch it restarted, for the caller to follow until ready before the next one: with
    ``opts.strategy`` rolling and every stale instance's role keeping another instance (the Service sends to
    its ready pods), one instance per batch; else one batch of all of them."""
    deadline = time.monotonic() + 60
    sets = _own(api.statefulsets())
    while not settled(sets) and time.monotonic() < deadline:   # the controller catches up with the upgrade
        time.sleep(min(opts.poll, 1.0))
        sets = _own(api.statefulsets())
    stale = sorted(stale_instances(sets, api.pods()), key=_instance_order)
    roles = Counter(role for _, role in {(_labels(s).get(INSTANCE_LABEL), _role(s)) for s in sets})
    rolling = getattr(opts, "strategy", "rolling") == "rolling" and stale and all(
        roles[_role_of(inst, sets)] > 1 for inst in stale)
    for batch in ([[i] for i in stale] if rolling else [stale] if stale else []):
        for inst in batch:
            gone = api.delete_pods(f"{RELEASE_LABEL}={release},{INSTANCE_LABEL}={inst}")
            how = "one instance at a time" if rolling else "all its pods together"
            reporter.step(f"  instance {inst}: restarting its {len(gone)} pod(s) ({how}, new revision)")
        yield batch


def replace_stale_roles(api, docs: list[dict], reporter, opts) -> list[str]:
    """kubernetes.workload infer-operator: delete the operator's StatefulSets of every instance whose pod template
    changed (infer_operator.stale_workloads) once their InstanceSets hold the new template, wait until they are gone
    (the operator then makes them again from the new spec); the instances replaced."""
    from deployctl.backends.k8s.infer_operator import MADE_BY_OPERATOR, stale_workloads

    if not any(d.get("kind") == "InferServiceSet" for d in docs):
        return []
    stale = stale_workloads(docs, api.statefulsets(MADE_BY_OPERATOR))
    deadline = time.monotonic() + opts.ready_timeout
    if stale:
        _until_instancesets_hold(api, docs, set(stale), reporter, opts, deadline)
    for inst, sets in stale.items():
        for s in sets:
            api.delete_statefulset(s["metadata"]["name"])
        reporter.step(f"  instance {inst}: replacing its {len(sets)} StatefulSet(s) (the Infer Operator makes them "
                      "again from the new pod template)")
    gone = {s["metadata"].get("uid") for sets in stale.values() for s in sets}
    while gone and time.monotonic() < deadline:
        live = {s["metadata"].get("uid") for s in api.statefulsets(MADE_BY_OPERATOR)}
        if not gone & live:
            break
        time.sleep(min(opts.poll, 1.0))
    return list(stale)


def _until_instancesets_hold(api, docs: list[dict], instances: set[str], reporter, opts, deadline: float) -> None:
    """Wait until the operator has passed the new pod template down to these instances' InstanceSets: a workload
    deleted earlier would be made again from the old one (infer_operator.instancesets_behind). Not waited for when
    this user may not list InstanceSets."""
    from deployctl.backends.k8s.infer_operator import GROUP, VERSION, OPERATOR_KEY, instancesets_behind

    said = False
    while True:
        sets = api.readable_custom_objects(GROUP, VERSION, "instancesets", OPERATOR_KEY)
        behind = [] if sets is None else instancesets_behind(docs, sets, instances)
        if not behind or time.monotonic() >= deadline:
            return
        if not said:
            reporter.step(f"  waiting for the Infer Operator to pass the new pod template to {', '.join(behind[:4])}"
                          + (f" and {len(behind) - 4} more" if len(behind) > 4 else ""))
            said = True
        time.sleep(min(opts.poll, 1.0))


def _own(sets: list[dict]) -> list[dict]:
    """The release's own StatefulSets: not those a LeaderWorkerSet made (it rolls and restarts them itself)."""
    return [s for s in sets if not (s.get("metadata") or {}).get("ownerReferences")]


def _instance_order(name: str):
    base, _, n = name.rpartition("-")
    return (base, int(n)) if n.isdigit() else (name, -1)


def _labels(obj: dict) -> dict:
    return (obj.get("metadata") or {}).get("labels") or {}


def _role(sts: dict) -> str:
    return _labels(sts).get("deployctl.io/role", "")


def _role_of(instance: str, sets: list[dict]) -> str:
    return next((_role(s) for s in sets if _labels(s).get(INSTANCE_LABEL) == instance), "")


def instance_docs(docs: list[dict], instances: list[str]) -> list[dict]:
    """The rendered workloads of these instances (to follow their pods only)."""
    return [d for d in docs if d.get("kind") != "StatefulSet" or _labels(d).get(INSTANCE_LABEL) in instances]
