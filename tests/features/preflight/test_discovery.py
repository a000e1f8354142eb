"""Discovery first: `preflight` runs on an inventory without device IPs (A3: SDIDs, super pod ids), reads
them from the hosts and saves them; `plan/render --facts` and `up`/`diff` (through resolve_facts) use them.

End to end on the simulated cluster (real SSH, real CLI) plus unit tests of the pieces: validation in
discovery mode, the needs-facts judgement, and resolve_facts on hand-made run records. The cluster tests
never skip: without root/sshd/netns the fixtures fail and say what to install.
"""

from __future__ import annotations

import json
import os
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from conftest import run_cli
from deployctl.core.errors import InventoryError, UsageError
from deployctl.core.input.gaps import NeedsFacts
from deployctl.core.input.raw import parse_yaml
from deployctl.app.inventory import validate_for_discovery, validate_inventory
from deployctl.core.models.facts import IpConf
from deployctl.core.models.host_facts import DeviceFacts, FactsFile, HostFacts
from deployctl.app.inventory import with_engine
from deployctl.core.models.inventory import Inventory
from deployctl.io.facts_store import resolve_facts
from deployctl.features.preflight.rules import check_sdids, not_checked
from fakecluster import FakeCluster, default_cluster, with_faults
from support.inventory import cluster_tail

# what preflight can judge differently on another test machine (the nodes share its /dev/shm, clock, disk)
ENVIRONMENT_WARNINGS = {"shm", "clock", "disk"}


# --------------------------------------------------------------------------- helpers (reusable: up/diff tests)

def without_discoverables(snippet: str) -> str:
    """A fake cluster's inventory snippet minus what preflight discovers: every node's `devices:` list
    (device IPs, A3 SDIDs), `hccn_conf` and `super_pod_id`. Names, addresses and SSH stay."""
    out, skipping = [], False
    for line in snippet.splitlines():
        if re.match(r"^    (devices|hccn_conf):", line):
            skipping = line.rstrip().endswith(":")     # a block list follows `devices:`
            continue
        if skipping and line.startswith("      "):
            continue
        skipping = False
        if re.match(r"^    super_pod_id:", line):
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def discovery_inventory(fc: FakeCluster, path: Path, *, preset: str | None = None, tail: str | None = None) -> Path:
    """Write the inventory an operator writes before knowing any device IP: the fake's cluster/ssh/nodes
    (names and addresses only) + engine/model/layout (image and weights present on the fake nodes)."""
    hw = fc.specs[0].hardware
    preset = preset or ("single" if len(fc.nodes) == 1 else "tp-pp")
    text = without_discoverables(fc.inventory_snippet()) + (
        tail or cluster_tail(hardware=hw, preset=preset))
    path.write_text(text)
    return path


# SSH connect + banner + auth on a healthy simulated host: well under a second idle, seconds on a loaded machine
# (2 cores shared by parallel runs); a host that does not answer is a test of its own with its own timeout
CONNECT_TIMEOUT = 10


def preflight(inventory: Path, run_dir: Path, *args: str, output: str = "json"):
    """`deployctl preflight`; returns (CompletedProcess, the JSON report or None)."""
    res = run_cli("preflight", "-i", str(inventory), "--output", output, "--run-dir", str(run_dir),
                  "--connect-timeout", str(CONNECT_TIMEOUT), *args)
    assert "Traceback" not in res.stderr and "unexpected error" not in res.stderr, res.stderr
    doc = None
    if output == "json":
        assert res.stdout.lstrip().startswith("{"), f"rc={res.returncode} {res.stdout!r} {res.stderr!r}"
        doc = json.loads(res.stdout)
    return res, doc


def saved_facts(run_dir: Path) -> list[Path]:
    """facts.json of every preflight run under run_dir, oldest first."""
    return sorted(run_dir.glob("runs/*-preflight/facts.json"))


def plan_with_facts(inventory: Path, facts: Path) -> dict:
    res = run_cli("plan", "-i", str(inventory), "--facts", str(facts), "--output", "json")
    assert res.returncode == 0, res.stderr + res.stdout
    return json.loads(res.stdout)


