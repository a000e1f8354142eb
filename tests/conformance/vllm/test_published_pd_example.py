"""Done-when of issue 24: the published PD deployment with eager prefill, graph-captured decode and different
batch limits and HCCL buffers per role (inventories/examples/vllm-a3-pd-roles-qwen3.yaml) renders what vllm-ascend's
weekly CI runs. The expected side is the CI config's own values as configs/c13.yaml records them (upstream_facts,
each with its line of QWEN3_235B_PD_3_5K_1_5k.yaml @182b75ea), never deployctl's output. Kubernetes runs the same
files: tests/backends/k8s/test_chart_vllm.py checks every pod of this example against its bare-metal tree.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from conftest import EXAMPLES, run_cli

HERE = Path(__file__).resolve().parent
FACTS = yaml.safe_load((HERE / "configs" / "c13.yaml").read_text())["upstream_facts"]
# what differs per role in the CI config (the rest is the same for both roles, or placement the corpus compares)
PER_ROLE = ("--max-model-len", "--max-num-batched-tokens", "--max-num-seqs", "--gpu-memory-utilization", "--seed")


def ci_role(role: str) -> dict:
    index = FACTS["routing"]["prefiller" if role == "prefill" else "decoder"][0]
    node = next(n for n in FACTS["nodes"] if n["index"] == index)
    argv = [str(a) for a in node["argv_template"]]
    out = {flag: argv[argv.index(flag) + 1] for flag in PER_ROLE}
    out["eager"] = "--enforce-eager" in argv
    out["no prefix caching"] = "--no-enable-prefix-caching" in argv
    out["compilation"] = json.loads(argv[argv.index("--compilation-config") + 1]) if "--compilation-config" in argv \
        else None
    extra = json.loads(argv[argv.index("--additional-config") + 1])
    # only keys vllm-ascend 0.13+ reads (the stale ones are c13's listed differences, reason C)
    out["lmhead tp"] = extra.get("finegrained_tp_config", {}).get("lmhead_tensor_parallel_size")
    out["tp"], out["dp"] = str(node["topology"]["tp_size"]), str(node["topology"]["dp_size"])
    out["HCCL_BUFFSIZE"] = str(node["env"]["HCCL_BUFFSIZE"])
    return out


def rendered_role(out: Path, node: str) -> dict:
    argv = (out / node / "serve-0.args").read_text().splitlines()
    res = {flag: argv[argv.index(flag) + 1] for flag in PER_ROLE}
    res["eager"] = "--enforce-eager" in argv
    res["no prefix caching"] = "--no-enable-prefix-caching" in argv
    res["compilation"] = json.loads(argv[argv.index("--compilation-config") + 1]) if "--compilation-config" in argv \
        else None
    extra = json.loads(argv[argv.index("--additional-config") + 1]) if "--additional-config" in argv else {}
    res["lmhead tp"] = extra.get("finegrained_tp_config", {}).get("lmhead_tensor_parallel_size")
    res["tp"], res["dp"] = argv[argv.index("--tensor-parallel-size") + 1], argv[argv.index("--data-parallel-size") + 1]
    env = dict(line.split("=", 1) for line in (out / node / "env").read_text().splitlines()
               if line and not line.startswith("#"))
    res["HCCL_BUFFSIZE"] = env["HCCL_BUFFSIZE"]
    return res


@pytest.fixture(scope="module")
def out(tmp_path_factory) -> Path:
    target = tmp_path_factory.mktemp("pd-roles") / "out"
    r = run_cli("render", "-i", str(EXAMPLES / "vllm-a3-pd-roles-qwen3.yaml"), "-o", str(target))
    assert r.returncode == 0, r.stdout + r.stderr
    return target


@pytest.mark.parametrize("role, node", [("prefill", "p1"), ("decode", "d1"), ("decode", "d2")])
def test_each_role_runs_the_published_settings(out, role, node):
    assert rendered_role(out, node) == ci_role(role)


def test_the_roles_differ_as_published():
    p, d = ci_role("prefill"), ci_role("decode")
    assert p["eager"] and not d["eager"] and d["compilation"]["cudagraph_mode"] == "FULL_DECODE_ONLY"
    assert p["--max-num-seqs"] != d["--max-num-seqs"] and p["HCCL_BUFFSIZE"] != d["HCCL_BUFFSIZE"]
