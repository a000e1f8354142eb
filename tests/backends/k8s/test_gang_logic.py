"""kubernetes.gang auto against what a cluster serves, and what `status` says about the release's PodGroups (a fake
API: the discovery answers and PodGroups are written here; the real API server's are in test_chart_gang.py)."""

from __future__ import annotations

from deployctl.backends.k8s.gang import pod_groups, served, with_gang


class Api:
    def __init__(self, serves: set[str], groups: list[dict] | None = None):
        self.served, self.groups = serves, groups or []

    def serves(self, group_version: str, kind: str) -> bool:
        return kind == "PodGroup" and group_version in self.served

    def custom_objects(self, group: str, version: str, plural: str) -> list[dict]:
        return [g for g in self.groups if g["apiVersion"] == f"{group}/{version}"]


def test_auto_prefers_volcano_then_kubernetes_then_off():
    assert served(Api({"scheduling.volcano.sh/v1beta1", "scheduling.k8s.io/v1alpha2"})) == "volcano"
    assert served(Api({"scheduling.k8s.io/v1alpha2"})) == "kubernetes"
    assert served(Api(set())) == "off"


def test_only_auto_is_resolved(tmp_path):
    from tests.core.checkpoint.test_plan import plan_of
    from tests.core.engines.sglang.test_launch import pd

    plan = plan_of(pd())
    assert plan.inventory.kubernetes.gang == "auto"
    assert with_gang(plan, Api({"scheduling.k8s.io/v1alpha2"})).inventory.kubernetes.gang == "kubernetes"
    off = plan_of(pd() + "kubernetes: {gang: off}\n")
    assert with_gang(off, Api({"scheduling.volcano.sh/v1beta1"})).inventory.kubernetes.gang == "off"


def test_status_names_each_instances_group_and_its_state():
    groups = [{"apiVersion": "scheduling.volcano.sh/v1beta1", "metadata": {"labels": {"deployctl.io/instance": "decode"}},
               "spec": {"minMember": 2}, "status": {"phase": "Inqueue"}},
              {"apiVersion": "scheduling.volcano.sh/v1beta1",
               "metadata": {"labels": {"deployctl.io/instance": "prefill\x1b[31m"}}, "spec": {"minMember": 1}}]
    lines = pod_groups(Api({"scheduling.volcano.sh/v1beta1"}, groups), {"decode": 2, "prefill": 1})
    assert lines[0] == ("gang (volcano): instance decode placed whole or not at all: PodGroup minimum 2 of its 2 "
                        "pods, Inqueue")
    assert "\x1b" not in lines[1]            # the API server's text is printed cleaned
    none = pod_groups(Api(set()), {"decode": 2})
    assert len(none) == 1 and none[0].startswith("gang: none")
