"""A dense model (Qwen3-32B, from its real config.json) is shown as dense: no expert degrees or expert weight rows
in `plan`, weight rows that add up to the total, and `recommend` layouts without experts and without the same
deployment twice (DP1 is `single`)."""

from __future__ import annotations

import re

from conftest import ROOT, run_cli

INVENTORY = """\
cluster: {name: q32, hardware: a2}
engine: {kind: vllm-ascend, image: "quay.io/ascend/vllm-ascend:v0.13.0"}
model: {name: qwen3-32b, quant: bf16, config_path: CONFIG, weights_path: /data/q32, served_name: q,
        max_seq_len: 8192, max_input_len: 4096, max_batch_size: 32}
layout: {preset: single}
nodes:
  - {name: n1, address: 10.0.0.2}
"""


def _inventory(tmp_path):
    path = tmp_path / "q32.yaml"
    path.write_text(INVENTORY.replace("CONFIG", str(ROOT / "tests" / "fixtures" / "checkpoints" / "qwen3-32b")))
    return path


def test_plan_shows_a_dense_model_as_dense(tmp_path):
    res = run_cli("plan", "-i", str(_inventory(tmp_path)), cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert "moe_tp" not in res.stdout and "routed experts" not in res.stdout and "shared experts" not in res.stdout
    assert "over the experts" not in res.stdout and "EP dispatch" not in res.stdout       # no expert assumptions
    total = float(re.search(r"weights resident\s+│\s+([0-9.]+) GB", res.stdout).group(1))
    parts = [float(x) for x in re.findall(r"│\s+(?:dense FFN|attention|embedding \+ lm_head)\s+│\s+([0-9.]+) GB",
                                          res.stdout)]
    assert len(parts) == 3 and abs(sum(parts) - total) <= 0.06, (parts, total)


def test_a_moe_model_keeps_its_expert_rows(tmp_path):
    res = run_cli("plan", "-i", str(ROOT / "inventories" / "sample.yaml"), cwd=tmp_path)
    assert res.returncode == 0 and "moe_tp / moe_ep" in res.stdout and "routed experts" in res.stdout


def test_recommend_proposes_dense_layouts_without_experts(tmp_path):
    res = run_cli("recommend", "-i", str(_inventory(tmp_path)), "--output", "json", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    import json

    shapes = [c["shape"] for c in json.loads(res.stdout)["candidates"]]
    assert shapes and not any("experts" in s for s in shapes), shapes
    assert "single: 1 server: TP8" in shapes and not any(s.startswith("dp: 1 server: TP8") for s in shapes), shapes
    assert any("copies of the model, TP" in s for s in shapes), shapes
