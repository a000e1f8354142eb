"""Issue 21 observation 7 on Kubernetes: secret env variables (HF_TOKEN; engine.secret_env) reach the pods
through a Secret referenced by envFrom, never a ConfigMap; values.yaml, manifests.yaml and the run record
hold no value in clear (render writes it only to secret-values.yaml, 0600). Real control plane."""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import yaml

from kube_e2e import READY, cli, get, inventory, objects, servers

STEM = "a2-1x8-single"
TOKEN = "hf_K8sS3cretValue"
OPAQUE = "opaque-k8s-credential"


def secret_inventory(tmp_path: Path, cluster, ns: str) -> Path:
    inv = inventory(tmp_path, STEM, cluster, ns)
    doc = yaml.safe_load(inv.read_text())
    doc["engine"].setdefault("env", {}).update({"HF_TOKEN": TOKEN, "MODEL_REPO_AUTH": OPAQUE})
    doc["engine"]["secret_env"] = ["MODEL_REPO_AUTH"]
    inv.write_text(yaml.safe_dump(doc, sort_keys=False))
    return inv


def clear(data: bytes) -> bool:
    return any(s.encode() in data or base64.b64encode(s.encode()) in data for s in (TOKEN, OPAQUE))


def test_secret_env_goes_to_a_secret_referenced_by_envfrom(k8s_cluster, k8s_ns, tmp_path):
    cluster, ns = k8s_cluster, k8s_ns
    servers(cluster, STEM)
    inv = secret_inventory(tmp_path, cluster, ns)

    # render: values.yaml names the keys, secret-values.yaml (0600) holds the values, manifests are masked
    out = tmp_path / "r"
    res = cli(tmp_path, cluster, "render", "-t", "k8s", "-i", str(inv), "-o", str(out), "--force")
    assert res.returncode == 0, res.stderr
    values = yaml.safe_load((out / "values.yaml").read_text())
    assert values["secretEnv"]["keys"] == ["HF_TOKEN", "MODEL_REPO_AUTH"] and "values" not in values["secretEnv"]
    assert stat.S_IMODE((out / "secret-values.yaml").stat().st_mode) == 0o600
    assert yaml.safe_load((out / "secret-values.yaml").read_text())["secretEnv"]["values"] == {
        "HF_TOKEN": TOKEN, "MODEL_REPO_AUTH": OPAQUE}
    leaks = [p.name for p in out.rglob("*") if p.is_file() and p.name != "secret-values.yaml" and clear(p.read_bytes())]
    assert not leaks, leaks

    res = cli(tmp_path, cluster, "up", "-t", "k8s", "-i", str(inv), "-y", "--ready-timeout", READY)
    assert res.returncode == 0, res.stdout + res.stderr
    assert not clear((res.stdout + res.stderr).encode())

    secrets = [s for s in objects(cluster, "Secret", ns) if s["metadata"]["name"].endswith("-secret-env")]
    assert len(secrets) == 1, [s["metadata"]["name"] for s in objects(cluster, "Secret", ns)]
    secret = secrets[0]
    assert {k: base64.b64decode(v).decode() for k, v in secret["data"].items()} == {
        "HF_TOKEN": TOKEN, "MODEL_REPO_AUTH": OPAQUE}
    for cm in objects(cluster, "ConfigMap", ns):
        assert not clear(yaml.safe_dump(cm.get("data") or {}).encode()), cm["metadata"]["name"]
        assert "HF_TOKEN" not in (cm.get("data") or {})
    pods = objects(cluster, "Pod", ns)
    assert pods
    for pod in pods:
        refs = [e.get("secretRef", {}).get("name") for c in pod["spec"]["containers"] for e in c.get("envFrom") or []]
        assert secret["metadata"]["name"] in refs, pod["metadata"]["name"]

    # the run records hold no value in clear and are private
    runs = list((tmp_path / ".deployctl" / "runs").iterdir())
    assert runs
    for run in runs:
        assert stat.S_IMODE(run.stat().st_mode) == 0o700
        leaks = [str(p) for p in run.rglob("*") if p.is_file() and clear(p.read_bytes())]
        assert not leaks, leaks

    # the live Secret matches the rendered one: nothing to do
    res = cli(tmp_path, cluster, "diff", "-t", "k8s", "-i", str(inv), "--output", "json")
    assert res.returncode == 0, res.stderr
    assert not clear(res.stdout.encode())
    assert "Secret" in res.stdout and '"new"' not in res.stdout and '"changed"' not in res.stdout, res.stdout

    res = cli(tmp_path, cluster, "down", "-t", "k8s", "-i", str(inv))
    assert res.returncode == 0, res.stderr
    assert get(cluster, "Secret", ns, secret["metadata"]["name"]) is None
