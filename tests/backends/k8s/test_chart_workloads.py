"""kubernetes.workload lws and infer-operator (`--target lws|infer-operator`): for every example inventory the chart
renders one LeaderWorkerSet per instance, or one InferServiceSet whose roles are the instances' master and worker
servers, with the same files and env as the StatefulSet chart (hence as bare metal) and the same pods, and a worker
of an engine whose servers each run their own files starts the server of the node it runs on
(files/pick-server.sh, run here by bash over a tree laid out as the pod's mounts).

Field names and defaults: kubernetes-sigs/lws@v0.9.0 (f056f611) api/leaderworkerset/v1/leaderworkerset_types.go
(size includes the leader, restartPolicy RecreateGroupOnPodRestart, rolloutStrategy RollingUpdate with
maxUnavailable/maxSurge); the API server's acceptance with the upstream CRD and the real controller are in
test_up_k8s_lws.py. InferServiceSet: Ascend/mind-cluster@22bb3d98 (v26.1.0)
component/infer-operator/pkg/api/v1/instanceset_types.go (roles[].replicas = workloads, roles[].spec = the workload's
spec, spec.replicas its pods); the API server and the operator's behaviour: test_up_k8s_infer_operator.py.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import EXAMPLES, ROOT, run_cli

CASES = sorted(p.stem for p in EXAMPLES.glob("*.yaml"))
PICK = ROOT / "deployctl" / "charts" / "ascend-llm" / "files" / "pick-server.sh"


def _docs(path: Path) -> list[dict]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict[str, dict]:
    """Each example rendered with --target k8s (StatefulSets), lws and infer-operator, and its plan."""
    import json

    out = {}
    for stem in CASES:
        base = tmp_path_factory.mktemp("workloads") / stem
        out[stem] = {}
        for target in ("k8s", "lws", "infer-operator"):
            res = run_cli("render", "--target", target, "-i", str(EXAMPLES / f"{stem}.yaml"), "-o", str(base / target))
            assert res.returncode == 0, res.stderr
            out[stem][target] = _docs(base / target / "manifests.yaml")
        out[stem]["plan"] = json.loads((base / "lws" / "plan.json").read_text())
    return out


@pytest.fixture(scope="module")
def both(rendered) -> dict[str, tuple[list[dict], list[dict], dict]]:
    return {stem: (r["k8s"], r["lws"], r["plan"]) for stem, r in rendered.items()}


def _unhashed(template: dict) -> dict:
    """The pod template without the hash of itself the LWS and InferServiceSet charts add (checked: 16 hex digits),
    which `up` compares with the pods the controllers make."""
    import copy

    out = copy.deepcopy(template)
    digest = out["metadata"]["annotations"].pop("deployctl.io/pod-template")
    assert len(digest) == 16 and all(c in "0123456789abcdef" for c in digest)
    return out


def _nodes_of(template: dict) -> list[str]:
    terms = (((template["spec"].get("affinity") or {}).get("nodeAffinity") or {})
             .get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms") or []
    return [v for t in terms for e in t["matchExpressions"] for v in e["values"]]


@pytest.mark.parametrize("stem", CASES)
def test_one_leaderworkerset_per_instance_sized_to_its_servers(stem, both):
    sts, lws, plan = both[stem]
    sets = {d["metadata"]["labels"]["deployctl.io/instance"]: d for d in lws if d["kind"] == "LeaderWorkerSet"}
    assert not [d for d in lws if d["kind"] == "StatefulSet"]
    assert set(sets) == {i["name"] for i in plan["instances"]}
    for inst in plan["instances"]:
        spec = sets[inst["name"]]["spec"]
        lwt = spec["leaderWorkerTemplate"]
        assert spec["replicas"] == 1
        assert lwt["size"] == len(inst["nodes"])
        assert lwt["restartPolicy"] == "RecreateGroupOnPodRestart"
        assert spec["rolloutStrategy"] == {"type": "RollingUpdate",
                                           "rollingUpdateConfiguration": {"maxUnavailable": 1, "maxSurge": 0}}
        leader = lwt.get("leaderTemplate") or lwt["workerTemplate"]
        assert _nodes_of(leader) == [inst["master"]]          # the master's IP is what the other servers name
        assert leader["metadata"]["labels"]["deployctl.io/rank-role"] == "master"
        if len(inst["nodes"]) > 1:
            assert sorted(_nodes_of(lwt["workerTemplate"])) == sorted(n for n in inst["nodes"] if n != inst["master"])
            assert lwt["workerTemplate"]["metadata"]["labels"]["deployctl.io/rank-role"] == "worker"


@pytest.mark.parametrize("target", ["lws", "infer-operator"])
@pytest.mark.parametrize("stem", CASES)
def test_the_same_files_env_and_other_objects_as_the_statefulset_chart(stem, target, rendered):
    """Every ConfigMap of the StatefulSet chart (the bare-metal files and env byte for byte: test_chart.py) is in
    the LWS and InferServiceSet charts unchanged; the per-instance governing Services are the controller's; the
    rest is equal."""
    sts = rendered[stem]["k8s"]
    key = lambda d: (d["kind"], d["metadata"]["name"])  # noqa: E731
    have = {key(d): d for d in rendered[stem][target]}
    for d in sts:
        if d["kind"] == "StatefulSet":
            continue
        if d["kind"] == "Service" and d["spec"].get("clusterIP") == "None":
            assert key(d) not in have              # made by the LWS controller, of the same name
            continue
        assert have.get(key(d)) == d, key(d)


@pytest.mark.parametrize("stem", CASES)
def test_pods_are_the_statefulset_pods(stem, both):
    """The leader's pod template is the master StatefulSet's; a MindIE worker template is the worker StatefulSet's;
    a per-server engine's worker differs only in how it finds its files (every worker's ConfigMaps, pick-server.sh)."""
    sts, lws, plan = both[stem]
    sets = {d["metadata"]["name"]: d for d in sts if d["kind"] == "StatefulSet"}
    for d in (d for d in lws if d["kind"] == "LeaderWorkerSet"):
        name, lwt = d["metadata"]["name"], d["spec"]["leaderWorkerTemplate"]
        master = sets.get(f"{name}-master") or sets[f"{name}-0"]
        assert _unhashed(lwt.get("leaderTemplate") or lwt["workerTemplate"]) == master["spec"]["template"]
        if lwt["size"] == 1:
            continue
        worker = lwt["workerTemplate"]
        if f"{name}-worker" in sets:                       # MindIE: one template for every worker already
            assert _unhashed(worker) == sets[f"{name}-worker"]["spec"]["template"]
            continue
        mounts = {m["name"]: m["mountPath"] for m in worker["spec"]["containers"][0]["volumeMounts"]}
        volumes = {v["name"]: v.get("configMap", {}).get("name") for v in worker["spec"]["volumes"]}
        for k in range(1, lwt["size"]):
            assert mounts[f"files-{k}"] == f"/opt/deployctl/servers/{k}/files"
            assert volumes[f"files-{k}"] == f"{name}-{k}-files" and volumes[f"env-{k}"] == f"{name}-{k}-env"
        assert worker["spec"]["containers"][0]["command"][:2] == ["/bin/bash", "/opt/deployctl/pick-server.sh"]
        nodes = next(x for x in lws if x["kind"] == "ConfigMap" and x["metadata"]["name"] == f"{name}-nodes")
        inst = next(i for i in plan["instances"] if name.endswith(f"-{i['name']}"))
        assert nodes["data"] == {n: str(k) for k, n in enumerate(inst["nodes"]) if k > 0}


@pytest.mark.parametrize("stem", CASES)
def test_one_inferserviceset_whose_roles_are_the_statefulset_pods(stem, rendered):
    """A role per rank role of each instance (<instance>: the master, <instance>-w: the other servers), one
    workload of the master StatefulSet's pod count and pod template, or of the workers' (the LWS worker
    template: MindIE's worker StatefulSet's, a per-server engine's picking its node's files)."""
    plan, sts, lws, iss = (rendered[stem][k] for k in ("plan", "k8s", "lws", "infer-operator"))
    sets = {d["metadata"]["name"]: d for d in sts if d["kind"] == "StatefulSet"}
    groups = {d["metadata"]["labels"]["deployctl.io/instance"]: d["spec"]["leaderWorkerTemplate"]
              for d in lws if d["kind"] == "LeaderWorkerSet"}
    [doc] = [d for d in iss if d["kind"] == "InferServiceSet"]
    assert not [d for d in iss if d["kind"] in ("StatefulSet", "LeaderWorkerSet")]
    assert doc["apiVersion"] == "mindcluster.huawei.com/v1" and doc["spec"]["replicas"] == 1
    roles = {r["name"]: r for r in doc["spec"]["template"]["roles"]}
    want = {}
    for inst in plan["instances"]:
        want[inst["name"]] = 1
        if len(inst["nodes"]) > 1:
            want[f"{inst['name']}-w"] = len(inst["nodes"]) - 1
    assert {n: r["spec"]["replicas"] for n, r in roles.items()} == want
    for name, role in roles.items():
        assert role["replicas"] == 1 and role["workload"] == {"apiVersion": "apps/v1", "kind": "StatefulSet"}
        assert role["spec"]["podManagementPolicy"] == "Parallel"
        labels = role["spec"]["template"]["metadata"]["labels"]
        assert role["spec"]["selector"]["matchLabels"].items() <= labels.items()
        inst = labels["deployctl.io/instance"]
        lwt = groups[inst]
        # the role's pod template carries a hash of itself: `up` replaces the operator's StatefulSets when it changes
        template = _unhashed(role["spec"]["template"])
        if name == inst:
            master = next(d for n, d in sets.items() if n.endswith((f"-{inst}-master", f"-{inst}-0")))
            assert template == master["spec"]["template"]
        else:
            assert template == _unhashed(lwt["workerTemplate"])
        assert "infer.huawei.com/gang-schedule" not in role["metadata"]["labels"]    # one PodGroup an instance


@pytest.mark.parametrize("stem", CASES)
def test_no_scaler_is_rendered_and_every_instance_is_bound_to_its_servers(stem, rendered):
    """No HorizontalPodAutoscaler, no role `scalingPolicy` (spec.template.roles[].scalingPolicy, Ascend/mind-cluster
    @22bb3d98 component/infer-operator/pkg/api/v1/instanceset_types.go L45-60) and one group per LeaderWorkerSet:
    what a scaler would copy is bound to its servers (docs/kubernetes.md "Scaling: who owns what"): every group's
    pod templates are pinned to its instance's nodes."""
    for target in ("k8s", "lws", "infer-operator"):
        docs = rendered[stem][target]
        assert not [d for d in docs if d["kind"] == "HorizontalPodAutoscaler"]
        for doc in docs:
            if doc["kind"] == "LeaderWorkerSet":
                assert doc["spec"]["replicas"] == 1
            if doc["kind"] == "InferServiceSet":
                assert all("scalingPolicy" not in r and r["replicas"] == 1 for r in doc["spec"]["template"]["roles"])
    plan = rendered[stem]["plan"]
    for doc in rendered[stem]["lws"]:
        if doc["kind"] != "LeaderWorkerSet":
            continue
        inst = next(i for i in plan["instances"] if i["name"] == doc["metadata"]["labels"]["deployctl.io/instance"])
        lwt = doc["spec"]["leaderWorkerTemplate"]
        for template in (lwt.get("leaderTemplate"), lwt["workerTemplate"]):
            if template is None:
                continue
            terms = template["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
            pinned = terms["nodeSelectorTerms"][0]["matchExpressions"][0]["values"]
            assert pinned and set(pinned) <= set(inst["nodes"])


def _tree(root: Path, servers: dict[str, dict], nodes: dict[str, str]) -> None:
    """The pod's mounts of pick-server.sh: servers/<k>/{files,env} and servers/nodes, as the kubelet lays out a
    ConfigMap volume (one file per key, the value's bytes)."""
    for k, env in servers.items():
        (root / k / "files").mkdir(parents=True)
        (root / k / "files" / "serve-0.args").write_text(f"--server\n{k}\n")
        (root / k / "env").mkdir()
        for name, value in env.items():
            (root / k / "env" / name).write_text(value)
    (root / "nodes").mkdir()
    for node, k in nodes.items():
        (root / "nodes" / node).write_text(k)


def _pick(root: Path, node: str | None, worker_index: str | None = None) -> subprocess.CompletedProcess:
    env = {"PATH": os.environ["PATH"], "DEPLOYCTL_SERVERS": str(root)}
    if node is not None:
        env["NODE_NAME"] = node
    if worker_index is not None:
        env["LWS_WORKER_INDEX"] = worker_index
    launcher = 'printf "%s|%s|%s|%s" "$DEPLOYCTL_WORK" "$HCCL_IF_IP" "$ODD" "$(cat "$DEPLOYCTL_WORK"/serve-0.args)"'
    return subprocess.run(["bash", str(PICK), launcher], env=env, capture_output=True, text=True, timeout=30)


def test_a_worker_runs_the_server_of_its_node_with_its_env_verbatim(tmp_path):
    odd = "a b\t$(touch PWNED) `id` 'q' \"d\"\n\n"            # values are exported as they are, never run
    _tree(tmp_path, {"1": {"HCCL_IF_IP": "10.0.0.2", "ODD": odd}, "2": {"HCCL_IF_IP": "10.0.0.3", "ODD": "x"}},
          {"node2": "1", "node3": "2"})
    r = _pick(tmp_path, "node3", worker_index="1")          # the node decides, not the worker index
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"{tmp_path}/2/files|10.0.0.3|x|--server\n2"
    r = _pick(tmp_path, "node2", worker_index="2")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"{tmp_path}/1/files|10.0.0.2|{odd}|--server\n1"
    assert not (tmp_path / "PWNED").exists() and not Path("PWNED").exists()


def test_without_nodes_the_worker_index_picks_and_a_stranger_node_is_refused(tmp_path):
    _tree(tmp_path, {"1": {"HCCL_IF_IP": "10.0.0.2"}}, {})
    r = _pick(tmp_path, "anywhere", worker_index="1")
    assert r.returncode == 0 and r.stdout.startswith(f"{tmp_path}/1/files|10.0.0.2|"), r.stderr
    r = _pick(tmp_path, "anywhere", worker_index="7")       # no such server
    assert r.returncode == 2 and "no files for server 7" in r.stderr
    r = _pick(tmp_path, "anywhere")
    assert r.returncode == 2 and "runs no server of this instance" in r.stderr
    r = _pick(tmp_path, "anywhere", worker_index="../1")
    assert r.returncode == 2


@pytest.mark.parametrize("target", ["lws", "infer-operator"])
def test_gang_scheduling_holds_every_pod_of_an_instance_in_its_podgroup(target, tmp_path):
    """kubernetes.gang volcano with the new workloads: one PodGroup per instance whose minMember is the instance's
    servers as the plan lists them, and every pod template of the instance (leader and workers) names it."""
    import json

    for stem in ("a2-2x8-tp-pp", "vllm-a3-2p1d-qwen3", "sglang-a3-2p1d-deepseek-r1"):
        doc = yaml.safe_load((EXAMPLES / f"{stem}.yaml").read_text())
        doc["kubernetes"] = {"gang": "volcano"}
        for node in doc["nodes"]:
            if node.get("hccn_conf"):
                node["hccn_conf"] = str(EXAMPLES / node["hccn_conf"])
        inv = tmp_path / f"{stem}.yaml"
        inv.write_text(yaml.safe_dump(doc, sort_keys=False))
        out = tmp_path / f"{target}-{stem}"
        res = run_cli("render", "--target", target, "-i", str(inv), "-o", str(out))
        assert res.returncode == 0, res.stderr
        plan = json.loads((out / "plan.json").read_text())
        docs = _docs(out / "manifests.yaml")
        groups = {d["metadata"]["labels"]["deployctl.io/instance"]: d for d in docs if d["kind"] == "PodGroup"}
        assert {i: g["spec"]["minMember"] for i, g in groups.items()} == {
            i["name"]: len(i["nodes"]) for i in plan["instances"]}
        templates = []
        for d in docs:
            if d["kind"] == "LeaderWorkerSet":
                lwt = d["spec"]["leaderWorkerTemplate"]
                templates += [lwt[k] for k in ("leaderTemplate", "workerTemplate") if k in lwt]
            elif d["kind"] == "InferServiceSet":
                templates += [r["spec"]["template"] for r in d["spec"]["template"]["roles"]]
        assert templates
        for t in templates:
            inst = t["metadata"]["labels"]["deployctl.io/instance"]
            assert t["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == groups[inst]["metadata"]["name"]
            assert t["spec"]["schedulerName"] == "volcano"
