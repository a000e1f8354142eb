"""vLLM-Ascend on Kubernetes: every pod runs exactly what bare metal runs on its server.

The oracle is the bare-metal tree (tests/golden/<example>/<node>/), read as a user would: the files start.sh
mounts, its env file (`docker run --env-file`), the `bash -c` script it hands the container, the proxy's
arguments. The chart's manifests (charts/examples/manifests-<example>.yaml) must give each server's pod the
same bytes, the same env, the same script, pinned to that server, with one pod per server.
"""

from __future__ import annotations

import shlex

import pytest
import yaml

from conftest import EXAMPLES, ROOT

GOLDEN = ROOT / "charts" / "examples"
BARE_METAL = ROOT / "tests" / "golden"
STEMS = sorted(p.stem for p in EXAMPLES.glob("*.yaml") if "kind: vllm-ascend" in p.read_text())


def manifests(stem: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((GOLDEN / f"manifests-{stem}.yaml").read_text()) if d]


def env_file(path) -> dict[str, str]:
    """docker's --env-file: KEY=VALUE lines, # comments, no quoting."""
    out = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key] = value
    return out


def container_script(start_sh) -> str:
    """The script start.sh gives the container: the argument after `bash -c` of its `docker run`."""
    words = shlex.split(start_sh.read_text().split("docker run", 1)[1].split("\necho ", 1)[0].replace("\\\n", " "))
    return words[words.index("-c", words.index("bash")) + 1]


def pinned_node(spec: dict) -> list[str]:
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return terms[0]["matchExpressions"][0]["values"]


def port_of(args: str) -> int | None:
    """--port of an argument file (one argument per line), None for a headless process."""
    lines = args.splitlines()
    return int(lines[lines.index("--port") + 1]) if "--port" in lines else None


def servers(stem: str) -> list:
    return sorted(p for p in (BARE_METAL / stem).iterdir() if p.is_dir())


@pytest.mark.parametrize("stem", STEMS)
def test_each_server_pod_runs_the_bare_metal_launch(stem):
    docs = manifests(stem)
    maps = {d["metadata"]["name"]: d.get("data") or {} for d in docs if d["kind"] == "ConfigMap"}
    sets = [d for d in docs if d["kind"] == "StatefulSet"]
    by_node = {}
    for sts in sets:
        spec = sts["spec"]["template"]["spec"]
        assert sts["spec"]["replicas"] == 1
        (node,) = pinned_node(spec)
        assert node not in by_node, f"two StatefulSets on {node}"
        by_node[node] = sts
    assert sorted(by_node) == [d.name for d in servers(stem)]       # one pod per server, every server
    for node_dir in servers(stem):
        sts = by_node[node_dir.name]
        spec = sts["spec"]["template"]["spec"]
        (container,) = spec["containers"]
        assert spec["hostNetwork"] is True
        files_map = next(v["configMap"]["name"] for v in spec["volumes"] if v["name"] == "files")
        bare = {p.name: p.read_text() for p in node_dir.iterdir() if p.name.startswith("serve-")}
        assert maps[files_map] == bare, node_dir.name
        mount = next(m for m in container["volumeMounts"] if m["name"] == "files")
        env = {e["name"]: e["value"] for e in container["env"]}
        assert env["DEPLOYCTL_WORK"] == mount["mountPath"]
        env_map = container["envFrom"][0]["configMapRef"]["name"]
        assert maps[env_map] == env_file(node_dir / "env"), node_dir.name
        assert container["command"] == ["/bin/bash", "-c", container_script(node_dir / "start.sh")]
        bare_run = (node_dir / "start.sh").read_text()
        assert ("-e DEPLOYCTL_MOONCAKE=1" in bare_run) == (env.get("DEPLOYCTL_MOONCAKE") == "1")
        args = sorted(node_dir.glob("serve-*.args"), key=lambda a: int(a.stem.split("-")[1]))    # serve-10 after 9
        ports = [port_of(a.read_text()) for a in args]
        ports = [p for p in ports if p is not None]
        assert [p["containerPort"] for p in container.get("ports", [])] == ports
        assert container["image"] == bare_run.split("\nIMAGE=", 1)[1].split("\n", 1)[0]


