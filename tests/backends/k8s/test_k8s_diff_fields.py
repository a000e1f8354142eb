"""diff --target k8s per field: every differing field with its live and rendered value, ConfigMap files key
by key, secrets masked (pure)."""

from __future__ import annotations

import copy
import json

import yaml

from conftest import ROOT
from deployctl.backends.k8s.diff import MAX_DETAILS, ObjectChange, diff_objects, instance_actions

MANIFESTS = ROOT / "charts" / "examples" / "manifests-a2-2x8-tp-pp.yaml"
PREFIX = "ds32-2x8-ascend-llm"


def release() -> list[dict]:
    """The golden manifests helm renders for the 2 x 8 A2 example (test hooks aside)."""
    docs = [d for d in yaml.safe_load_all(MANIFESTS.read_text()) if d]
    return [d for d in docs if "helm.sh/hook" not in (d["metadata"].get("annotations") or {})]


def live(doc: dict) -> dict:
    """What the API server returns: the object plus defaults, metadata and status."""
    out = copy.deepcopy(doc)
    out["metadata"].update(namespace="mindie", uid="u-1", resourceVersion="7",
                           annotations={**(out["metadata"].get("annotations") or {}),
                                        "meta.helm.sh/release-name": "ds32-2x8"})
    if out["kind"] == "StatefulSet":
        pod = out["spec"]["template"]["spec"]
        for key, value in (("dnsPolicy", "ClusterFirst"), ("restartPolicy", "Always"),
                           ("schedulerName", "default-scheduler")):
            pod.setdefault(key, value)
        for c in pod["containers"]:
            c.update(terminationMessagePath="/dev/termination-log", terminationMessagePolicy="File")
            for p in c.get("ports") or []:
                p.setdefault("protocol", "TCP")
        out["status"] = {"replicas": 1, "observedGeneration": 1}
    return out


def by_name(docs: list[dict], name: str) -> dict:
    return next(d for d in docs if d["metadata"]["name"] == name)


def changed(rendered: list[dict], deployed: list[dict]) -> dict[str, ObjectChange]:
    return {c.name: c for c in diff_objects(rendered, [live(d) for d in deployed]) if c.change != "unchanged"}


def sts(name: str = "r-mixed-master", **container) -> dict:
    c = {"name": "mindie", "image": "mindie:2.1", **container}
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": name, "labels": {"deployctl.io/instance": "mixed"}},
            "spec": {"replicas": 1, "template": {"metadata": {"annotations": {"checksum/instance": "a"}},
                                                 "spec": {"containers": [c]}}}}


def cm(name: str, data: dict) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}


def test_the_rendered_release_against_its_live_copy_is_unchanged():
    docs = release()
    assert {c.change for c in diff_objects(docs, [live(d) for d in docs])} == {"unchanged"}
    assert all(c.details == () for c in diff_objects(docs, [live(d) for d in docs]))


