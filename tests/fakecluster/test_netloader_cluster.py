"""engine.netloader end to end on the simulated cluster: two single-server vLLM-Ascend instances (2 x A2); the first
starts as rendered (a seed: weights from disk, then its weight servers), the second is rendered with the first as
its live peer (Plan.weight_peers, what scaling sets) and copies its weights from it, measurably faster than from
disk. The stand-in's times: disk = engine_slow_start, from a peer = engine_load_from_peer_s (fake_bin/
netloader_fake.py)."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import time

import pytest
import yaml

from deployctl.app.inventory import validate_inventory
from deployctl.core.render import render_artifacts
from deployctl.core.sizing.planner import plan_layout
from deployctl.io.inventory_file import load_inventory
from fakecluster import FakeCluster, default_cluster
from fakecluster.fixtures import require_fake_cluster_support

IMAGE = "quay.io/ascend/vllm-ascend:v0.13.0"
WEIGHTS = "/data/models/Qwen3-235B-A22B-W8A8"
DISK_S, PEER_S = 5.0, 0.3
NAME = "deployctl_fake-a2-2_vllm"
READY = "Application startup complete."


@pytest.fixture(scope="module")
def fleet(tmp_path_factory):
    require_fake_cluster_support()
    specs = default_cluster(2, "a2", weights_dir=WEIGHTS, images=(IMAGE,), engine_slow_start=DISK_S,
                            engine_load_from_peer_s=PEER_S)
    fc = FakeCluster(specs, tmp_path_factory.mktemp("fakecluster-netloader")).start()
    try:
        yield fc, tmp_path_factory.mktemp("netloader")
    finally:
        fc.stop()


def inventory(fc: FakeCluster, work) -> str:
    doc = yaml.safe_load(fc.inventory_snippet())
    for n in doc["nodes"]:
        n["interface"] = "eth0"             # the fake node's NIC
    doc.update(engine={"kind": "vllm-ascend", "image": IMAGE, "netloader": {"enabled": True}},
               model={"name": "qwen3-235b-a22b", "quant": "w8a8", "weights_path": WEIGHTS, "served_name": "qwen3",
                      "max_seq_len": 8192, "max_input_len": 4096, "max_batch_size": 16},
               layout={"preset": "single", "replicas": 2})
    path = work / "inventory.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return str(path)


def write_tree(artifacts, out) -> None:
    for a in artifacts:
        p = out / a.path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(a.content)
        os.chmod(p, a.mode)


def push_and_start(fc: FakeCluster, node: str, folder, dest: str) -> None:
    tar = subprocess.run(["tar", "-C", str(folder), "-cf", "-", "."], capture_output=True, check=True).stdout
    r = subprocess.run(fc.ssh_args(node) + [f"rm -rf {dest} && mkdir -p {dest} && tar -C {dest} -xf - && "
                                            f"bash {dest}/start.sh"], input=tar, capture_output=True, timeout=60)
    assert r.returncode == 0, r.stdout.decode() + r.stderr.decode()


def log(fc: FakeCluster, node: str) -> str:
    try:
        text = fc.node(node).host_path(f"/var/lib/fakedocker/{NAME}/container.log").read_text()
    except OSError:
        return ""
    return "".join(json.loads(line)["log"] for line in text.splitlines() if line.strip())


def started(fc: FakeCluster, node: str, folder, dest: str, timeout: float = 120) -> float:
    """Seconds from the engine's first log line until the API process says it serves, by the container log's own
    times: not from start.sh, whose ssh and interpreter starts take seconds more on a loaded machine."""
    t0 = time.monotonic()
    push_and_start(fc, node, folder, dest)
    while READY not in log(fc, node):
        assert time.monotonic() - t0 < timeout, log(fc, node)
        time.sleep(0.1)
    path = fc.node(node).host_path(f"/var/lib/fakedocker/{NAME}/container.log")
    entries = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    ready = next(e for e in entries if READY in e["log"])
    return log_time(ready["time"]) - log_time(entries[0]["time"])


def log_time(stamp: str) -> float:
    """docker's RFC 3339 time with nanoseconds, as seconds."""
    whole, frac = stamp.rstrip("Z").split(".")
    return datetime.datetime.fromisoformat(whole).replace(tzinfo=datetime.timezone.utc).timestamp() + float("0." + frac)


def test_a_second_instance_loads_its_weights_from_the_first_faster_than_from_disk(fleet):
    fc, work = fleet
    plan = plan_layout(validate_inventory(load_inventory(inventory(fc, work))))
    first, second = (i.name for i in plan.instances)
    out = work / "rendered"
    write_tree(render_artifacts(plan.model_copy(update={"weight_peers": {second: (first,)}})), out)
    node1, node2 = plan.instance(first).nodes[0], plan.instance(second).nodes[0]
    dest = "/var/lib/deployctl/test/netloader"

    seed = started(fc, node1, out / node1, dest)
    text = log(fc, node1)
    assert seed >= DISK_S, text
    assert "Did not get valid source info, use DefaultModelLoader" in text
    ip1 = fc.node(node1).ip
    for rank in range(8):
        assert f"Start elastic Netloader server, rank: {rank}, listen port: {ip1}:{7000 + rank}" in text, text
        assert f"Elastic server started, rank: {rank}, group: netloader" in text

    new = started(fc, node2, out / node2, dest)
    text = log(fc, node2)
    assert new < seed - DISK_S / 2, (new, seed, text)        # measurably faster than disk
    assert "DefaultModelLoader" not in text
    for rank in range(8):
        assert f"Finish connection to server: {ip1}:{7000 + rank}" in text, text
        assert f"Netloader P2P load time: {PEER_S:.3f}, device_id: {rank}, group: netloader" in text
        assert f"Elastic server started, rank: {rank}, group: netloader" in text      # a seed in turn
    assert f"Accept new connection from {fc.node(node2).ip}:" in log(fc, node1)
