"""MindIE 3.0 starts from its wheels (issue 22 item 2): a 1P1D split with MindIE-MS on three simulated A3 hosts (decode on two)
whose image is a 3.0 image, which has no run package under /usr/local/Ascend/mindie at all.

What the stand-in image holds and refuses comes from upstream (tests/fakecluster/fake_bin/docker.py
make_wheel_layer, engine.py ms_coordinator): `mindie_llm_server` (MindIE-LLM v3.0.0 setup.py L129-134) and
`mindie_motor_coordinator <predict_ip> <manage_ip>` (Motor coordinator/main.cpp L22-45 since v3.0.0.beta.2:
four arguments exit with "Incorrect usage"). Before the version-true layouts deployctl started
`.../mindie-service/bin/mindieservice_daemon` and passed the coordinator four arguments.
"""

from __future__ import annotations

import json

from conftest import run_cli
from fakecluster import default_cluster
from fakecluster.spec import DEFAULT_WEIGHTS_DIR
from test_up_cluster import chat, up

IMAGE3 = "swr.cn-south-1.myhuaweicloud.com/ascendhub/mindie:3.0.0-800I-A3-py311-openeuler24.03-lts"
TAIL = f"""\
engine:
  image: {IMAGE3}
  version: "3.0"
model: {{name: deepseek-r1, quant: w4a8, weights_path: {DEFAULT_WEIGHTS_DIR}, served_name: ds-r1,
        max_seq_len: 8192, max_input_len: 4096, max_batch_size: 32}}
layout:
  preset: pd-split
  prefill: {{nodes: [node1]}}
  decode: {{nodes: [node2, node3]}}
"""


def test_mindie_3_pd_split_starts_from_the_wheels(fake_cluster_factory, tmp_path):
    fc = fake_cluster_factory(default_cluster(3, "a3", images=[IMAGE3]))
    inv = tmp_path / "inv.yaml"
    inv.write_text(fc.inventory_snippet() + TAIL)
    res, doc = up(inv, tmp_path / "runs")
    assert res.returncode == 0 and doc["status"] == "successful", res.stdout[-4000:] + res.stderr[-4000:]
    assert chat(fc.node("node1").ip, 1035)["choices"][0]["message"]["content"]
    # the 3.0 image has no run package: the servers that answered were started through the wheel's entry point
    names = fc.ssh("node1", "docker ps --format '{{.Names}}'", check=True).stdout.split()
    engine = next(n for n in names if n.endswith("mindie"))
    assert fc.ssh("node1", f"docker exec {engine} ls /usr/local/Ascend/mindie").returncode != 0
    # what really runs: the coordinator with its two addresses (argv of the stand-in, as ps shows it)
    ip = fc.node("node1").ip
    ps = fc.ssh("node1", "ps -eo args", check=True).stdout
    coordinator = [line for line in ps.splitlines() if "engine.py ms_coordinator" in line and ip in line]
    assert [line.split("ms_coordinator", 1)[1].split() for line in coordinator] == [[ip, ip]], coordinator
    st = run_cli("status", "-i", str(inv), "--output", "json")
    assert st.returncode == 0, st.stdout + st.stderr
    assert {r["engine"] for r in json.loads(st.stdout)["nodes"]} == {"running"}

