"""Gang scheduling in the chart (kubernetes.gang): one PodGroup per instance holding every pod of the instance.

The expected minimum is the instance's servers as the plan lists them (plan.json), never read from the chart. Volcano's
PodGroup CRD (volcano-sh/volcano v1.15.1, tests/fixtures/crds/) is installed into the real API server, which must
accept every object; the Kubernetes 1.36 PodGroup (scheduling.k8s.io/v1alpha2) is served by the test control plane
with its alpha gates on (scripts/k8s-test-cluster), and its real kube-scheduler keeps an instance that cannot be
placed whole unbound."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import yaml

from conftest import EXAMPLES, ROOT, run_cli

# the module starts a control plane of its own (gang_cluster): e2e
pytestmark = pytest.mark.e2e

VOLCANO_CRD = ROOT / "tests" / "fixtures" / "crds" / "volcano-v1.15.1-podgroups.yaml"
EXAMPLE_STEMS = sorted(p.stem for p in EXAMPLES.glob("*.yaml"))
# one example per engine (MindIE master + worker StatefulSets, vLLM-Ascend and SGLang one per server)
PER_ENGINE = ("a3-pd-2p1d", "vllm-a3-pd-roles-qwen3", "sglang-a3-2p1d-deepseek-r1")


def with_kubernetes(stem: str, tmp: Path, block: dict) -> Path:
    """The example with a kubernetes block of ours (the examples have none), written beside it in tmp."""
    doc = yaml.safe_load((EXAMPLES / f"{stem}.yaml").read_text())
    doc["kubernetes"] = {**(doc.get("kubernetes") or {}), **block}
    for node in doc["nodes"]:                 # files the example names relative to itself
        if node.get("hccn_conf") and not Path(node["hccn_conf"]).is_absolute():
            node["hccn_conf"] = str(EXAMPLES / node["hccn_conf"])
    path = tmp / f"{stem}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def render(stem: str, tmp: Path, block: dict) -> Path:
    out = tmp / f"out-{stem}"
    res = run_cli("render", "--target", "helm", "-i", str(with_kubernetes(stem, tmp, block)), "-o", str(out))
    assert res.returncode == 0, res.stderr
    return out


def docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def instance_servers(out: Path) -> dict[str, int]:
    """instance -> servers, from the plan (the inventory's layout), not from the chart."""
    plan = json.loads((out / "plan.json").read_text())
    return {i["name"]: len(i["nodes"]) for i in plan["instances"]}


def engine_pod_templates(manifests: list[dict]) -> list[tuple[str, dict]]:
    return [(d["spec"]["template"]["metadata"]["labels"]["deployctl.io/instance"], d["spec"]["template"])
            for d in manifests if d["kind"] == "StatefulSet"
            and d["metadata"]["labels"].get("app.kubernetes.io/component") == "engine"]


@pytest.mark.slow
@pytest.mark.parametrize("stem", EXAMPLE_STEMS)
def test_volcano_a_podgroup_per_instance_holding_its_pods(stem, tmp_path):
    out = render(stem, tmp_path, {"gang": "volcano", "queue": "llm", "priority_class": "llm-serving"})
    manifests = docs(out / "manifests.yaml")
    groups = {d["metadata"]["name"]: d for d in manifests if d["kind"] == "PodGroup"}
    servers = instance_servers(out)
    by_instance = {g["metadata"]["labels"]["deployctl.io/instance"]: g for g in groups.values()}
    assert set(by_instance) == set(servers)
    for inst, group in by_instance.items():
        assert group["apiVersion"] == "scheduling.volcano.sh/v1beta1"
        assert group["spec"] == {"minMember": servers[inst], "queue": "llm", "priorityClassName": "llm-serving"}
    templates = engine_pod_templates(manifests)
    pods = {}
    for inst, template in templates:
        name = template["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
        assert name == by_instance[inst]["metadata"]["name"]
        assert template["spec"]["schedulerName"] == "volcano"
        assert template["spec"]["priorityClassName"] == "llm-serving"
        pods[inst] = pods.get(inst, 0) + next(d for d in manifests if d["kind"] == "StatefulSet"
                                              and d["spec"]["template"] is template)["spec"]["replicas"]
    assert pods == servers            # the group's pods are exactly the instance's


@pytest.mark.parametrize("stem", PER_ENGINE)
def test_kubernetes_podgroup_and_pods_naming_it(stem, tmp_path):
    out = render(stem, tmp_path, {"gang": "kubernetes"})
    manifests = docs(out / "manifests.yaml")
    servers = instance_servers(out)
    groups = {d["metadata"]["labels"]["deployctl.io/instance"]: d for d in manifests if d["kind"] == "PodGroup"}
    assert {i: g["spec"] for i, g in groups.items()} == \
        {i: {"schedulingPolicy": {"gang": {"minCount": n}}} for i, n in servers.items()}
    assert all(g["apiVersion"] == "scheduling.k8s.io/v1alpha2" for g in groups.values())
    for inst, template in engine_pod_templates(manifests):
        assert template["spec"]["schedulingGroup"] == {"podGroupName": groups[inst]["metadata"]["name"]}
        assert "schedulerName" not in template["spec"]
        assert "scheduling.k8s.io/group-name" not in template["metadata"]["annotations"]


def test_off_and_auto_offline_render_no_podgroup_and_mindcluster_keys_are_opt_in(tmp_path):
    for block in ({}, {"gang": "off", "scheduler_name": "volcano"}):
        manifests = docs(render("vllm-a3-pd-roles-qwen3", tmp_path, block) / "manifests.yaml")
        assert not [d for d in manifests if d["kind"] == "PodGroup"]
        for _, template in engine_pod_templates(manifests):
            assert "fault-scheduling" not in template["metadata"]["labels"]
            assert "huawei.com/schedule_policy" not in template["metadata"]["annotations"]
    # auto without a cluster: volcano when the pods' scheduler is volcano (what a MindCluster user sets)
    out = render("vllm-a3-pd-roles-qwen3", tmp_path, {"scheduler_name": "volcano", "mindcluster": {
        "fault_scheduling": "grace", "fault_retry_times": 10, "schedule_policy": "chip2-node16-sp"}})
    manifests = docs(out / "manifests.yaml")
    assert len([d for d in manifests if d["kind"] == "PodGroup"]) == len(instance_servers(out))
    for _, template in engine_pod_templates(manifests):
        assert template["metadata"]["labels"]["fault-scheduling"] == "grace"
        assert template["metadata"]["labels"]["fault-retry-times"] == "10"
        assert template["metadata"]["annotations"]["huawei.com/schedule_policy"] == "chip2-node16-sp"


@pytest.mark.parametrize("bad, key", [({"gang": "slurm"}, "kubernetes.gang"),
                                      ({"mindcluster": {"fault_scheduling": "soon"}}, "fault_scheduling"),
                                      ({"queue": "Big_Queue"}, "kubernetes.queue")])
def test_bad_gang_settings_name_their_key(bad, key, tmp_path):
    res = run_cli("validate", "-i", str(with_kubernetes("a3-pd-2p1d", tmp_path, bad)))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert key in res.stdout + res.stderr


# ------------------------------------------------------------------------------------------ the real API server

@pytest.fixture(scope="module")
def gang_cluster():
    """A control plane of its own with Kubernetes 1.36's gang scheduling on (alpha gates: scripts/k8s-test-cluster
    up --gang-gates); the shared one runs without, as most clusters do."""
    import os
    import secrets

    from k8scluster import start_cluster

    cluster = start_cluster(watch_pid=os.getpid(), gang_gates=True)
    cluster.ns_suffix = secrets.token_hex(2)
    try:
        yield cluster
    finally:
        cluster.stop()

@pytest.fixture
def volcano_crd(k8s_cluster):
    """Volcano's PodGroup CRD for one test, removed after it: with it installed, `kubernetes.gang: auto` means
    Volcano for every later test of the shared control plane, whose pods no Volcano scheduler would place."""
    cluster = k8s_cluster
    crd = yaml.safe_load(VOLCANO_CRD.read_text())
    path = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd['metadata']['name']}"
    if cluster.get(path) is None:
        cluster.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    cluster.wait_for("the PodGroup CRD established", lambda: any(
        c["type"] == "Established" and c["status"] == "True"
        for c in ((cluster.get(path) or {}).get("status") or {}).get("conditions") or []))
    yield
    cluster.delete(path)
    cluster.wait_for("the PodGroup CRD gone", lambda: cluster.get(path) is None, timeout=120)


def accepted_as_rendered(cluster, ns: str, gang: str, tmp_path: Path) -> None:
    """helm install of each engine's example with PodGroups: accepted, and read back equal to the rendered ones
    (no field pruned by the CRD's schema or the built-in API's validation)."""
    from deployctl.backends.k8s.backend import manifest_docs

    k8s_ns = ns
    cluster.create_namespace(k8s_ns)
    for stem in PER_ENGINE:
        out = render(stem, tmp_path, {"gang": gang})
        release = json.loads((out / "plan.json").read_text())["inventory"]["cluster"]["name"]
        res = cluster.helm_run("install", release, out / "chart", "--namespace", k8s_ns, "--values",
                               out / "values.yaml", "--timeout", "4m")
        assert res.returncode == 0, res.stdout + res.stderr
        group, version = ("scheduling.volcano.sh", "v1beta1") if gang == "volcano" else \
            ("scheduling.k8s.io", "v1alpha2")
        rendered = [d for d in manifest_docs((out / "manifests.yaml").read_text()) if d["kind"] == "PodGroup"]
        assert rendered
        for d in rendered:
            live = cluster.get(f"/apis/{group}/{version}/namespaces/{k8s_ns}/podgroups/{d['metadata']['name']}")
            assert live is not None, d["metadata"]["name"]
            # every rendered field read back as rendered (the server adds its defaults: Volcano's queue,
            # the 1.36 PodGroup's disruptionMode)
            assert {k: live["spec"].get(k) for k in d["spec"]} == d["spec"]
            assert live["metadata"]["labels"]["deployctl.io/instance"] == d["metadata"]["labels"]["deployctl.io/instance"]
        cluster.helm_run("uninstall", release, "--namespace", k8s_ns, "--wait")


@pytest.mark.e2e
def test_the_api_server_accepts_volcano_podgroups_as_rendered(k8s_cluster, k8s_ns, volcano_crd, tmp_path):
    accepted_as_rendered(k8s_cluster, k8s_ns, "volcano", tmp_path)


@pytest.mark.e2e
def test_the_api_server_accepts_kubernetes_podgroups_as_rendered(gang_cluster, tmp_path):
    accepted_as_rendered(gang_cluster, f"gang-accept-{gang_cluster.ns_suffix}", "kubernetes", tmp_path)


@pytest.mark.e2e
def test_an_instance_that_cannot_be_placed_whole_binds_no_pod(gang_cluster, tmp_path):
    """The real kube-scheduler (1.36, GangScheduling) with the chart's Kubernetes PodGroups: a two-server instance
    whose second server is missing stays wholly unbound; without the gang its first pod would be bound alone (the
    control half of the test); once the second server exists, both are bound."""
    cluster = gang_cluster
    stem = "a2-2x8-tp-pp"                     # one MindIE instance over node1 + node2, pods pinned to them
    suffix = cluster.ns_suffix
    k8s_ns = f"gang-whole-{suffix}"
    cluster.create_namespace(k8s_ns)
    inventory = with_kubernetes(stem, tmp_path, {"gang": "kubernetes"})
    nodes = cluster.nodes_from_inventory(inventory)
    for n in nodes:                           # node names of their own: other tests' nodes stay out of it
        n["name"] += f"-{suffix}"
    doc = yaml.safe_load(inventory.read_text())
    for n in doc["nodes"]:
        n["k8s_node"] = f"{n['name']}-{suffix}"
    inventory.write_text(yaml.safe_dump(doc, sort_keys=False))
    first, second = nodes
    cluster.add_nodes([first])

    def bound(selector: str) -> dict[str, str]:
        return {p["metadata"]["name"]: p["spec"].get("nodeName", "") for p in cluster.pods(k8s_ns, selector)}

    def install(name: str, inv: Path) -> None:
        out = tmp_path / f"out-{name}"
        res = run_cli("render", "--target", "helm", "-i", str(inv), "-o", str(out))
        assert res.returncode == 0, res.stderr
        res = cluster.helm_run("install", name, out / "chart", "--namespace", k8s_ns, "--values",
                               out / "values.yaml", "--set", "fullnameOverride=" + name, "--timeout", "4m")
        assert res.returncode == 0, res.stdout + res.stderr

    try:
        # control: the same instance without a gang gets its first pod bound alone
        doc_off = dict(doc, kubernetes={**doc["kubernetes"], "gang": "off"})
        off = tmp_path / "off.yaml"
        off.write_text(yaml.safe_dump(doc_off, sort_keys=False))
        install("nogang", off)
        cluster.wait_for("the first pod bound without a gang",
                         lambda: sorted(bool(v) for v in bound("app.kubernetes.io/instance=nogang").values())
                         == [False, True], timeout=120)
        cluster.helm_run("uninstall", "nogang", "--namespace", k8s_ns, "--wait")
        cluster.wait_for("the control's pods gone", lambda: not bound("app.kubernetes.io/instance=nogang"),
                         timeout=120)

        install("gang", inventory)
        cluster.wait_for("both pods seen", lambda: len(bound("app.kubernetes.io/instance=gang")) == 2, timeout=120)
        deadline = time.monotonic() + 15      # the scheduler has had its chances: none of the two may be bound
        while time.monotonic() < deadline:
            assert not any(bound("app.kubernetes.io/instance=gang").values())
            time.sleep(1)
        cluster.add_nodes([second])
        cluster.wait_for("both pods bound together", lambda: all(bound("app.kubernetes.io/instance=gang").values())
                         and len(bound("app.kubernetes.io/instance=gang")) == 2, timeout=180)
        # `status` names the instance's gang as the API server holds it
        doc["kubernetes"].update(namespace=k8s_ns, kubeconfig=str(cluster.kubeconfig), release="gang")
        inventory.write_text(yaml.safe_dump(doc, sort_keys=False))
        res = run_cli("status", "--target", "k8s", "-i", str(inventory), "--output", "json", cwd=tmp_path,
                      env={"HOME": str(tmp_path / "home"), **cluster.env()})
        gang = json.loads(res.stdout)["gang"]
        assert gang and gang[0].startswith("gang (kubernetes): instance mixed placed whole or not at all: "
                                           "PodGroup minimum 2 of its 2 pods"), gang
    finally:
        cluster.remove_nodes([n["name"] for n in nodes])


@pytest.mark.e2e
def test_up_with_gang_auto_places_the_instance_as_a_gang_and_a_rerun_changes_nothing(gang_cluster, tmp_path):
    """`up --target k8s` with kubernetes.gang left at auto on a cluster serving the 1.36 PodGroup: the instance's
    PodGroup is created with the release and read back by diff and the rerun (nothing to do), named by status,
    and gone after down."""
    from kube_e2e import READY, cli, inventory, servers

    cluster, stem = gang_cluster, "a2-2x8-tp-pp"
    ns = f"gang-up-{cluster.ns_suffix}"
    servers(cluster, stem)
    inv = inventory(tmp_path, stem, cluster, ns)
    groups = f"/apis/scheduling.k8s.io/v1alpha2/namespaces/{ns}/podgroups"
    try:
        res = cli(tmp_path, cluster, "up", "-t", "k8s", "-i", str(inv), "-y", "--ready-timeout", READY)
        assert res.returncode == 0, res.stdout + res.stderr
        (group,) = cluster.get(groups)["items"]
        assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}
        pods = cluster.pods(ns, "app.kubernetes.io/component=engine")
        assert len(pods) == 2 and all(p["spec"]["schedulingGroup"]["podGroupName"] == group["metadata"]["name"]
                                      and p["spec"].get("nodeName") for p in pods)
        res = cli(tmp_path, cluster, "diff", "-t", "k8s", "-i", str(inv), "--output", "json")
        assert res.returncode == 0, res.stderr
        changes = {(o["kind"], o["change"]) for o in json.loads(res.stdout)["objects"]}
        assert ("PodGroup", "unchanged") in changes and {c for _, c in changes} == {"unchanged"}
        res = cli(tmp_path, cluster, "up", "-t", "k8s", "-i", str(inv), "-y")
        assert res.returncode == 0 and "nothing to do" in res.stdout, res.stdout + res.stderr
        res = cli(tmp_path, cluster, "status", "-t", "k8s", "-i", str(inv), "--output", "json")
        assert json.loads(res.stdout)["gang"][0].startswith("gang (kubernetes): instance mixed")
        res = cli(tmp_path, cluster, "down", "-t", "k8s", "-i", str(inv))
        assert res.returncode == 0, res.stdout + res.stderr
        assert cluster.get(groups)["items"] == []
    finally:
        cluster.remove_nodes([n["name"] for n in cluster.nodes_from_inventory(EXAMPLES / f"{stem}.yaml")])