def rank_table(plan: dict, key: str = "device_ip") -> dict[str, dict[int, object]]:
    """{node: {device_id: device_ip (or sdid)}} over every rank of every instance of a plan."""
    out: dict[str, dict[int, object]] = {}
    for inst in plan["instances"]:
        for r in inst["ranks"]:
            out.setdefault(r["node"], {})[r["device_id"]] = r[key]
    return out


def fails(doc: dict) -> list[tuple]:
    return [(f["rule"], f["host"], f["device"]) for f in doc["findings"] if f["severity"] == "FAIL"]


# --------------------------------------------------------------------------- end to end (simulated cluster)

def test_preflight_discovers_the_device_ips_plan_and_resolve_facts_use_them(fake_cluster_factory, tmp_path):
    fc = fake_cluster_factory(default_cluster(2))
    inv = discovery_inventory(fc, tmp_path / "inv.yaml")
    text = inv.read_text()
    assert "devices:" not in text and "ip:" not in text and "address: " + fc.node("node2").ip in text
    runs = tmp_path / "R"

    # without facts: planned (and said), the files that need the IPs refused, saying how to get them
    val = run_cli("validate", "-i", str(inv), cwd=tmp_path)
    assert val.returncode == 0 and "left to preflight: device IPs of every device of 2 node(s)" in val.stderr
    val = run_cli("render", "-i", str(inv), "-o", str(tmp_path / "out"), cwd=tmp_path)
    assert val.returncode == 2 and "Traceback" not in val.stderr
    assert f"run `deployctl preflight -i {inv}` first: every command then uses the device IPs" in val.stderr
    assert resolve_facts(inv, runs, None) == (None, None)

    res, _ = preflight(inv, runs, output="text")
    assert res.returncode == 0, res.stdout + res.stderr
    out = " ".join(res.stdout.split())
    assert "Needs facts:" in out
    for node, i in (("node1", 0), ("node2", 1)):
        assert re.search(rf"{re.escape(str(inv))}:\d+ nodes\[{i}\]: node '{node}' has no device IPs; the rank "
                         r"table of the mixed instance needs it -> discovered", out), res.stdout
    assert "device IPs against the inventory on node1, node2" in out
    (facts_path,) = saved_facts(runs)
    assert f"Facts saved to {facts_path}: every command (plan, render, up, diff, ...) uses them for this " \
           "inventory" in out
    facts = FactsFile.model_validate_json(facts_path.read_text())
    for name in ("node1", "node2"):
        assert {d: dev.ip.ip for d, dev in facts.hosts[name].devices.items()} == fc.node(name).device_ips
        assert facts.hosts[name].pings and all(p.ok for p in facts.hosts[name].pings)   # over discovered IPs
    record = facts_path.parent
    assert (record / "status").read_text() == "successful\n" and (record / "rc").read_text() == "0\n"
    summary = json.loads((record / "run.json").read_text())
    assert summary["cluster"] == "fake-a2-2" and summary["ok"] is True
    assert summary["nodes"] == {n: fc.node(n).ip for n in ("node1", "node2")}

    plan = plan_with_facts(inv, facts_path)
    assert rank_table(plan) == {n: fc.node(n).device_ips for n in ("node1", "node2")}
    assert [r["rank"] for r in plan["instances"][0]["ranks"]] == list(range(16))

    used, note = resolve_facts(inv, runs, None)
    assert used == facts_path.resolve()
    assert note.startswith(f"using device IPs and SDIDs from preflight run {record.name} (")
    assert note.endswith(f" ago): {facts_path.resolve()}")

    # --output json: the same notes as data; the newest successful run is the one resolve_facts picks
    res, doc = preflight(inv, runs)
    assert res.returncode == 0 and doc["ok"] is True, res.stdout[-3000:]
    assert [(g["node"], g["what"], g["path"], g["discovered"]) for g in doc["needs_facts"]] == [
        ("node1", "ip", "nodes[0]", True), ("node2", "ip", "nodes[1]", True)]
    assert all(isinstance(g["line"], int) and g["file"] == str(inv) for g in doc["needs_facts"])
    assert fails(doc) == []
    assert [f["rule"] for f in doc["findings"] if f["rule"] not in ENVIRONMENT_WARNINGS] == []
    assert Path(doc["facts_file"]) == saved_facts(runs)[-1] and Path(doc["run"]) == saved_facts(runs)[-1].parent
    assert resolve_facts(inv, runs, None)[0] == Path(doc["facts_file"]).resolve()


