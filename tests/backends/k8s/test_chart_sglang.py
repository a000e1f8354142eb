"""SGLang on Kubernetes: every pod runs exactly what bare metal runs on its node.

The oracle is the bare-metal tree (tests/golden/<example>/<node>/), read as a user would: server.args, its env
file (`docker run --env-file`), the `bash -c` script start.sh hands the container, the router's arguments and
script. The chart's manifests (charts/examples/manifests-<example>.yaml) must give each node's pod the same bytes,
the same env, the same script, pinned to that node, with one pod per node; probes only where SGLang serves HTTP
(node rank 0), and in a P/D split the router pinned to its node behind the client Service.
"""

from __future__ import annotations

import pytest
import yaml

from conftest import EXAMPLES, ROOT, run_cli
from test_chart_vllm import container_script, env_file, pinned_node, port_of

GOLDEN = ROOT / "charts" / "examples"
BARE_METAL = ROOT / "tests" / "golden"
STEMS = sorted(p.stem for p in EXAMPLES.glob("*.yaml") if "kind: sglang" in p.read_text())
PD = "sglang-a3-2p1d-deepseek-r1"


def manifests(stem: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((GOLDEN / f"manifests-{stem}.yaml").read_text()) if d]


def nodes(stem: str) -> list:
    return sorted(p for p in (BARE_METAL / stem).iterdir() if p.is_dir())


def test_there_are_sglang_examples_with_and_without_a_router():
    assert PD in STEMS and len(STEMS) >= 2
    assert [d for d in manifests(PD) if d["kind"] == "Deployment"]
    assert not any(d["kind"] == "Deployment" for s in STEMS if s != PD for d in manifests(s))


@pytest.mark.parametrize("stem", STEMS)
def test_each_node_pod_runs_the_bare_metal_launch(stem):
    docs = manifests(stem)
    maps = {d["metadata"]["name"]: d.get("data") or {} for d in docs if d["kind"] == "ConfigMap"}
    by_node = {}
    for sts in (d for d in docs if d["kind"] == "StatefulSet"):
        assert sts["spec"]["replicas"] == 1
        (node,) = pinned_node(sts["spec"]["template"]["spec"])
        assert node not in by_node, f"two StatefulSets on {node}"
        by_node[node] = sts
    assert sorted(by_node) == [d.name for d in nodes(stem)]        # one pod per node, every node
    for node_dir in nodes(stem):
        spec = by_node[node_dir.name]["spec"]["template"]["spec"]
        (container,) = spec["containers"]
        assert container["name"] == "sglang" and spec["hostNetwork"] is True
        files_map = next(v["configMap"]["name"] for v in spec["volumes"] if v["name"] == "files")
        assert maps[files_map] == {"server.args": (node_dir / "server.args").read_text()}, node_dir.name
        mount = next(m for m in container["volumeMounts"] if m["name"] == "files")
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env == {"DEPLOYCTL_WORK": mount["mountPath"]}
        env_map = container["envFrom"][0]["configMapRef"]["name"]
        assert maps[env_map] == env_file(node_dir / "env"), node_dir.name
        assert container["command"] == ["/bin/bash", "-c", container_script(node_dir / "start.sh")]
        bare_run = (node_dir / "start.sh").read_text()
        assert container["image"] == bare_run.split("\nIMAGE=", 1)[1].split("\n", 1)[0]
        # the weights and every host path of the bare-metal docker run, read-only
        mounts = {m["mountPath"] for m in container["volumeMounts"] if m.get("readOnly")}
        for line in bare_run.splitlines():
            if line.strip().startswith("-v ") and ":ro" in line and "$HERE" not in line:
                assert line.strip()[3:].strip("'\" \\").split(":")[1] in mounts, line


@pytest.mark.parametrize("stem", STEMS)
def test_probes_only_on_node_rank_0s_http_port(stem):
    """SGLang serves HTTP on node rank 0 only (--port in its server.args); the other ranks have no probe.
    Startup and readiness generate a token (/health); liveness, when on, must not (/v1/models)."""
    for sts in (d for d in manifests(stem) if d["kind"] == "StatefulSet"):
        (node,) = pinned_node(sts["spec"]["template"]["spec"])
        args = (BARE_METAL / stem / node / "server.args").read_text()
        (container,) = sts["spec"]["template"]["spec"]["containers"]
        rank0 = "--node-rank" not in args.splitlines() or "--node-rank\n0\n" in args
        labels = sts["spec"]["template"]["metadata"]["labels"]
        assert (labels["deployctl.io/rank-role"] == "master") == rank0
        if rank0:
            port = port_of(args)
            assert [p["containerPort"] for p in container["ports"]] == [port]
            for probe in ("startupProbe", "readinessProbe"):
                assert container[probe]["httpGet"] == {"path": "/health", "port": port, "scheme": "HTTP"}
            assert "livenessProbe" not in container          # off by default
        else:
            assert not {"ports", "startupProbe", "readinessProbe", "livenessProbe"} & set(container)


