"""Issue 21, observation 6, on the simulated hosts: `down --purge` removes deployctl's own files only (a user's
file in the cluster directory stays, and `down` says so); two deployments on one host never touch each other's
containers (container names carry the cluster name, even when both inventories set the same
`engine.container_name`, as copies of one sample do). Real CLI, ansible-runner over SSH, stand-in MindIE."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli
from fakecluster import default_cluster
from test_up_cluster import chat, inventory, up


def _inventory(fc, path: Path, name: str | None = None, extra_engine: str = "") -> Path:
    inventory(fc, path, preset="single")
    text = path.read_text()
    if name:
        text = text.replace(f"  name: fake-a2-{len(fc.nodes)}\n", f"  name: {name}\n", 1)
    text = text.replace("quant: w8a8", "quant: w4a8")      # one A2 server holds R1 in w4a8
    path.write_text(text.replace("engine:\n", "engine:\n" + extra_engine, 1))
    return path


def _names(fc, node: str = "node1") -> list[str]:
    return sorted(fc.ssh(node, "docker ps --format '{{.Names}}'", check=True).stdout.split())


def test_purge_removes_only_deployctls_own_files(fake_cluster_factory, tmp_path):
    fc = fake_cluster_factory(default_cluster(1))
    inv = _inventory(fc, tmp_path / "inv.yaml")
    runs = tmp_path / "runs"
    res, doc = up(inv, runs, "--skip-preflight")
    assert res.returncode == 0, res.stdout + res.stderr
    rev = doc["changes"]["hosts"][0]["rev"]
    cdir = "/var/lib/deployctl/fake-a2-1"
    # the operator keeps things in the cluster directory: weights next to it, notes inside a revision
    fc.ssh("node1", f"mkdir -p {cdir}/models && echo w > {cdir}/models/model-00001.safetensors && "
                    f"echo n > {cdir}/revisions/{rev}/NOTES && ln -s /etc {cdir}/etc-link", check=True)

    dn = run_cli("down", "-i", str(inv), "--purge", "-y", "--run-dir", str(runs))
    assert dn.returncode == 0, dn.stdout + dn.stderr
    out = " ".join(dn.stdout.split())
    left = fc.ssh("node1", f"cd {cdir} && find . | sort", check=True).stdout.split()
    assert left == [".", "./etc-link", "./models", "./models/model-00001.safetensors", "./revisions",
                    f"./revisions/{rev}", f"./revisions/{rev}/NOTES"], left
    assert fc.ssh("node1", "cat /etc/hostname").returncode == 0        # the link was not followed
    for kept in ("models/model-00001.safetensors (not deployctl's)", f"revisions/{rev}/NOTES (not listed in a "
                 "deployctl manifest)", "etc-link (not deployctl's)"):
        assert kept in out, out
    assert "only deployctl's own files are removed" in out
    assert _names(fc) == []
    purge = json.loads(next(runs.rglob("purge.json")).read_text())
    assert purge["node1"]["removed"] > 0 and purge["node1"]["error"] == ""

    # nothing of deployctl's is left: a second purge has nothing to do; with the user's files gone, the
    # directory itself goes
    fc.ssh("node1", f"rm -rf {cdir}/models {cdir}/etc-link {cdir}/revisions/{rev}/NOTES", check=True)
    again, _ = up(inv, runs, "--skip-preflight")
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-2000:]
    dn = run_cli("down", "-i", str(inv), "--purge", "-y", "--run-dir", str(runs))
    assert dn.returncode == 0, dn.stdout + dn.stderr
    assert fc.ssh("node1", f"test -e {cdir}").returncode == 1, fc.ssh("node1", f"find {cdir}").stdout
    assert fc.ssh("node1", "test -d /var/lib/deployctl").returncode == 0


def test_two_deployments_on_one_host_keep_their_own_containers(fake_cluster_factory, tmp_path):
    """Both inventories copy `container_name: ds-prod-mindie` from one sample; B uses other ports."""
    fc = fake_cluster_factory(default_cluster(1))
    same = "  container_name: ds-prod-mindie\n"
    ports = ("  ports: {http: 2025, management: 2026, metrics: 2027, inter_comm: 2121, multi_node: 2120, "
             "master: 7108}\n")
    a = _inventory(fc, tmp_path / "a.yaml", "team-a", same)
    b = _inventory(fc, tmp_path / "b.yaml", "team-b", same + ports)
    runs = tmp_path / "runs"
    for inv in (a, b):
        res, doc = up(inv, runs, "--skip-preflight")
        assert res.returncode == 0 and doc["status"] == "successful", res.stdout + res.stderr
    assert _names(fc) == ["deployctl_team-a_ds-prod-mindie", "deployctl_team-b_ds-prod-mindie"]
    assert chat(fc.node("node1").ip)["choices"][0]["message"]["content"]
    assert chat(fc.node("node1").ip, 2025)["choices"][0]["message"]["content"]

    dn = run_cli("down", "-i", str(b), "-y", "--run-dir", str(runs))
    assert dn.returncode == 0, dn.stdout + dn.stderr
    assert _names(fc) == ["deployctl_team-a_ds-prod-mindie"]
    assert chat(fc.node("node1").ip)["choices"][0]["message"]["content"]
    st = run_cli("status", "-i", str(a), "--output", "json")
    assert st.returncode == 0 and json.loads(st.stdout)["state"] == "serving", st.stdout + st.stderr
