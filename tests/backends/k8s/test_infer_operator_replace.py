"""Replacing the Infer Operator's workloads after a pod template change: never before the operator has passed the new
template down to the InstanceSets (a workload deleted earlier is made again from the old template, and its pods
never become the new revision: seen in CI as `mixed: 1 pod(s) not created` after a changed podAnnotations)."""

from __future__ import annotations

from types import SimpleNamespace

from deployctl.backends.k8s.follow import replace_stale_roles
from deployctl.backends.k8s.infer_operator import instancesets_behind, stale_workloads
from deployctl.backends.k8s.lws import TEMPLATE_HASH

OP = "infer.huawei.com/"


def iss(new: str) -> dict:
    role = lambda name: {"name": name, "replicas": 1,                                   # noqa: E731
                         "metadata": {"labels": {"deployctl.io/instance": "mixed"}},
                         "spec": {"template": {"metadata": {"annotations": {TEMPLATE_HASH: new + name}}}}}
    return {"kind": "InferServiceSet", "metadata": {"name": "llm"},
            "spec": {"replicas": 1, "template": {"roles": [role("mixed"), role("mixed-w")]}}}


def made(kind_spec: dict, role: str, digest: str, uid: str = "") -> dict:
    return {"metadata": {"name": f"llm-0-{role}-0", "uid": uid,
                         "labels": {f"{OP}inferservice-name": "llm-0", f"{OP}instanceset-name": role}},
            "spec": {**kind_spec, "template": {"metadata": {"annotations": {TEMPLATE_HASH: digest}}}}}


def instanceset(role: str, digest: str) -> dict:
    ist = made({}, role, digest)
    ist["spec"] = {"name": role, "spec": ist.pop("spec")}      # an InstanceSet's spec is the role
    return ist


class FakeApi:
    """The operator lags: its InstanceSets hold the old template for ``lag`` reads, then the new one."""

    def __init__(self, lag: int, readable: bool = True):
        self.lag, self.readable, self.reads, self.log = lag, readable, 0, []
        self.sets = [made({}, "mixed", "oldmixed", "u1"), made({}, "mixed-w", "oldmixed-w", "u2")]

    def statefulsets(self, selector=None):
        return list(self.sets)

    def readable_custom_objects(self, group, version, plural, selector):
        assert (group, plural, selector) == ("mindcluster.huawei.com", "instancesets", f"{OP}inferservice-name")
        if not self.readable:
            return None
        self.reads += 1
        digest = "old" if self.reads <= self.lag else "new"
        self.log.append(("read", digest))
        return [instanceset("mixed", digest + "mixed"), instanceset("mixed-w", digest + "mixed-w")]

    def delete_statefulset(self, name):
        self.log.append(("delete", name))
        self.sets = [s for s in self.sets if s["metadata"]["name"] != name]
        return True


OPTS = SimpleNamespace(ready_timeout=30, poll=0.001)
QUIET = SimpleNamespace(step=lambda line: None)


def test_workloads_are_deleted_only_once_the_instancesets_hold_the_new_template():
    api = FakeApi(lag=3)
    assert replace_stale_roles(api, [iss("new")], QUIET, OPTS) == ["mixed"]
    first_delete = next(i for i, e in enumerate(api.log) if e[0] == "delete")
    assert api.log[first_delete - 1] == ("read", "new")
    assert all(e == ("read", "old") for e in api.log[:first_delete - 1]) and first_delete == 4
    assert {e[1] for e in api.log if e[0] == "delete"} == {"llm-0-mixed-0", "llm-0-mixed-w-0"}


def test_without_leave_to_list_instancesets_the_workloads_are_replaced_at_once():
    api = FakeApi(lag=10**6, readable=False)
    assert replace_stale_roles(api, [iss("new")], QUIET, OPTS) == ["mixed"]
    assert [e[0] for e in api.log] == ["delete", "delete"]


def test_nothing_waits_or_goes_when_the_workloads_run_the_rendered_template():
    api = FakeApi(lag=10**6)
    assert replace_stale_roles(api, [iss("old")], QUIET, OPTS) == []
    assert api.log == []


def test_instancesets_behind_names_those_without_the_rendered_template():
    docs = [iss("new")]
    assert instancesets_behind(docs, [instanceset("mixed", "newmixed"), instanceset("mixed-w", "oldmixed-w")],
                               {"mixed"}) == ["llm-0-mixed-w"]
    assert instancesets_behind(docs, [instanceset("mixed", "newmixed")], {"mixed"}) == ["llm-0-mixed-w"]   # not made
    assert instancesets_behind(docs, [], {"other"}) == []
    assert stale_workloads(docs, [made({}, "mixed", "newmixed"), made({}, "mixed-w", "newmixed-w")]) == {}


def test_an_instanceset_of_an_odd_shape_reads_as_not_holding_the_template():
    odd = [{"metadata": "x"}, {"metadata": {"labels": ["a"]}, "spec": "y"},
           {"metadata": {"labels": {f"{OP}inferservice-name": "llm-0", f"{OP}instanceset-name": "mixed"}},
            "spec": {"spec": {"template": ["z"]}}}]
    assert instancesets_behind([iss("new")], odd, {"mixed"}) == ["llm-0-mixed", "llm-0-mixed-w"]
