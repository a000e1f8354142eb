"""What deployctl reads back of a release of LeaderWorkerSets (pure, over literal API dicts): pods expected per
instance, each pod checked against the rendered template, no restart of its own of pods a LWS controls."""

from __future__ import annotations

from deployctl.backends.k8s import lws
from deployctl.backends.k8s.diff import instance_actions
from deployctl.backends.k8s.follow import _own
from deployctl.backends.k8s.rollout import check_pods, expected_pods, progress

SUM = "checksum/instance"


def _template(role: str, checksum: str) -> dict:
    return {"metadata": {"labels": {"deployctl.io/instance": "mixed", "deployctl.io/rank-role": role},
                         "annotations": {SUM: checksum}}, "spec": {}}


def _lws(checksum: str = "aaa", size: int = 3) -> dict:
    return {"kind": "LeaderWorkerSet", "metadata": {"name": "r-mixed", "labels": {"deployctl.io/instance": "mixed"}},
            "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": size, "leaderTemplate": _template("master", checksum),
                                                             "workerTemplate": _template("worker", checksum)}}}


def _pod(name: str, checksum: str, ready: bool = True, deleting: bool = False, inst: str = "mixed") -> dict:
    meta = {"name": name, "labels": {"deployctl.io/instance": inst}, "annotations": {SUM: checksum}}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-29T10:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": "n"},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_pods_of_a_group_are_its_leader_and_workers():
    assert [n for n, _ in lws.pod_names(_lws())] == ["r-mixed-0", "r-mixed-0-1", "r-mixed-0-2"]
    one = _lws(size=1)
    del one["spec"]["leaderWorkerTemplate"]["leaderTemplate"]
    assert [n for n, _ in lws.pod_names(one)] == ["r-mixed-0"]
    assert expected_pods([_lws()]) == ({"mixed": 3}, {"mixed": {f"{SUM}=aaa"}})


def test_every_pod_must_run_the_rendered_template_and_be_ready():
    rendered = _lws("new")
    pods = [_pod("r-mixed-0", "new"), _pod("r-mixed-0-1", "old"), _pod("r-mixed-0-2", "new", deleting=True)]
    units = {u.unit: u for u in check_pods([rendered], [_lws("new")], [], pods)}
    assert units["pod r-mixed-0 (mixed)"].ok
    assert not units["pod r-mixed-0-1 (mixed)"].ok and "old template" in units["pod r-mixed-0-1 (mixed)"].cause
    assert units["pod r-mixed-0-2 (mixed)"].observed == "terminating"
    assert progress([rendered], pods).ready == {"mixed": 1}       # the old pod does not count
    missing = check_pods([rendered], [], [], [])
    assert len(missing) == 1 and missing[0].cause == "the LeaderWorkerSet does not exist"
    stale = {u.unit: u for u in check_pods([rendered], [_lws("old")], [], [_pod("r-mixed-0", "new")])}
    assert "checksum differs" in stale["pod r-mixed-0 (mixed)"].cause


def test_a_changed_instance_restarts_and_deployctl_leaves_the_lws_statefulsets_alone():
    assert [(a.instance, a.action) for a in instance_actions([_lws("new")], [_lws("old")])] == [("mixed", "restart")]
    assert [(a.instance, a.action) for a in instance_actions([_lws("same")], [_lws("same")])] == [("mixed", "keep")]
    own = {"metadata": {"name": "r-mixed-0"}}
    made = {"metadata": {"name": "r-mixed", "ownerReferences": [{"kind": "LeaderWorkerSet", "controller": True}]}}
    assert _own([own, made]) == [own]


def test_status_says_groups_ready_and_available():
    live = {**_lws(), "status": {"readyReplicas": 1, "conditions": [{"type": "Available", "status": "True"}]}}
    assert lws.status_lines([live]) == ["LeaderWorkerSet r-mixed: 1/1 group(s) of 3 ready, Available=True"]


def _iss(a: str = "aaa", b: str = "bbb") -> dict:
    def role(name: str, inst: str, role_: str, pods: int, checksum: str) -> dict:
        t = {"metadata": {"labels": {"deployctl.io/instance": inst, "deployctl.io/rank-role": role_},
                          "annotations": {SUM: checksum}}, "spec": {}}
        return {"name": name, "replicas": 1, "metadata": {"labels": {"deployctl.io/instance": inst}},
                "spec": {"replicas": pods, "template": t}}
    return {"kind": "InferServiceSet", "metadata": {"name": "r", "labels": {}},
            "spec": {"replicas": 1, "template": {"roles": [role("p", "p", "master", 1, a), role("d", "d", "master", 1, b),
                                                           role("d-w", "d", "worker", 2, b)]}}}


def test_an_inferserviceset_wants_the_operators_pods_per_role():
    """Names as MindCluster's Infer Operator gives them: <iss>-<i>-<role>-<idx>, a StatefulSet's pods -<k>
    (Ascend/mind-cluster@22bb3d98 pkg/common/utils.go L80-82)."""
    from deployctl.backends.k8s import infer_operator

    assert [n for n, _ in infer_operator.pod_names(_iss())] == ["r-0-p-0-0", "r-0-d-0-0", "r-0-d-w-0-0", "r-0-d-w-0-1"]
    assert expected_pods([_iss()])[0] == {"p": 1, "d": 3}
    pods = [_pod("r-0-p-0-0", "aaa", inst="p")]
    units = {u.unit: u for u in check_pods([_iss()], [_iss()], [], pods)}
    assert units["pod r-0-p-0-0 (p)"].ok and units["pod r-0-d-w-0-1 (d)"].observed == "missing"


def test_a_role_change_restarts_only_its_instance():
    actions = {a.instance: a.action for a in instance_actions([_iss("aaa", "new")], [_iss("aaa", "old")])}
    assert actions == {"p": "keep", "d": "restart"}
    changed = _iss()
    changed["spec"]["template"]["roles"][0]["spec"]["template"]["spec"] = {"hostNetwork": True}
    assert {a.instance: a.action for a in instance_actions([changed], [_iss()])} == {"p": "restart", "d": "keep"}


def test_status_says_inferservices_ready_and_the_condition():
    from deployctl.backends.k8s import infer_operator

    live = {**_iss(), "status": {"readyReplicas": 1, "conditions": [
        {"type": "Ready", "status": "True", "reason": "AllInferServicesReady"}]}}
    assert infer_operator.status_lines([live]) == ["InferServiceSet r: 1/1 InferService(s) ready, Ready=True "
                                                   "(AllInferServicesReady)"]
    assert "is the Infer Operator running" in infer_operator.status_lines([_iss()])[0]
