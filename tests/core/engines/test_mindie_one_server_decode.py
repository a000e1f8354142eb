"""A distributed decode instance on one server (issue 22 item 2): MindIE accepts it, so deployctl does too.

MindIE-LLM's server_count range [2, 60] (ranktable_config.cpp@8b4871ad L259-263) is checked only when
``IsMultiNodeInfer()`` (config_manager_impl.cpp L307-308), which is ``BackendConfig.multiNodesInferEnabled``
(L171-174); a distributed DP server sets multiNodesInferEnabled false and distributedEnable true, so its rank
table is read (L129-135) but never range-checked. MindIE-Motor's deployer allows a one-pod distributed decode
instance (utils/validate_config.py@5dfb024e L48, L55: single_d_instance_pod_num 1..20, decode_distribute_enable
0..1). The encoded checks must therefore stay silent on a one-server table for a DP server, and refuse it for a
multi-node (multiNodesInferEnabled) config."""

from __future__ import annotations

import json

from conftest import ROOT, run_cli
from deployctl.core.engines.mindie.acceptance import evaluate

D6 = ROOT / "tests" / "conformance" / "mindie" / "inventories" / "d6-a3-pd-4p1-1d4.yaml"


def _decode_files(tmp_path):
    out = tmp_path / "out"
    r = run_cli("render", "-i", str(D6), "-o", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    config = json.loads((out / "d1" / "config1.json").read_text())
    table = json.loads((out / "d1" / "ranktable.json").read_text())
    one = dict(table, server_count="1", server_list=table["server_list"][:1])
    return config, one


def test_one_server_table_is_accepted_for_a_distributed_dp_server(tmp_path):
    config, one = _decode_files(tmp_path)
    assert config["BackendConfig"]["multiNodesInferEnabled"] is False
    assert config["BackendConfig"]["ScheduleConfig"]["distributedEnable"] is True
    env = {"RANK_TABLE_FILE": "/etc/deployctl/ranktable.json"}
    refused = [r for r in evaluate(config, "3.0", ranktable=one, env=env) if r.doc == "ranktable"]
    assert refused == []


def test_the_same_table_is_refused_for_a_multi_node_instance(tmp_path):
    config, one = _decode_files(tmp_path)
    multi = json.loads(json.dumps(config))
    multi["BackendConfig"]["multiNodesInferEnabled"] = True
    env = {"RANK_TABLE_FILE": "/etc/deployctl/ranktable.json"}
    refused = [r for r in evaluate(multi, "3.0", ranktable=one, env=env) if r.key == "server_count"]
    assert refused and "[2, 60]" in refused[0].message and "ranktable_config.cpp L259-263" in refused[0].source
