"""MindIE prefill/decode on Kubernetes (issue 22 item 6): the chart runs the P and D instances and MindIE-MS's
controller and coordinator from the same files as bare metal.

The oracle is the bare-metal render of the same inventory (tests/golden/<example>/<node>/: the files start.sh
mounts, its env file, the `bash -c` script it hands the container, start-ms.sh's MindIE-MS scripts). The chart's
objects are read back from a real API server after `helm install` (tests/k8scluster.py; the pods run no engine):
each instance's files ConfigMap holds the bare-metal bytes (a distributed decode: config1..N.json, one per DP
rank), its env ConfigMap the env file but for the per-pod variables the downward API sets, every server pod runs
start.sh's script pinned to its server, and the controller and coordinator run start-ms.sh's scripts on the
prefill master's server with its ms_controller.json, ms_coordinator.json and global rank table.
"""

from __future__ import annotations

import shlex

import pytest
import yaml

from conftest import EXAMPLES, ROOT, run_cli

BARE_METAL = ROOT / "tests" / "golden"
STEMS = ["a3-pd-2p1d", "a3-pd-2p2d"]
POD_ENV = ("MIES_CONTAINER_IP", "MIES_CONTAINER_MANAGEMENT_IP", "HOST_IP")     # the downward API's, per pod
MS_ENV = ("GLOBAL_RANK_TABLE_FILE_PATH", "MINDIE_MS_CONTROLLER_CONFIG_FILE_PATH",
          "MINDIE_MS_COORDINATOR_CONFIG_FILE_PATH")                           # the MindIE-MS pods' own
ENV_KEYS = "DEPLOYCTL_ENV_KEYS"


def env_file(path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if line and not line.startswith("#"))


def docker_run(start_sh) -> tuple[str, dict[str, str]]:
    """The `bash -c` script start.sh gives its container and the container's -e variables."""
    words = shlex.split(start_sh.read_text().split("docker run", 1)[1].split("\necho ", 1)[0].replace("\\\n", " "))
    env = dict(words[i + 1].split("=", 1) for i, w in enumerate(words) if w == "-e")
    return words[words.index("-c", words.index("bash")) + 1], env


def ms_scripts(start_ms) -> dict[str, str]:
    """start-ms.sh: the controller's and the coordinator's `bash -c` scripts, by container role."""
    out = {}
    for part in start_ms.read_text().split("\nNAME=")[1:]:
        name = part.split("\n", 1)[0]
        run = part.split("docker run", 1)[1].split("\necho ", 1)[0].replace("\\\n", " ")
        words = shlex.split(run)
        out[name.rsplit("-", 1)[1]] = words[words.index("-c", words.index("bash")) + 1]
    return out


def without(env: dict, drop: tuple[str, ...]) -> dict:
    out = {k: v for k, v in env.items() if k not in drop}
    if ENV_KEYS in out:
        out[ENV_KEYS] = " ".join(k for k in out[ENV_KEYS].split() if k not in MS_ENV)
    return out


def pinned(spec: dict) -> list[str]:
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    return terms[0]["matchExpressions"][0]["values"]


def container_env(container: dict) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


@pytest.fixture(scope="module")
def charts(tmp_path_factory) -> dict:
    out = {}
    for stem in STEMS:
        target = tmp_path_factory.mktemp("pd") / stem
        res = run_cli("render", "--target", "helm", "-i", str(EXAMPLES / f"{stem}.yaml"), "-o", str(target))
        assert res.returncode == 0, res.stdout + res.stderr
        out[stem] = target
    return out