def test_a3_super_pod_discovers_sdids_and_super_pod_ids(fake_cluster_factory, tmp_path):
    fc = fake_cluster_factory(default_cluster(2, "a3"))
    inv = discovery_inventory(fc, tmp_path / "inv.yaml", preset="dp-ep")
    text = inv.read_text()
    assert "super_pod: true" in text and "super_pod_id" not in text and "sdid" not in text
    res, doc = preflight(inv, tmp_path / "R")
    assert res.returncode == 0 and fails(doc) == [], res.stdout[-3000:]
    assert sorted((g["node"], g["what"], g["discovered"]) for g in doc["needs_facts"]) == [
        ("node1", "ip", True), ("node1", "super_pod_id", True), ("node2", "ip", True), ("node2", "super_pod_id", True)]
    assert any("SDIDs and super pod ids against the inventory" in n for n in doc["not_checked"])
    plan = plan_with_facts(inv, Path(doc["facts_file"]))
    specs = {s.name: s for s in fc.specs}
    assert rank_table(plan, "sdid") == {n: dict(specs[n].sdids) for n in ("node1", "node2")}
    assert rank_table(plan) == {n: fc.node(n).device_ips for n in ("node1", "node2")}
    assert {n["super_pod_id"] for n in plan["inventory"]["nodes"]} == {"0"}


def test_what_preflight_cannot_discover_fails_and_is_not_used(fake_cluster_factory, tmp_path):
    """node2 has no IP on device 4 (a needs-facts FAIL besides device-ip: `plan --facts` would refuse it);
    node3 is unreachable (host-reachable only). A failed run is never picked by resolve_facts."""
    fc = fake_cluster_factory(with_faults(default_cluster(3), node2={"missing_device_ip": {4}},
                                          node3={"unreachable": True}))
    inv = discovery_inventory(fc, tmp_path / "inv.yaml")
    runs = tmp_path / "R"
    res, doc = preflight(inv, runs)
    assert res.returncode == 1 and doc["ok"] is False
    assert set(fails(doc)) == {("device-ip", "node2", 4), ("needs-facts", "node2", None),
                               ("host-reachable", "node3", None)}
    gap = next(f for f in doc["findings"] if f["rule"] == "needs-facts")
    assert gap["message"] == "the inventory leaves out the device IPs (devices 4) and preflight could not read them"
    assert [(g["node"], g["discovered"]) for g in doc["needs_facts"]] == [
        ("node1", True), ("node2", False), ("node3", False)]
    (facts_path,) = saved_facts(runs)
    assert (facts_path.parent / "status").read_text() == "failed\n"
    assert resolve_facts(inv, runs, None) == (None, None)

    text, _ = preflight(inv, runs, output="text")
    out = " ".join(text.stdout.split())
    assert "node 'node3' has no device IPs; the rank table of the mixed instance needs it -> NOT discovered " \
           "(unreachable)" in out
    assert "-> NOT discovered (see the needs-facts finding)" in out
    assert "deployctl uses only a run without FAIL" in out

    # --facts with these facts still leaves gaps: render refuses, and the hint does not say "run preflight first"
    res = run_cli("render", "-i", str(inv), "--facts", str(facts_path), "-o", str(tmp_path / "out"))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "device 4 of node 'node2' has no ip" in res.stderr and "node 'node3' has no device IPs" in res.stderr
    assert "the facts file has no device IPs for it" in res.stderr and "first:" not in res.stderr


# --------------------------------------------------------------------------- validation in discovery mode

INV = """\
cluster: {name: c1, hardware: HW, super_pod: SP}
engine: {image: mindie:1}
model: {name: deepseek-r1, quant: w8a8, weights_path: /w, served_name: m, max_seq_len: 8192,
        max_input_len: 4096, max_batch_size: 8}
layout: {preset: PRESET}
nodes:
  - {name: n1, address: 10.0.0.1}
  - name: n2
    address: 10.0.0.2
EXTRA
"""


def inventory_text(hw: str = "a2", sp: str = "false", preset: str = "tp-pp", extra: str = "") -> str:
    return INV.replace("HW", hw).replace("SP", sp).replace("PRESET", preset).replace("EXTRA", extra)


def raw(text: str):
    return parse_yaml(text, "inv.yaml", Path("."))