def test_liveness_when_turned_on_lists_models_and_generates_nothing(tmp_path):
    doc = yaml.safe_load((EXAMPLES / PD).with_suffix(".yaml").read_text())
    doc["kubernetes"] = {"values": {"probes": {"liveness": {"enabled": True}}}}
    inv = tmp_path / "inv.yaml"
    inv.write_text(yaml.safe_dump(doc, sort_keys=False))
    res = run_cli("render", "-t", "helm", "-i", str(inv), "-o", str(tmp_path / "out"))
    assert res.returncode == 0, res.stderr
    docs = [d for d in yaml.safe_load_all((tmp_path / "out" / "manifests.yaml").read_text()) if d]
    probes = [c["livenessProbe"]["httpGet"]["path"] for d in docs if d["kind"] == "StatefulSet"
              for c in d["spec"]["template"]["spec"]["containers"] if "livenessProbe" in c]
    assert probes == ["/v1/models"] * 3          # node rank 0 of prefill-0, prefill-1, decode


@pytest.mark.parametrize("stem", STEMS)
def test_the_service_reaches_the_entry_point(stem):
    """Clients reach the router (pd-split) or the HTTP port of the instance's node rank 0."""
    docs = manifests(stem)
    plan = yaml.safe_load((BARE_METAL / stem / "plan.json").read_text())
    main = next(d for d in docs if d["kind"] == "Service" and d["spec"].get("clusterIP") != "None")
    target = main["spec"]["ports"][0]["targetPort"]
    router_nodes = [p.parent.name for p in (BARE_METAL / stem).glob("*/router.args")]
    if router_nodes:
        (node,) = router_nodes
        (router,) = [d for d in docs if d["kind"] == "Deployment"]
        assert router["spec"]["strategy"] == {"type": "Recreate"}
        spec = router["spec"]["template"]["spec"]
        assert pinned_node(spec) == [node] and spec["hostNetwork"] is True
        assert main["spec"]["selector"]["app.kubernetes.io/component"] == "router"
        args = (BARE_METAL / stem / node / "router.args").read_text()
        assert target == port_of(args)
        maps = {d["metadata"]["name"]: d.get("data") or {} for d in docs if d["kind"] == "ConfigMap"}
        files_map = next(v["configMap"]["name"] for v in spec["volumes"] if v["name"] == "files")
        assert maps[files_map] == {"router.args": args}
        (container,) = spec["containers"]
        env_map = container["envFrom"][0]["configMapRef"]["name"]       # the router's own env, not the servers'
        assert maps[env_map] == env_file(BARE_METAL / stem / node / "router.env")
        assert container["command"] == ["/bin/bash", "-c", container_script(BARE_METAL / stem / node /
                                                                            "start-router.sh")]
        assert container["readinessProbe"]["httpGet"] == {"path": "/health", "port": target, "scheme": "HTTP"}
        assert "huawei.com/Ascend910" not in container["resources"]["requests"]           # no NPU
        assert router["spec"]["template"]["metadata"]["annotations"]["checksum/router"]
    else:
        assert not [d for d in docs if d["kind"] == "Deployment"]
        master = next(n["name"] for n in plan["nodes"] if n["is_master"])
        assert target == port_of((BARE_METAL / stem / master / "server.args").read_text())
        assert main["spec"]["selector"]["deployctl.io/rank-role"] == "master"


@pytest.mark.parametrize("stem", STEMS)
def test_an_instance_restarts_as_a_whole(stem):
    """Every StatefulSet of an instance carries the instance's one checksum, and only that instance's PDB covers
    its pods."""
    docs = manifests(stem)
    sums: dict[str, set] = {}
    for sts in (d for d in docs if d["kind"] == "StatefulSet"):
        labels = sts["spec"]["template"]["metadata"]["labels"]
        sums.setdefault(labels["deployctl.io/instance"], set()).add(
            sts["spec"]["template"]["metadata"]["annotations"]["checksum/instance"])
    assert all(len(s) == 1 for s in sums.values()), sums
    assert len({next(iter(s)) for s in sums.values()}) == len(sums)
    pdbs = {d["spec"]["selector"]["matchLabels"]["deployctl.io/instance"] for d in docs
            if d["kind"] == "PodDisruptionBudget"}
    assert pdbs == set(sums)


@pytest.mark.parametrize("values, message", [
    ({"sglang": {"router": {"enabled": False}}}, "kubernetes.values.sglang.router is rendered by deployctl"),
    ({"sglang": {"ports": {"apii": 30001}}}, "unknown chart value 'apii'"),
])
def test_kubernetes_values_are_checked_against_the_sglang_block(tmp_path, values, message):
    doc = yaml.safe_load((EXAMPLES / f"{PD}.yaml").read_text())
    doc["kubernetes"] = {"values": values}
    inv = tmp_path / "inv.yaml"
    inv.write_text(yaml.safe_dump(doc, sort_keys=False))
    res = run_cli("validate", "-i", str(inv))
    assert res.returncode == 2, res.stdout + res.stderr
    assert message in res.stdout + res.stderr
