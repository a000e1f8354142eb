"""Settings published MindIE deployments use, expressible in the inventory (issue 22 deliverable 5; issue 24's
model-level speculative setting). Expected values are the published ones, with their sources."""

from __future__ import annotations

import json

import yaml

from conftest import EXAMPLES, run_cli


def _render(tmp_path, example: str, edit, target: str = "render"):
    doc = yaml.safe_load((EXAMPLES / example).read_text())
    edit(doc)
    tmp_path.mkdir(parents=True, exist_ok=True)
    inv = tmp_path / example
    inv.write_text(yaml.safe_dump(doc))
    (tmp_path / "hccn").symlink_to(EXAMPLES / "hccn")
    args = ("render", "-i", str(inv), "-o", str(tmp_path / "out")) if target == "render" else ("validate", "-i", str(inv))
    return doc, run_cli(*args), tmp_path / "out"


def _model_config(out, node="node1"):
    return json.loads((out / node / "config.json").read_text())["BackendConfig"]["ModelDeployConfig"]["ModelConfig"][0]


def test_engine_config_merges_into_model_config_entry(tmp_path):
    """{ModelConfig: [{models: ...}]} adds to ModelConfig[0] and keeps the rendered entry (MindIE-LLM
    A2_double_machine.md L51-56 adds `models` and `ignore_eos` next to modelName/worldSize/tp...)."""
    def edit(doc):
        doc["engine"]["config"] = {"BackendConfig": {"ModelDeployConfig": {"ModelConfig": [
            {"ignore_eos": True, "models": {"deepseekv2": {"enable_mlapo_prefetch": True,
                                                           "kv_cache_options": {"enable_nz": True}}}}]}}}

    doc, r, out = _render(tmp_path, "a2-2x8-tp-pp.yaml", edit)
    assert r.returncode == 0, r.stdout + r.stderr
    mc = _model_config(out)
    assert mc["ignore_eos"] is True and mc["models"]["deepseekv2"]["kv_cache_options"] == {"enable_nz": True}
    assert (mc["modelName"], mc["worldSize"], mc["modelWeightPath"]) == (
        doc["model"]["served_name"], 8, doc["model"]["weights_path"])


def test_merge_by_position():
    from deployctl.core.input.merge import merge_by_position

    base = {"a": [{"x": 1, "y": 2}, {"x": 3}], "ids": [[0, 1]], "s": 1}
    got = merge_by_position(base, {"a": [{"y": 5}], "ids": [[2]], "t": 2})
    assert got == {"a": [{"x": 1, "y": 5}, {"x": 3}], "ids": [[2]], "s": 1, "t": 2}
    assert merge_by_position({"a": [{"x": 1}]}, {"a": [{}, {"z": 1}]}) == {"a": [{"x": 1}, {"z": 1}]}


def test_mtp_renders_plugin_params_as_published(tmp_path):
    """deepseek_v3.2.md@8b4871ad L192: "plugin_params": "{\\"plugin_type\\":\\"mtp\\",\\"num_speculative_tokens\\":2}"."""
    def edit(doc):
        doc["model"]["speculative"] = {"method": "mtp", "tokens": 2}

    _, r, out = _render(tmp_path, "a2-2x8-v32-dp-ep.yaml", edit)
    assert r.returncode == 0, r.stdout + r.stderr
    assert _model_config(out)["plugin_params"] == '{"plugin_type":"mtp","num_speculative_tokens":2}'


def test_mindie_refuses_eagle_and_too_many_mtp_tokens(tmp_path):
    """MindIE-LLM plugin_utils.py@8b4871ad: plugins la/memory_decoding/prefix_cache/mtp/splitfuse only (L127-135);
    mtp num_speculative_tokens in [0, 5] (L50-55)."""
    def eagle(doc):
        doc["model"]["speculative"] = {"method": "eagle3", "tokens": 2, "draft_weights_path": "/data/models/d"}

    def many(doc):
        doc["model"]["speculative"] = {"method": "mtp", "tokens": 6}

    _, r, _ = _render(tmp_path / "a", "a2-2x8-tp-pp.yaml", eagle, "validate")
    assert r.returncode != 0 and "plugin_utils.py" in r.stdout + r.stderr and "eagle3" in r.stdout + r.stderr
    _, r, _ = _render(tmp_path / "b", "a2-2x8-tp-pp.yaml", many, "validate")
    assert r.returncode != 0 and "at most 5" in r.stdout + r.stderr


def test_mtp_refused_on_a_model_without_mtp_layers(tmp_path):
    def edit(doc):
        doc["model"]["speculative"] = {"method": "mtp", "tokens": 1}

    _, r, _ = _render(tmp_path, "vllm-a3-1p1d-qwen3.yaml", edit, "validate")
    assert r.returncode != 0 and "no MTP layers" in r.stdout + r.stderr


def test_vllm_speculative_config(tmp_path):
    """vllm-ascend's CI passes EAGLE3 as {"method":"eagle3","model":<draft>,"num_speculative_tokens":3}
    (nightly Kimi-K2_5-W4A8-A2-dual-nodes.yaml L44), the same on P and D."""
    def edit(doc):
        doc["model"]["speculative"] = {"method": "eagle3", "tokens": 3, "draft_weights_path": "/data/models/eagle3"}

    doc, r, out = _render(tmp_path, "vllm-a3-1p1d-qwen3.yaml", edit)
    assert r.returncode == 0, r.stdout + r.stderr
    seen = 0
    for args in out.glob("*/serve-*.args"):
        argv = args.read_text().splitlines()
        spec = json.loads(argv[argv.index("--speculative-config") + 1])
        assert spec == {"method": "eagle3", "model": "/data/models/eagle3", "num_speculative_tokens": 3}
        seen += 1
    assert seen >= 2


def test_ms_settings_merge_into_coordinator_and_controller(tmp_path):
    """MindIE-Motor user_config.json@5dfb024e L108-116: request_limit.single_node_max_requests 4096,
    exception_config.infer_timeout 3600; controller digs_prefill_slo 1000 (L91)."""
    def edit(doc):
        doc["engine"]["ms"] = {"coordinator": {"request_limit": {"single_node_max_requests": 4096},
                                               "exception_config": {"infer_timeout": 3600}},
                               "controller": {"digs_prefill_slo": 1000, "default_p_rate": 1, "default_d_rate": 1}}

    doc, r, out = _render(tmp_path, "a3-pd-2p1d.yaml", edit)
    assert r.returncode == 0, r.stdout + r.stderr
    ms = out / doc["nodes"][0]["name"]
    coord = json.loads((ms / "ms_coordinator.json").read_text())
    ctrl = json.loads((ms / "ms_controller.json").read_text())
    assert coord["request_limit"]["single_node_max_requests"] == 4096
    assert coord["exception_config"]["infer_timeout"] == 3600
    assert coord["exception_config"]["schedule_timeout"] == 600        # Motor's shipped value kept
    assert (ctrl["digs_prefill_slo"], ctrl["default_p_rate"], ctrl["default_d_rate"]) == (1000, 1, 1)


def test_ms_settings_owned_keys_refused(tmp_path):
    def edit(doc):
        doc["engine"]["ms"] = {"coordinator": {"http_config": {"predict_port": "1025"}},
                               "controller": {"cluster_port": 1}}

    _, r, _ = _render(tmp_path, "a3-pd-2p1d.yaml", edit, "validate")
    text = r.stdout + r.stderr
    assert r.returncode != 0 and "http_config.predict_port is set by deployctl" in text and "cluster_port" in text