def test_discovery_mode_turns_only_the_missing_ips_into_notes():
    inv, gaps = validate_for_discovery(raw(inventory_text()))
    assert [(g.node, g.what, g.path, g.device) for g in gaps] == [("n1", "ip", "nodes[0]", None),
                                                                  ("n2", "ip", "nodes[1]", None)]
    assert all(isinstance(g, NeedsFacts) and g.line for g in gaps)
    assert inv.node("n1").devices is None
    with pytest.raises(InventoryError) as err:        # validate / plan: the same gaps refuse
        validate_inventory(raw(inventory_text()))
    assert len(err.value.problems) == 2
    assert "run `deployctl preflight -i inv.yaml` first" in err.value.problems[0].hint


def test_discovery_mode_still_refuses_every_other_problem():
    text = inventory_text(preset="dp-ep").replace("max_batch_size: 8", "max_batch_size: 0")
    with pytest.raises(InventoryError) as err:
        validate_for_discovery(raw(text))
    paths = [p.path for p in err.value.problems]
    assert paths == ["model.max_batch_size"], err.value.render()    # the gaps are not listed as problems
    with pytest.raises(InventoryError) as err:                        # a broken layout still refuses
        validate_for_discovery(raw(inventory_text(preset="single")))
    assert [p.path for p in err.value.problems] == ["layout.preset"]


def test_discovery_mode_a3_super_pod_gaps():
    devices = "    devices: [" + ", ".join(f"{{id: {i}, ip: 29.1.{i}.1}}" for i in range(16)) + "]"
    _, gaps = validate_for_discovery(raw(inventory_text("a3", "true", "dp-ep", devices)))
    kinds = {(g.node, g.what) for g in gaps}
    assert kinds == {("n1", "ip"), ("n1", "super_pod_id"), ("n2", "super_pod_id"), ("n2", "sdid")}
    assert sorted(g.device for g in gaps if g.what == "sdid") == list(range(16))