def test_realistic_release_change_names_every_field_with_live_and_rendered_values():
    old = release()
    new = copy.deepcopy(old)
    image = "swr.cn-south-1.myhuaweicloud.com/ascendhub/mindie:2.2.RC1-800I-A2-py311-openeuler24.03-lts"
    for d in new:
        if d["kind"] == "StatefulSet":
            d["spec"]["template"]["spec"]["containers"][0]["image"] = image.replace("RC1", "RC2")
    files = by_name(new, f"{PREFIX}-mixed-files")["data"]
    cfg = json.loads(files["config.json"])
    assert cfg["BackendConfig"]["ScheduleConfig"]["maxBatchSize"] == 32
    cfg["BackendConfig"]["ScheduleConfig"]["maxBatchSize"] = 64
    cfg["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]["tp"] = 16
    files["config.json"] = json.dumps(cfg, indent=4)
    env = by_name(new, f"{PREFIX}-mixed-env")["data"]
    assert env["HCCL_BUFFSIZE"] == "120" and env["OMP_NUM_THREADS"] == "1"
    env["HCCL_BUFFSIZE"] = "1050"
    del env["OMP_NUM_THREADS"]
    env["HF_TOKEN"] = "hf_secret"
    boot = by_name(new, f"{PREFIX}-boot")["data"]
    assert "\nset -eo pipefail\n" in boot["boot.sh"]
    boot["boot.sh"] = boot["boot.sh"].replace("\nset -eo pipefail\n", "\nset -euo pipefail\n", 1)

    changes = changed(new, old)
    assert set(changes) == {f"{PREFIX}-boot", f"{PREFIX}-mixed-files", f"{PREFIX}-mixed-env",
                            f"{PREFIX}-mixed-master", f"{PREFIX}-mixed-worker"}
    assert changes[f"{PREFIX}-mixed-files"].fields == ("data.config.json",)
    assert changes[f"{PREFIX}-mixed-files"].lines() == [
        f"ConfigMap/{PREFIX}-mixed-files data.config.json › "
        "BackendConfig.ModelDeployConfig.ModelConfig[0].tp: 8 → 16",
        f"ConfigMap/{PREFIX}-mixed-files data.config.json › BackendConfig.ScheduleConfig.maxBatchSize: 32 → 64",
    ]
    assert changes[f"{PREFIX}-mixed-env"].fields == ("data.HCCL_BUFFSIZE", "data.HF_TOKEN", "data.OMP_NUM_THREADS")
    assert changes[f"{PREFIX}-mixed-env"].details == (
        "data.HCCL_BUFFSIZE: 120 → 1050",
        "data.HF_TOKEN: (absent) → ***",
        "data.OMP_NUM_THREADS: 1 → (removed)",
    )
    boot_line = boot["boot.sh"].splitlines().index("set -euo pipefail") + 1
    assert changes[f"{PREFIX}-boot"].details == (
        f"data.boot.sh › line {boot_line}: set -eo pipefail → set -euo pipefail",)
    assert changes[f"{PREFIX}-mixed-master"].lines() == [
        f"StatefulSet/{PREFIX}-mixed-master spec.template.spec.containers[0].image: {image} → "
        f"{image.replace('RC1', 'RC2')}"]
    assert changes[f"{PREFIX}-mixed-master"].fields == ("spec.template.spec.containers[0].image",)
    actions = instance_actions(new, [live(d) for d in old])
    assert [(a.action, a.reason) for a in actions] == [("restart", "pod spec changed")]


def test_a_data_key_gone_from_the_manifest_is_a_change_and_an_omitted_empty_map_is_not():
    old = [cm("r-env", {"A": "1", "B": "2"})]
    new = [cm("r-env", {"A": "1"})]
    [c] = diff_objects(new, [live(d) for d in old])
    assert (c.change, c.fields, c.details) == ("changed", ("data.B",), ("data.B: 2 → (removed)",))
    bare = live(cm("r-empty", {}))
    del bare["data"]                                   # the API server leaves an empty map out
    assert [c.change for c in diff_objects([cm("r-empty", {})], [bare])] == ["unchanged"]
    labelled = sts()
    labelled["metadata"]["annotations"] = {}
    assert [c.change for c in diff_objects([labelled], [live(sts())])] == ["unchanged"]


def test_config_json_data_formatted_differently_and_added_files():
    cfg = {"BackendConfig": {"ScheduleConfig": {"maxBatchSize": 32}}}
    old = [cm("r-files", {"config.json": json.dumps(cfg, indent=4)})]
    new = [cm("r-files", {"config.json": json.dumps(cfg), "ranktable.json": '{"status": "completed"}'})]
    [c] = diff_objects(new, [live(d) for d in old])
    assert c.fields == ("data.config.json", "data.ranktable.json")
    assert c.details == ("data.config.json: same content, formatted differently",
                         'data.ranktable.json › status: (absent) → "completed"')


def test_container_lists_compare_index_by_index_with_added_and_removed_items():
    old = sts(ports=[{"name": "http", "containerPort": 1025}, {"name": "metrics", "containerPort": 1027}])
    new = sts(ports=[{"name": "http", "containerPort": 1026}])
    new["spec"]["template"]["spec"]["containers"].append({"name": "sidecar", "image": "busybox:1.36"})
    [c] = diff_objects([new], [live(old)])
    base = "spec.template.spec.containers"
    assert c.details == (
        f"{base}[0].ports[0].containerPort: 1025 → 1026",
        f'{base}[0].ports[1]: {{"name":"metrics","containerPort":1027,"protocol":"TCP"}} → (removed)',
        f"{base}[1].name: (absent) → sidecar",
        f"{base}[1].image: (absent) → busybox:1.36",
    )
    assert c.fields == (f"{base}[0].ports[0].containerPort", f"{base}[0].ports[1]", f"{base}[1].name",
                        f"{base}[1].image")


def test_secret_env_values_are_masked_in_container_env_and_removed_items():
    old = sts(env=[{"name": "HF_TOKEN", "value": "hf_old"}, {"name": "LOG", "value": "info"},
                   {"name": "API_KEY", "value": "sk-old"}])
    new = sts(env=[{"name": "HF_TOKEN", "value": "hf_new"}, {"name": "LOG", "value": "debug"}])
    [c] = diff_objects([new], [live(old)])
    env = "spec.template.spec.containers[0].env"
    assert c.details == (
        f"{env}[0].value: *** → ***",
        f"{env}[1].value: info → debug",
        f'{env}[2]: {{"name":"API_KEY","value":"***"}} → (removed)',
    )
    assert "hf_" not in repr(c) and "sk-" not in repr(c)


def test_type_changes_and_quoted_strings():
    old = sts(args=["--port", "1025"], workingDir="/work")
    new = sts(args={"port": 1025}, workingDir=" /work")
    [c] = diff_objects([new], [live(old)])
    assert c.details == ('spec.template.spec.containers[0].args: ["--port","1025"] → {"port":1025}',
                         'spec.template.spec.containers[0].workingDir: /work → " /work"')


def test_details_are_capped_per_object_and_json_serializable():
    old = [cm("r-env", {f"V{i:03d}": "1" for i in range(MAX_DETAILS + 7)})]
    new = [cm("r-env", {f"V{i:03d}": "2" for i in range(MAX_DETAILS + 7)})]
    [c] = diff_objects(new, [live(d) for d in old])
    assert len(c.fields) == MAX_DETAILS + 7
    assert len(c.details) == MAX_DETAILS + 1 and c.details[-1] == "… 7 more changes"
    doc = json.loads(json.dumps(c.__dict__))
    assert doc["details"][0] == "data.V000: 1 → 2" and doc["change"] == "changed"
    assert ObjectChange("ConfigMap", "x", "new").details == ()
