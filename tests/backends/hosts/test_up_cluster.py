"""`deployctl up/status/logs/down` end to end: real CLI, real ansible-runner over SSH, simulated hosts
whose fake docker runs a stand-in MindIE (rank-table checks, cross-host rendezvous, OpenAI endpoint).

These tests never skip: without root/sshd/netns the fixtures fail and say what to install.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from conftest import run_cli
from fakecluster import default_cluster
from support.inventory import on_cluster


def inventory(fc, path: Path, preset="tp-pp", level="info") -> Path:
    return on_cluster(fc, path, preset=preset, level=level)


def up(inv: Path, runs: Path, *extra: str):
    res = run_cli("up", "-i", str(inv), "-y", "--run-dir", str(runs), "--ready-timeout", "60",
                  "--output", "json", *extra)
    doc = json.loads(res.stdout) if res.stdout.strip().startswith("{") else {}
    return res, doc


def chat(ip: str, port: int = 1025) -> dict:
    body = json.dumps({"model": "ds-r1", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 8})
    req = urllib.request.Request(f"http://{ip}:{port}/v1/chat/completions", data=body.encode(),
                                 headers={"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req, timeout=10).read())


def test_up_status_logs_down_on_two_a2_nodes(fake_cluster_factory, tmp_path):
    fc = fake_cluster_factory(default_cluster(2))
    inv = inventory(fc, tmp_path / "inv.yaml")
    runs = tmp_path / "runs"
    res, doc = up(inv, runs)
    assert res.returncode == 0, res.stderr + res.stdout
    assert doc["status"] == "successful"
    assert [h["action"] for h in doc["changes"]["hosts"]] == ["start", "start"]
    record = Path(doc["run"])
    assert (record / "status").read_text() == "successful\n" and (record / "rc").read_text() == "0\n"
    assert (record / "rendered" / "node1" / "ranktable.json").exists()
    assert any((record / "ansible" / "artifacts").rglob("job_events"))
    # each host keeps the deployed revision and its files
    rev = doc["changes"]["hosts"][1]["rev"]
    deployed = fc.node("node2").host_path(f"/var/lib/deployctl/{fc_cluster(inv)}/revisions/{rev}")
    assert (deployed / "ranktable.json").stat().st_mode & 0o777 == 0o640
    assert json.loads((deployed / ".deployctl.json").read_text())["revision"] == rev
    assert chat(fc.node("node1").ip)["choices"][0]["message"]["content"]

    st = run_cli("status", "-i", str(inv), "--output", "json")
    assert st.returncode == 0, st.stdout + st.stderr
    rows = json.loads(st.stdout)["nodes"]
    assert [(r["node"], r["engine"], r["ready"], r["ranks"]) for r in rows] == [
        ("node1", "running", True, "0-7"), ("node2", "running", True, "8-15")]

    again, doc2 = up(inv, runs)
    assert again.returncode == 0 and doc2["status"] == "nothing-to-do"

    # diff reads the hosts and changes nothing: same inventory -> all kept; another log level -> env changes
    # on both nodes and the whole instance would restart
    df = run_cli("diff", "-i", str(inv), "--output", "json")
    assert df.returncode == 0, df.stderr
    assert {h["action"] for h in json.loads(df.stdout)["hosts"]} == {"keep"}
    df = run_cli("diff", "-i", str(inventory(fc, tmp_path / "inv2.yaml", level="debug")), "--output", "json")
    hosts = json.loads(df.stdout)["hosts"]
    assert [h["action"] for h in hosts] == ["restart", "restart"]
    assert {f["path"] for h in hosts for f in h["files"] if f["kind"] == "changed"} == {"env"}
    assert json.loads(run_cli("status", "-i", str(inv), "--output", "json").stdout)["nodes"][0]["revision"] == \
        doc["changes"]["hosts"][0]["rev"]

    lg = run_cli("logs", "-i", str(inv), "--run-dir", str(runs), "--output", "json")
    assert lg.returncode == 0 and "Daemon start success!" in json.loads(lg.stdout)["logs"]["node2"][
        f"deployctl_{fc_cluster(inv)}_mindie"]

    # deployctl's env wins over the image's set_env.sh scripts (nnal/atb/set_env.sh exports 1, the preset 3)
    engine_logs = json.loads(lg.stdout)["logs"]["node2"].values()
    assert any("[fake] ATB_WORKSPACE_MEM_ALLOC_ALG_TYPE=3\n" in text for text in engine_logs), engine_logs

    dn = run_cli("down", "-i", str(inv), "--run-dir", str(runs))
    assert dn.returncode == 0, dn.stdout + dn.stderr
    # a deliberate down is not a degraded deployment: status says "down" and exits 0 (1 with --expect-up)
    st = run_cli("status", "-i", str(inv), "--output", "json")
    assert st.returncode == 0 and json.loads(st.stdout)["state"] == "down", st.stdout
    assert {r["engine"] for r in json.loads(st.stdout)["nodes"]} == {"absent"}
    assert run_cli("status", "-i", str(inv), "--expect-up").returncode == 1


def test_failed_up_names_the_host_and_restores_the_previous_revision(fake_cluster_factory, tmp_path):
    fc = fake_cluster_factory(default_cluster(2))
    runs = tmp_path / "runs"
    inv = inventory(fc, tmp_path / "inv.yaml")
    res, first = up(inv, runs, "--skip-preflight")
    assert res.returncode == 0, res.stdout + res.stderr
    old_rev = first["changes"]["hosts"][1]["rev"]
    # the new revision (a config change) crashes on node2 only; the old one still runs there
    fc.update_node("node2", engine_crash_on="MINDIE_LOG_LEVEL=debug")
    inv = inventory(fc, tmp_path / "inv.yaml", level="debug")
    res, doc = up(inv, runs, "--skip-preflight")
    assert res.returncode == 1
    assert doc["status"] == "failed"
    assert doc["failure"].startswith("node2 (mixed instance, ranks 8-15)")
    assert "HBM ECC error" in doc["failure"]
    assert sorted(doc["restored"]) == ["node1", "node2"]
    assert (Path(doc["run"]) / "hosts" / "node2" / "failure.txt").exists()
    # the previous revision is back and serving (the rollback restarted it and waited for it)
    st = run_cli("status", "-i", str(inv), "--output", "json")
    rows = json.loads(st.stdout)["nodes"]
    assert [r["revision"] for r in rows][1] == old_rev
    assert chat(fc.node("node1").ip)["choices"][0]["message"]["content"]


def fc_cluster(inv: Path) -> str:
    import yaml

    return yaml.safe_load(inv.read_text())["cluster"]["name"]


def test_missing_image_fails_up_unless_pulled_and_names_the_host(fake_cluster_factory, tmp_path):
    fc = fake_cluster_factory(default_cluster(2))
    fc.update_node("node2", image_missing=True)
    inv = inventory(fc, tmp_path / "inv.yaml")
    res, doc = up(inv, tmp_path / "runs", "--skip-preflight")
    assert res.returncode == 1
    assert doc["failure"].startswith("node2") and "image" in doc["failure"].lower()
    assert doc["restored"] == []          # nothing ran before: everything this run started is stopped