def test_cli_preflight_refuses_a_bad_inventory_without_ips_with_file_line_and_hint(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text(inventory_text(extra="    adress: 10.0.0.9"))
    for output in ("json", "text"):
        res = run_cli("preflight", "-i", str(inv), "--output", output, "--run-dir", str(tmp_path / "R"))
        assert res.returncode == 2 and "Traceback" not in res.stderr + res.stdout
        assert not (tmp_path / "R").exists()
    doc = json.loads(run_cli("preflight", "-i", str(inv), "--output", "json").stdout)
    assert doc["error"] == "InventoryError" and doc["exit_code"] == 2
    (p,) = doc["problems"]
    assert (p["path"], p["line"], p["file"], p["hint"]) == ("nodes[1].adress", 10, str(inv), "did you mean 'address'?")


def test_cli_refuses_facts_collected_from_other_addresses(tmp_path):
    inv = tmp_path / "inv.yaml"
    inv.write_text(inventory_text())
    facts = facts_file({"n1": "10.0.0.1", "n2": "10.0.0.7"})
    (tmp_path / "f.json").write_text(facts.model_dump_json())
    for output in ("text", "json"):
        res = run_cli("plan", "-i", str(inv), "--facts", str(tmp_path / "f.json"), "--output", output)
        assert res.returncode == 2 and "Traceback" not in res.stderr
        assert "collected from other hosts: n2 (10.0.0.7 in the facts, 10.0.0.2 in the inventory)" in \
            res.stderr + res.stdout
    (tmp_path / "f.json").write_text(facts_file({"n1": "10.0.0.1", "n2": "10.0.0.2"}).model_dump_json())
    assert run_cli("plan", "-i", str(inv), "--facts", str(tmp_path / "f.json")).returncode == 0


# --------------------------------------------------------------------------- rules without inventory IPs

def _a3_host(name: str, pod: int, sdid0: int) -> HostFacts:
    return HostFacts(name=name, address="10.0.0.1", devices={
        p: DeviceFacts(phy_id=p, sdid=sdid0 + p, super_pod_id=pod) for p in range(16)})


def _bare_a3_inventory() -> Inventory:
    return with_engine(Inventory.model_validate({
        "cluster": {"name": "c", "hardware": "a3", "super_pod": True}, "engine": {"image": "i"},
        "model": {"name": "deepseek-r1", "quant": "w8a8", "weights_path": "/w", "served_name": "m",
                  "max_seq_len": 8192, "max_input_len": 4096, "max_batch_size": 8},
        "nodes": [{"name": "n1", "address": "10.0.0.1"}, {"name": "n2", "address": "10.0.0.2"}]}))


def test_sdid_uniqueness_uses_the_discovered_super_pods_when_the_inventory_has_none():
    inv = _bare_a3_inventory()
    same_pod = {"n1": _a3_host("n1", 0, 100), "n2": _a3_host("n2", 0, 100)}
    assert {(f.rule, f.host) for f in check_sdids(inv, same_pod)} == {("sdid", "n2")}
    two_pods = {"n1": _a3_host("n1", 0, 100), "n2": _a3_host("n2", 1, 100)}
    assert list(check_sdids(inv, two_pods)) == []
    notes = not_checked(inv, two_pods, 16)
    assert "device IPs against the inventory on n1, n2 (it lists none: the discovered ones are saved)" in notes


# --------------------------------------------------------------------------- resolve_facts

NODES = {"n1": "10.0.0.1", "n2": "10.0.0.2"}


def facts_file(nodes: dict[str, str], cluster: str = "c1", fail: bool = False) -> FactsFile:
    hosts = {n: HostFacts(name=n, address=a, devices={i: DeviceFacts(phy_id=i, ip=IpConf(
        ip=f"29.{k}.{i}.1", netmask="255.255.0.0")) for i in range(8)}) for k, (n, a) in enumerate(nodes.items())}
    findings = [{"rule": "npu-health", "severity": "FAIL", "host": "n1", "message": "x"}] if fail else []
    return FactsFile(deployctl_version="t", cluster=cluster, collected_at=datetime.now(timezone.utc).isoformat(), hosts=hosts,
                     findings=findings)


def fake_run(root: Path, hours_ago: float, *, ok: bool = True, cluster: str = "c1",
             nodes: dict[str, str] | None = None, summary: bool = True, facts: bool = True) -> Path:
    """A preflight run record as `deployctl preflight` writes it (run.json + facts.json), finished
    ``hours_ago``; ``summary=False``: a record of an older deployctl (facts.json only)."""
    when = datetime.now(timezone.utc) - timedelta(hours=hours_ago)   # now: the suite may be slow
    run_id = when.strftime("%Y%m%dT%H%M%S.%fZ") + "-preflight"
    path = root / "runs" / run_id
    path.mkdir(parents=True)
    nodes = NODES if nodes is None else nodes
    if facts:
        doc = facts_file(nodes, cluster, fail=not ok).model_copy(update={"collected_at": when.isoformat()})
        (path / "facts.json").write_text(doc.model_dump_json())
    if summary:
        (path / "run.json").write_text(json.dumps({"kind": "preflight", "id": run_id, "cluster": cluster,
                                                   "nodes": nodes, "ok": ok, "finished_at": when.isoformat(),
                                                   "facts": "facts.json"}))
    return path


@pytest.fixture
def inv(tmp_path) -> Path:
    p = tmp_path / "inv.yaml"
    p.write_text(inventory_text())
    return p


def test_resolve_facts_picks_the_latest_successful_run(inv, tmp_path):
    root = tmp_path / "R"
    fake_run(root, 5)
    latest = fake_run(root, 1)
    fake_run(root, 0.5, cluster="other-cluster", nodes={"x": "10.9.9.9"})    # another inventory's run
    fake_run(root, 0.2, facts=False)                                          # crashed: no facts
    path, note = resolve_facts(inv, root, None)
    assert path == latest / "facts.json"
    assert note == f"using device IPs and SDIDs from preflight run {latest.name} (60 min ago): {path}"


def test_resolve_facts_skips_failed_runs(inv, tmp_path):
    root = tmp_path / "R"
    good = fake_run(root, 2)
    fake_run(root, 1, ok=False)
    assert resolve_facts(inv, root, None)[0] == good / "facts.json"
    only_failed = tmp_path / "R2"
    fake_run(only_failed, 1, ok=False)
    assert resolve_facts(inv, only_failed, None) == (None, None)


def test_resolve_facts_reads_records_without_run_json(inv, tmp_path):
    root = tmp_path / "R"
    good = fake_run(root, 3, summary=False)
    fake_run(root, 1, summary=False, ok=False)         # FAIL in its findings: skipped
    path, note = resolve_facts(inv, root, None)
    assert path == good / "facts.json" and "(3.0 h ago)" in note


def test_resolve_facts_refuses_a_run_that_is_too_old(inv, tmp_path):
    root = tmp_path / "R"
    old = fake_run(root, 30)
    with pytest.raises(UsageError) as err:
        resolve_facts(inv, root, None)
    msg = err.value.render()
    assert old.name in msg and "30.0 h old (the limit is 24 h)" in msg
    assert err.value.hint == f"run `deployctl preflight -i {inv}` again, or pass --facts FILE"
    assert resolve_facts(inv, root, None, max_age_hours=48)[0] == old / "facts.json"


def test_resolve_facts_refuses_a_run_of_other_hosts(inv, tmp_path):
    root = tmp_path / "R"
    run = fake_run(root, 1, nodes={"n1": "10.0.0.1", "n2": "10.0.0.9", "n3": "10.0.0.3"})
    with pytest.raises(UsageError) as err:
        resolve_facts(inv, root, None)
    msg = err.value.render()
    assert f"{run.name} (60 min ago), cannot be used" in msg
    assert "n2 was probed at 10.0.0.9, the inventory says 10.0.0.2" in msg
    assert "n3 (10.0.0.3) is no longer in the inventory" in msg
    assert "--facts FILE" in msg
    fake_run(tmp_path / "R2", 1, nodes={"n1": "10.0.0.1"})
    with pytest.raises(UsageError, match=r"n2 \(10.0.0.2\) was not probed"):
        resolve_facts(inv, tmp_path / "R2", None)


def test_resolve_facts_explicit_wins(inv, tmp_path):
    root = tmp_path / "R"
    fake_run(root, 100)                          # would be refused as too old
    assert resolve_facts(inv, root, Path("my/facts.json")) == (Path("my/facts.json"), None)


def test_resolve_facts_none_found(inv, tmp_path):
    assert resolve_facts(inv, tmp_path / "nothing-here", None) == (None, None)
    (tmp_path / "R" / "runs" / "20250101T000000.000000Z-up").mkdir(parents=True)     # other kinds of runs
    assert resolve_facts(inv, tmp_path / "R", None) == (None, None)


def test_resolve_facts_with_a_relative_run_root(inv, tmp_path, monkeypatch):
    run = fake_run(tmp_path / "R", 1)
    monkeypatch.chdir(tmp_path)
    path, note = resolve_facts(Path("inv.yaml"), Path("R"), None)
    assert path == run / "facts.json" and path.is_absolute() and str(path) in note
    assert os.path.isfile(path)


def test_resolve_facts_of_a_broken_inventory_leaves_the_report_to_validation(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("cluster: {name: c1, hardware: a9}\nnodes: []\n")
    fake_run(tmp_path / "R", 1)
    assert resolve_facts(bad, tmp_path / "R", None) == (None, None)
    with pytest.raises(InventoryError):               # not YAML at all: the loader's message
        (tmp_path / "nope.yaml").write_text("a: [")
        resolve_facts(tmp_path / "nope.yaml", tmp_path / "R", None)


def test_the_text_report_shows_one_line_per_node_and_kind():
    from deployctl.cli.preflight import gap_lines

    devices = "    devices: [" + ", ".join(f"{{id: {i}, ip: 29.1.{i}.1}}" for i in range(16)) + "]"
    _, gaps = validate_for_discovery(raw(inventory_text("a3", "true", "dp-ep", devices)))
    notes = [{**g.to_dict(), "discovered": g.node == "n1"} for g in gaps]
    hosts = {"n1": HostFacts(name="n1", address="10.0.0.1"),
             "n2": HostFacts(name="n2", address="10.0.0.2", error_kind="timeout", error="x")}
    lines = gap_lines(notes, hosts)
    assert len(lines) == 4, lines
    assert "inv.yaml:10 nodes[1].devices[0]: device 0 on node 'n2' has no sdid (and 15 more devices) -> " \
           "NOT discovered (timeout)" in lines
    assert any(line.startswith("inv.yaml:7 nodes[0]: node 'n1' has no device IPs") and
               line.endswith("-> discovered") for line in lines)

