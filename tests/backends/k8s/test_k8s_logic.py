"""The pure parts of --target k8s: object diff, instance restarts, pod readiness and failure reasons."""

from __future__ import annotations

import copy

from deployctl.backends.k8s.diff import diff_objects, instance_actions, settled, stale_instances
from deployctl.backends.k8s.rollout import describe, pod_state, progress


def sts(name: str, inst: str, checksum: str, replicas: int = 1) -> dict:
    labels = {"app.kubernetes.io/instance": "r", "deployctl.io/instance": inst}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name, "labels": dict(labels)},
            "spec": {"replicas": replicas, "template": {"metadata": {
                "labels": dict(labels), "annotations": {"checksum/instance": checksum}}, "spec": {"hostNetwork": True}}}}


def cm(name: str, data: dict) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def live(doc: dict) -> dict:
    """What the API server returns: the object plus defaults, metadata and status."""
    out = copy.deepcopy(doc)
    out["metadata"].update(namespace="ns", uid="u-1", resourceVersion="7")
    if out["kind"] == "StatefulSet":
        out["spec"]["template"]["spec"]["dnsPolicy"] = "ClusterFirst"
        out["status"] = {"replicas": 1}
    return out


def test_server_defaults_are_not_differences():
    rendered = [cm("r-files", {"config.json": "{}"}), sts("r-mixed-master", "mixed", "a")]
    changes = diff_objects(rendered, [live(d) for d in rendered])
    assert [c.change for c in changes] == ["unchanged", "unchanged"]
    assert [a.action for a in instance_actions(rendered, [live(d) for d in rendered])] == ["keep"]


def test_changed_data_names_the_field_and_restarts_only_that_instance():
    old = [cm("r-p-files", {"config.json": "{}"}), sts("r-p-master", "prefill", "a"),
           sts("r-d-master", "decode", "b")]
    new = [cm("r-p-files", {"config.json": '{"x": 1}'}), sts("r-p-master", "prefill", "a"),
           sts("r-d-master", "decode", "c")]
    changes = {c.name: c for c in diff_objects(new, [live(d) for d in old])}
    assert changes["r-p-files"].change == "changed"
    assert changes["r-p-files"].fields == ("data.config.json",)
    assert changes["r-d-master"].fields == ("spec.template.metadata.annotations.checksum/instance",)
    actions = {a.instance: a.action for a in instance_actions(new, [live(d) for d in old])}
    assert actions == {"prefill": "keep", "decode": "restart"}


def test_new_and_removed_objects():
    rendered = [cm("a", {}), sts("r-mixed-master", "mixed", "x")]
    changes = diff_objects(rendered, [live(cm("old", {}))])
    assert {(c.name, c.change) for c in changes} == {("a", "new"), ("r-mixed-master", "new"), ("old", "removed")}
    assert instance_actions(rendered, [])[0].action == "start"


def pod(name: str, inst: str, checksum: str, ready: bool, **status) -> dict:
    return {"metadata": {"name": name, "labels": {"deployctl.io/instance": inst},
                         "annotations": {"checksum/instance": checksum}},
            "spec": {"nodeName": "node1"},
            "status": {"phase": status.pop("phase", "Running"),
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
                       **status}}


def test_progress_counts_only_pods_of_the_rendered_template():
    rendered = [sts("r-mixed-master", "mixed", "new"), sts("r-mixed-worker", "mixed", "new", replicas=3)]
    pods = [pod("m-0", "mixed", "new", True), pod("w-0", "mixed", "new", True), pod("w-1", "mixed", "old", True),
            pod("w-2", "mixed", "new", False)]
    prog = progress(rendered, pods)
    assert prog.expected == {"mixed": 4} and prog.ready == {"mixed": 2} and not prog.done
    assert [p.name for p in prog.pods] == ["m-0", "w-0", "w-2"]     # w-1 still runs the old template
    pods[2] = pod("w-1", "mixed", "new", True)
    pods[3] = pod("w-2", "mixed", "new", True)
    pods.append(pod("w-3", "mixed", "new", True))
    assert progress(rendered, pods).done


def test_crash_loop_is_fatal_with_its_last_exit():
    p = pod("w-0", "mixed", "x", False, containerStatuses=[{
        "restartCount": 4, "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
        "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}}}])
    state = pod_state(p)
    assert state.fatal and state.restarts == 4
    assert state.reason == "CrashLoopBackOff: back-off 40s (last exit 1: Error)"


def test_unschedulable_is_not_fatal_at_once_and_never_ready_is_described_with_events():
    p = pod("w-0", "mixed", "x", False, phase="Pending", conditions=[
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/4 nodes are available: 4 Insufficient huawei.com/Ascend910."}])
    state = pod_state(p)
    assert state.unschedulable and not state.fatal
    assert "Insufficient huawei.com/Ascend910" in state.reason
    running = pod_state(pod("m-0", "mixed", "x", False, containerStatuses=[
        {"restartCount": 0, "state": {"running": {}}}]))
    text = describe(running, [{"type": "Normal", "reason": "Pulled", "message": "ok"},
                              {"type": "Warning", "reason": "Unhealthy", "count": 12,
                               "message": "Readiness probe failed: HTTP probe failed with statuscode: 503"}])
    assert text.splitlines()[0] == ("pod m-0 (mixed) on node1: Running, not ready: the container runs, "
                                     "its readiness probe fails")
    assert text.splitlines()[1].strip() == ("Unhealthy: Readiness probe failed: HTTP probe failed with "
                                            "statuscode: 503 (x12)")
    assert "Pulled" not in text


def test_a_chart_version_label_alone_restarts_nothing():
    old = sts("r-mixed-master", "mixed", "a")
    new = copy.deepcopy(old)
    new["metadata"]["labels"]["helm.sh/chart"] = "mindie-0.2.0"
    assert [c.change for c in diff_objects([new], [live(old)])] == ["changed"]
    assert [a.action for a in instance_actions([new], [live(old)])] == ["keep"]


def test_pods_behind_the_update_revision_make_their_instance_stale():
    sets = [{"metadata": {"name": "r-p-master", "generation": 2},
             "status": {"observedGeneration": 2, "updateRevision": "r-p-master-new"}},
            {"metadata": {"name": "r-d-master", "generation": 3},
             "status": {"observedGeneration": 3, "updateRevision": "r-d-master-b"}}]

    def owned(name, owner, inst, rev):
        return {"metadata": {"name": name, "labels": {"deployctl.io/instance": inst, "controller-revision-hash": rev},
                             "ownerReferences": [{"kind": "StatefulSet", "name": owner}]}}

    pods = [owned("r-p-master-0", "r-p-master", "prefill", "r-p-master-old"),
            owned("r-d-master-0", "r-d-master", "decode", "r-d-master-b")]
    assert settled(sets)
    assert stale_instances(sets, pods) == {"prefill"}
    sets[1]["metadata"]["generation"] = 4            # the controller has not seen the upgrade yet
    assert not settled(sets)