@pytest.mark.parametrize("stem", STEMS)
def test_the_service_reaches_the_entry_point(stem):
    """Clients reach the proxy on the prefill master (pd-split) or the API of the instance's first server."""
    docs = manifests(stem)
    plan = yaml.safe_load((BARE_METAL / stem / "plan.json").read_text())
    main = next(d for d in docs if d["kind"] == "Service" and d["spec"].get("clusterIP") != "None")
    target = main["spec"]["ports"][0]["targetPort"]
    proxy_nodes = [p.parent.name for p in (BARE_METAL / stem).glob("*/proxy.args")]
    if proxy_nodes:
        (node,) = proxy_nodes
        (proxy,) = [d for d in docs if d["kind"] == "Deployment"]
        spec = proxy["spec"]["template"]["spec"]
        assert pinned_node(spec) == [node]
        assert main["spec"]["selector"]["app.kubernetes.io/component"] == "proxy"
        args = (BARE_METAL / stem / node / "proxy.args").read_text()
        assert target == port_of(args)
        maps = {d["metadata"]["name"]: d.get("data") or {} for d in docs if d["kind"] == "ConfigMap"}
        files_map = next(v["configMap"]["name"] for v in spec["volumes"] if v["name"] == "files")
        assert maps[files_map] == {"proxy.args": args}
        script = spec["containers"][0]
        bare = container_script(BARE_METAL / stem / node / "start-proxy.sh")
        assert script["command"] == ["/bin/bash", "-c", bare]
        proxy_env = {e["name"]: e["value"] for e in script["env"]}
        assert f"-e DEPLOYCTL_PROXY={proxy_env['DEPLOYCTL_PROXY']} " in \
            (BARE_METAL / stem / node / "start-proxy.sh").read_text().replace("\\\n", "")
    else:
        master = next(n["name"] for n in plan["nodes"] if n["is_master"])
        assert target == port_of((BARE_METAL / stem / master / "serve-0.args").read_text())
        assert main["spec"]["selector"]["deployctl.io/rank-role"] == "master"
        masters = [d for d in docs if d["kind"] == "StatefulSet"
                   and d["spec"]["template"]["metadata"]["labels"]["deployctl.io/rank-role"] == "master"]
        assert [pinned_node(m["spec"]["template"]["spec"]) for m in masters] == [[master]]


@pytest.mark.parametrize("stem", STEMS)
def test_an_instance_restarts_as_a_whole(stem):
    """Every StatefulSet of an instance carries the instance's one checksum (OnDelete: deployctl deletes the pods
    of an instance whose checksum changed), and only that instance's PDB covers its pods."""
    docs = manifests(stem)
    sums: dict[str, set] = {}
    for sts in (d for d in docs if d["kind"] == "StatefulSet"):
        labels = sts["spec"]["template"]["metadata"]["labels"]
        sums.setdefault(labels["deployctl.io/instance"], set()).add(
            sts["spec"]["template"]["metadata"]["annotations"]["checksum/instance"])
    assert all(len(s) == 1 for s in sums.values()), sums
    assert len({next(iter(s)) for s in sums.values()}) == len(sums)     # instances differ
    pdbs = {d["spec"]["selector"]["matchLabels"]["deployctl.io/instance"] for d in docs
            if d["kind"] == "PodDisruptionBudget"}
    assert pdbs == set(sums)


def test_a_changed_server_changes_only_its_instance(tmp_path):
    """A decode-only change (d1's interface: its socket-interface env) moves the decode instance's checksum and
    leaves prefill's alone."""
    from conftest import run_cli

    stem = "vllm-a3-1p1d-qwen3"
    inv = tmp_path / "inv.yaml"
    doc = yaml.safe_load((EXAMPLES / f"{stem}.yaml").read_text())
    next(n for n in doc["nodes"] if n["name"] == "d1")["interface"] = "enp189s0f1"
    inv.write_text(yaml.safe_dump(doc))
    res = run_cli("render", "-t", "helm", "-i", str(inv), "-o", str(tmp_path / "out"))
    assert res.returncode == 0, res.stderr

    def sums(docs):
        return {d["spec"]["template"]["metadata"]["labels"]["deployctl.io/instance"]:
                d["spec"]["template"]["metadata"]["annotations"]["checksum/instance"]
                for d in docs if d["kind"] == "StatefulSet"}

    before = sums(manifests(stem))
    after = sums([d for d in yaml.safe_load_all((tmp_path / "out" / "manifests.yaml").read_text()) if d])
    assert after["prefill"] == before["prefill"]
    assert after["decode"] != before["decode"]


@pytest.mark.parametrize("values, message", [
    ({"vllm": {"proxy": {"enabled": False}}}, "kubernetes.values.vllm.proxy is rendered by deployctl"),
    ({"vllm": {"ports": {"apii": 8001}}}, "unknown chart value 'apii'"),
    ({"engine": "mindie"}, "kubernetes.values.engine is rendered by deployctl"),
])
def test_kubernetes_values_are_checked_against_the_vllm_block(tmp_path, values, message):
    from conftest import run_cli

    doc = yaml.safe_load((EXAMPLES / "vllm-a3-1p1d-qwen3.yaml").read_text())
    doc["kubernetes"] = {"values": values}
    inv = tmp_path / "inv.yaml"
    inv.write_text(yaml.safe_dump(doc, sort_keys=False))
    res = run_cli("validate", "-i", str(inv))
    assert res.returncode == 2, res.stdout + res.stderr
    assert message in res.stdout + res.stderr
    assert f"{inv}:" in res.stderr          # file and line