def check(stem: str, objects: list[dict]) -> int:
    """The chart's objects (as rendered, or read back from the API server) against the bare-metal tree."""
    import json

    plan = json.loads((BARE_METAL / stem / "plan.json").read_text())
    by = {(o["kind"], o["metadata"]["name"]): o for o in objects}
    release = plan["inventory"]["cluster"]["name"]
    prefix = f"{release}-ascend-llm"
    checked = 0
    for inst in plan["instances"]:
        files = by[("ConfigMap", f"{prefix}-{inst['name']}-files")]["data"]
        env = by[("ConfigMap", f"{prefix}-{inst['name']}-env")]["data"]
        master = BARE_METAL / stem / inst["master"]
        mounted = {f.name for f in master.iterdir() if f.name == "ranktable.json" or
                   (f.name.startswith("config") and f.suffix == ".json")}
        assert set(files) == mounted, inst["name"]
        script, run_env = docker_run(master / "start.sh")
        for node in inst["nodes"]:
            for name in mounted:        # the same bytes every server of the instance gets on bare metal
                assert files[name].encode() == (BARE_METAL / stem / node / name).read_bytes(), (node, name)
                checked += 1
            bare = without(env_file(BARE_METAL / stem / node / "env"), POD_ENV + MS_ENV)
            assert without(env, ("DEPLOYCTL_DP_SERVERS", "DEPLOYCTL_DP_CPU_SLICES")) == bare, node
        if inst["role"] == "decode":    # distributed DP: one server per DP rank, as many as start.sh starts
            assert len(mounted) > 2 and env["DEPLOYCTL_DP_SERVERS"] == run_env["DEPLOYCTL_DP_SERVERS"] == str(
                len(mounted) - 1)
            # A3: each DP server on its CPU slice, as start.sh binds it (install.py _dp)
            assert env.get("DEPLOYCTL_DP_CPU_SLICES") == run_env.get("DEPLOYCTL_DP_CPU_SLICES")
        sets = [by[("StatefulSet", f"{prefix}-{inst['name']}-{r}")] for r in ("master", "worker")
                if ("StatefulSet", f"{prefix}-{inst['name']}-{r}") in by]
        assert [n for s in sets for n in pinned(s["spec"]["template"]["spec"])] == \
            [inst["master"]] + [n for n in inst["nodes"] if n != inst["master"]]
        for sts in sets:
            container = sts["spec"]["template"]["spec"]["containers"][0]
            cenv = container_env(container)
            assert cenv["DEPLOYCTL_LAUNCHER"] == script          # start.sh's script, character for character
            assert cenv["DEPLOYCTL_DAEMON"] == run_env["DEPLOYCTL_DAEMON"]
            if inst["role"] == "decode":
                assert cenv["DEPLOYCTL_WORK"] == run_env["DEPLOYCTL_WORK"]
                probe = container["readinessProbe"]["httpGet"]
                config1 = json.loads(files["config1.json"])     # DP rank 0 serves health on its own port
                assert probe["port"] == config1["ServerConfig"]["managementPort"]
    router = next(n for n in plan["nodes"] if n["runs_router"])
    ms_files = by[("ConfigMap", f"{prefix}-ms-files")]["data"]
    for name in ("ms_controller.json", "ms_coordinator.json", "global_ranktable.json"):
        assert ms_files[name].encode() == (BARE_METAL / stem / router["name"] / name).read_bytes()
        checked += 1
    ms_env = by[("ConfigMap", f"{prefix}-ms-env")]["data"]
    assert ms_env == {k: v for k, v in env_file(BARE_METAL / stem / router["name"] / "env").items()
                      if k not in POD_ENV}
    scripts = ms_scripts(BARE_METAL / stem / router["name"] / "start-ms.sh")
    for role in ("controller", "coordinator"):
        dep = by[("Deployment", f"{prefix}-ms-{role}")]
        spec = dep["spec"]["template"]["spec"]
        assert pinned(spec) == [router["name"]] and spec["hostNetwork"] is True
        assert container_env(spec["containers"][0])["DEPLOYCTL_LAUNCHER"] == scripts[role]
        assert "resources" not in spec["containers"][0] or "huawei.com/Ascend910" not in str(
            spec["containers"][0]["resources"])
    service = by[("Service", prefix)]
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "ms-coordinator"
    return checked


@pytest.mark.parametrize("stem", STEMS)
def test_rendered_chart_runs_every_instance_and_mindie_ms_from_the_bare_metal_files(stem, charts):
    docs = [d for d in yaml.safe_load_all((charts[stem] / "manifests.yaml").read_text()) if d]
    assert check(stem, docs) > 0


def test_installed_objects_read_back_from_the_api_server_equal_bare_metal(charts, k8s_cluster, k8s_ns):
    """helm install into kube-apiserver; the ConfigMaps, StatefulSets, Deployments and Service read back from the
    API server (after its validation and defaulting) still carry bare metal's files, env and scripts."""
    from deployctl.io.kube import KubeApi, KubeTarget

    stem = "a3-pd-2p1d"
    cluster, ns = k8s_cluster, k8s_ns
    cluster.create_namespace(ns)
    release = "v32-2p1d"
    res = cluster.helm_run("install", release, charts[stem] / "chart", "--namespace", ns,
                           "--values", charts[stem] / "values.yaml", "--timeout", "4m")
    assert res.returncode == 0, res.stdout + res.stderr
    api = KubeApi(KubeTarget(str(cluster.kubeconfig), None, ns, release))
    try:
        live = api.release_objects()
    finally:
        api.client.close()
    kinds = {o["kind"] for o in live}
    assert {"ConfigMap", "StatefulSet", "Deployment", "Service"} <= kinds
    assert check(stem, live) > 0
