"""Issue 21 observation 7, end to end on a simulated host: `up` gives the engine container the real secret
env values (from the host's 0600 env file) while the run record (plan.json, rendered tree, archives,
events) and the controller's temporary files hold only ***."""

from __future__ import annotations

import json
import stat
import tarfile
import tempfile
from pathlib import Path

from fakecluster import default_cluster
from fakecluster.spec import DEFAULT_IMAGES, DEFAULT_WEIGHTS_DIR

from conftest import run_cli

TOKEN = "hf_EndToEndS3cret"
OPAQUE = "opaque-e2e-credential"

TAIL = """\
engine:
  image: {image}
  env: {{HF_TOKEN: {token}, MODEL_REPO_AUTH: {opaque}, MINDIE_LOG_LEVEL: info}}
  secret_env: [MODEL_REPO_AUTH]
model: {{name: deepseek-r1, quant: w8a8, weights_path: {weights}, served_name: ds-r1,
        max_seq_len: 8192, max_input_len: 4096, max_batch_size: 32}}
layout: {{preset: tp-pp}}
"""


def test_the_container_gets_the_secret_and_the_record_holds_the_mask(fake_cluster_factory, tmp_path):
    fc = fake_cluster_factory(default_cluster(2))
    inv = tmp_path / "inv.yaml"
    inv.write_text(fc.inventory_snippet() + TAIL.format(image=DEFAULT_IMAGES[fc.specs[0].hardware], token=TOKEN,
                                                        opaque=OPAQUE, weights=DEFAULT_WEIGHTS_DIR))
    before = set(Path(tempfile.gettempdir()).glob("deployctl-push-*"))
    res = run_cli("up", "-i", str(inv), "-y", "--run-dir", str(tmp_path / "runs"), "--ready-timeout", "60",
                  "--skip-preflight", "--output", "json")
    assert res.returncode == 0, res.stderr + res.stdout
    assert TOKEN not in res.stdout + res.stderr and OPAQUE not in res.stdout + res.stderr
    doc = json.loads(res.stdout)
    record = Path(doc["run"])

    # the engine container on every host runs with the real values, read from the host's 0600 env file
    for node in ("node1", "node2"):
        names = fc.ssh(node, "docker ps --format '{{.Names}}'", check=True).stdout.split()
        engine = next(n for n in names if n.endswith("mindie"))
        env = json.loads(fc.ssh(node, f"docker inspect {engine}", check=True).stdout)[0]["Config"]["Env"]
        assert f"HF_TOKEN={TOKEN}" in env and f"MODEL_REPO_AUTH={OPAQUE}" in env, env
        rev = next(h["rev"] for h in doc["changes"]["hosts"] if h["node"] == node)
        cluster = inv.read_text().split("name: ", 1)[1].split()[0]
        host_env = fc.node(node).host_path(f"/var/lib/deployctl/{cluster}/revisions/{rev}/env")
        assert f"HF_TOKEN={TOKEN}\n" in host_env.read_text()
        assert stat.S_IMODE(host_env.stat().st_mode) == 0o600

    # the run record: private, and no file in it (tar archives included) holds a secret in clear
    assert stat.S_IMODE(record.stat().st_mode) == 0o700
    plan = json.loads((record / "rendered" / "plan.json").read_text())
    assert plan["inventory"]["engine"]["env"]["HF_TOKEN"] == "***"
    assert "HF_TOKEN=***" in (record / "rendered" / "node1" / "env").read_text()
    leaks = [p for p in record.rglob("*") if p.is_file()
             and (TOKEN.encode() in p.read_bytes() or OPAQUE.encode() in p.read_bytes())]
    assert not leaks, leaks
    for tar in record.rglob("*.tar"):
        with tarfile.open(tar) as t:
            for m in t.getmembers():
                data = t.extractfile(m).read() if m.isfile() else b""
                assert TOKEN.encode() not in data and OPAQUE.encode() not in data, (tar, m.name)
    # the private tree the archives were packed from is gone after the run
    assert set(Path(tempfile.gettempdir()).glob("deployctl-push-*")) <= before
