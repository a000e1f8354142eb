"""Cluster scalers on a release's workloads (deployctl/backends/k8s/scalers.py): which HPAs scale what the release
renders (or what the Infer Operator makes of it), and which LeaderWorkerSets were scaled outside deployctl; the
backend's use of both (refuse in `up`'s preflight, put the replicas back after helm).

Upstream shapes, as the tests below read them:
* MindCluster Infer Operator, Ascend/mind-cluster@22bb3d987bc0208c3eb7395e222b661276133c58 (API identical to tag
  v26.1.0), component/infer-operator/: a role of an InferServiceSet is an InstanceSetSpec with
  `scalingPolicy: {type, spec}` (pkg/api/v1/instanceset_types.go L45-60, type "HPA": pkg/common/constant.go L179-180;
  the path spec.template.roles[].scalingPolicy: inferserviceset_types.go L27, inferservice_types.go L26); the
  InstanceSet CRD serves /scale on .spec.replicas (build/infer-operator.yaml L1859-1863, the CRDs in
  tests/fixtures/crds/); the operator makes the HPA `<instanceset>-scaler` targeting the InstanceSet, labelled
  infer.huawei.com/scaling-owned-by (pkg/controller/scaling/scaling_manager.go L40, L95-99, L227-239), and keeps an
  HPA-managed InstanceSet's replicas when it updates it from the role (pkg/controller/v1/inferservice_controller.go
  L383-391, L407-429).
* LeaderWorkerSet, kubernetes-sigs/lws@v0.9.0 (f056f611) api/leaderworkerset/v1/leaderworkerset_types.go: /scale on
  .spec.replicas with selector .status.hpaPodSelector (L416), the group leaders (L381-385;
  pkg/controllers/leaderworkerset_controller.go L535-548).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from conftest import ROOT
from deployctl.backends.k8s.scalers import HINT, INSTANCE_SET, WHY, foreign_scalers, rescaled, targets

CRDS = ROOT / "tests" / "fixtures" / "crds" / "mindcluster-infer-operator-v26.1-crds.yaml"
LWS_API = "leaderworkerset.x-k8s.io/v1"


def lws_doc(name: str, inst: str, replicas: int = 1) -> dict:
    return {"apiVersion": LWS_API, "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "labels": {"deployctl.io/instance": inst}},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": 2}}}


def iss_doc(name: str, roles: list[tuple[str, str]]) -> dict:
    return {"apiVersion": "mindcluster.huawei.com/v1", "kind": "InferServiceSet", "metadata": {"name": name},
            "spec": {"replicas": 1, "template": {"roles": [
                {"name": role, "replicas": 1, "metadata": {"labels": {"deployctl.io/instance": inst}}}
                for role, inst in roles]}}}


def hpa(name: str, kind: str, target: str, api_version: str, labels: dict | None = None, **spec) -> dict:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "namespace": "ns", **({"labels": labels} if labels else {})},
            "spec": {"scaleTargetRef": {"apiVersion": api_version, "kind": kind, "name": target},
                     "minReplicas": 1, "maxReplicas": 4, **spec}}


def _schema_at(schema: dict, path: list[str]) -> dict:
    for key in path:
        schema = schema["items"] if key == "[]" else schema["properties"][key]
    return schema


def test_the_infer_operator_crds_carry_a_roles_scaling_policy_and_instancesets_serve_scale():
    """The CRDs the test API server installs (mind-cluster 22bb3d98 build/infer-operator.yaml): the field deployctl
    leaves out is spec.template.roles[].scalingPolicy = {type: string, spec: an HPA spec, kept as written}, and what
    the operator's HPA scales is an InstanceSet's .spec.replicas through /scale."""
    crds = {d["spec"]["names"]["kind"]: d["spec"]["versions"][0] for d in yaml.safe_load_all(CRDS.read_text()) if d}
    roots = {"InferServiceSet": ["spec", "template", "roles", "[]"], "InferService": ["spec", "roles", "[]"],
             INSTANCE_SET: ["spec"]}
    for kind, path in roots.items():
        policy = _schema_at(crds[kind]["schema"]["openAPIV3Schema"], path + ["scalingPolicy"])
        assert policy["properties"]["type"] == {"type": "string"}, kind
        assert policy["properties"]["spec"] == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}, kind
    assert crds[INSTANCE_SET]["subresources"]["scale"] == {
        "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.labelSelector"}
    assert "scale" not in crds["InferServiceSet"]["subresources"]     # nothing scales the set itself


def test_targets_are_the_workloads_and_the_operators_instancesets():
    docs = [lws_doc("r-ascend-llm-p0", "p0"),
            {"kind": "StatefulSet", "metadata": {"name": "r-ascend-llm-d0-0", "labels": {"deployctl.io/instance": "d0"}}},
            {"kind": "Deployment", "metadata": {"name": "r-ascend-llm-router",
                                                "labels": {"app.kubernetes.io/component": "router"}}},
            {"kind": "ConfigMap", "metadata": {"name": "r-ascend-llm-p0-files"}},
            iss_doc("r-ascend-llm", [("p0", "p0"), ("p0-w", "p0")])]
    assert targets(docs) == {("LeaderWorkerSet", "r-ascend-llm-p0"): "p0", ("StatefulSet", "r-ascend-llm-d0-0"): "d0",
                             ("Deployment", "r-ascend-llm-router"): "router",
                             (INSTANCE_SET, "r-ascend-llm-0-p0"): "p0", (INSTANCE_SET, "r-ascend-llm-0-p0-w"): "p0"}


def test_an_hpa_on_a_release_workload_is_named_with_why_its_copies_cannot_run():
    docs = [lws_doc("r-ascend-llm-mixed", "mixed"), lws_doc("r-ascend-llm-m1", "m1")]
    hpas = [hpa("mine", "LeaderWorkerSet", "r-ascend-llm-mixed", LWS_API, minReplicas=2, maxReplicas=3),
            hpa("other-app", "LeaderWorkerSet", "someone-else", LWS_API),
            hpa("same-name-other-group", "LeaderWorkerSet", "r-ascend-llm-m1", "example.com/v1"),
            hpa("a-deployment", "Deployment", "r-ascend-llm-m1", "apps/v1"),
            "not an object", {"metadata": {"name": "no-spec"}}]
    problems = foreign_scalers(docs, hpas)
    assert [p.path for p in problems] == ["HorizontalPodAutoscaler/mine"]
    p = problems[0]
    assert p.message == ("HorizontalPodAutoscaler mine scales LeaderWorkerSet r-ascend-llm-mixed (min 2, max 3) of "
                         f"instance mixed: {WHY['LeaderWorkerSet']}")
    assert p.hint == HINT.format(how="delete it (`kubectl delete hpa mine -n ns`)")


def test_the_operators_hpa_from_a_scaling_policy_is_named_as_the_operators():
    docs = [iss_doc("r-ascend-llm", [("mixed", "mixed"), ("mixed-w", "mixed")])]
    made = hpa("r-ascend-llm-0-mixed-w-scaler", INSTANCE_SET, "r-ascend-llm-0-mixed-w", "mindcluster.huawei.com/v1",
               labels={"infer.huawei.com/scaling-owned-by": "r-ascend-llm-0-mixed-w"})
    (p,) = foreign_scalers(docs, [made])
    assert p.message.startswith("HorizontalPodAutoscaler r-ascend-llm-0-mixed-w-scaler (made by the Infer Operator "
                                "from a role's scalingPolicy) scales InstanceSet r-ascend-llm-0-mixed-w (min 1, max 4) "
                                "of instance mixed: its role is an instance's master or its other servers")
    assert p.hint.startswith("remove the scalingPolicy deployctl did not render from the InferServiceSet's role")


def test_a_scaler_name_from_the_cluster_is_printed_clean():
    docs = [lws_doc("r-ascend-llm-mixed", "mixed")]
    (p,) = foreign_scalers(docs, [hpa("evil\x1b[31mred", "LeaderWorkerSet", "r-ascend-llm-mixed", LWS_API)])
    assert "\x1b" not in p.message and "\x1b" not in p.path


def test_rescaled_lists_leaderworkersets_whose_live_replicas_are_not_the_rendered_ones():
    docs = [lws_doc("a", "a"), lws_doc("b", "b"), lws_doc("c", "c"), lws_doc("gone", "g"),
            {"kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"replicas": 1}}]
    live = [lws_doc("a", "a", replicas=2), lws_doc("b", "b"), {**lws_doc("c", "c"), "spec": {"replicas": True}},
            {"kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"replicas": 3}}]
    (r,) = rescaled(docs, live)
    assert (r.kind, r.name, r.live, r.rendered) == ("LeaderWorkerSet", "a", 2, 1)
    assert r.line().startswith("LeaderWorkerSet a was scaled to 2 outside deployctl (kubectl scale or an "
                               "autoscaler): back to 1, each group is one instance bound to its servers")


# ------------------------------------------------------------------------------------------ the backend's use

class _Api:
    def __init__(self, live: list[dict], hpas: list[dict] | None):
        self.live, self.hpas, self.scaled = live, hpas, []

    def release_objects(self):
        return self.live

    def horizontal_pod_autoscalers(self):
        return self.hpas

    def scale_custom(self, group, version, plural, name, replicas):
        self.scaled.append((group, version, plural, name, replicas))
        return True


def _backend(tmp_path: Path, api: _Api, docs: list[dict]):
    from deployctl.backends.k8s.backend import K8sBackend, K8sOptions
    from deployctl.backends.k8s.render import Release
    from deployctl.io.kube import KubeTarget
    from deployctl.io.records import RunRecord
    from recording import RecordingReporter

    release = Release(values=None, values_text="x: 1\n", manifests=yaml.safe_dump_all(docs))
    opts = K8sOptions(yes=True, run_root=tmp_path / ".deployctl")
    return K8sBackend("up", KubeTarget("/dev/null", None, "ns", "r"), api, None,
                      RunRecord.create(tmp_path / ".deployctl", "up-k8s"), opts, RecordingReporter(),
                      release=lambda: release)


def test_the_backend_names_a_scaler_and_says_when_it_could_not_look(tmp_path):
    docs = [lws_doc("r-ascend-llm-mixed", "mixed")]
    b = _backend(tmp_path, _Api([], [hpa("h", "LeaderWorkerSet", "r-ascend-llm-mixed", LWS_API)]), docs)
    assert [p.path for p in b._scalers()] == ["HorizontalPodAutoscaler/h"]
    b = _backend(tmp_path, _Api([], None), docs)
    assert b._scalers() == []
    assert "HorizontalPodAutoscalers not listed" in b.reporter.text()


def test_the_backend_puts_a_rescaled_leaderworkerset_back_through_scale(tmp_path):
    docs = [lws_doc("r-ascend-llm-mixed", "mixed"), lws_doc("r-ascend-llm-m1", "m1")]
    api = _Api([lws_doc("r-ascend-llm-mixed", "mixed", replicas=3), lws_doc("r-ascend-llm-m1", "m1")], [])
    b = _backend(tmp_path, api, docs)
    b._unscale(docs)
    assert api.scaled == [("leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "r-ascend-llm-mixed", 1)]
    assert "LeaderWorkerSet r-ascend-llm-mixed was scaled to 3 outside deployctl" in b.reporter.text()
    api = _Api([], [])
    _backend(tmp_path, api, []).\
        _unscale([{"kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"replicas": 1}}])
    assert api.scaled == []        # no LeaderWorkerSet rendered: nothing read, nothing scaled


def test_a_leaderworkerset_that_cannot_be_scaled_back_is_reported_and_the_run_goes_on(tmp_path):
    from deployctl.core.errors import ExecutionError

    class Refusing(_Api):
        def scale_custom(self, *args):
            raise ExecutionError("Kubernetes API: scale leaderworkersets r-ascend-llm-mixed failed: 403 Forbidden")

    docs = [lws_doc("r-ascend-llm-mixed", "mixed")]
    b = _backend(tmp_path, Refusing([lws_doc("r-ascend-llm-mixed", "mixed", replicas=2)], []), docs)
    b._unscale(docs)
    assert "! LeaderWorkerSet r-ascend-llm-mixed could not be scaled back: Kubernetes API: scale" in b.reporter.text()
