"""--max-model-len above the length vLLM derives from config.json is refused, as vllm serve refuses it
(vllm-project/vllm@0fc695fc6 vllm/config/model.py L2112-2249), unless --hf-overrides adds the rope scaling that
raises it or VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is set. The derivation (deployctl/core/engines/vllm_ascend/derived_len.py) is checked
on the real config.json files of tests/fixtures/checkpoints/."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

from deployctl.core.checkpoint.context import context_window, json_arg, with_overrides
from deployctl.core.engines.sglang.context_length import first_key_length
from deployctl.core.engines.vllm_ascend.derived_len import derived_length
from deployctl.core.engines.vllm_ascend.max_len import allows_long
from deployctl.core.models.model_info import ContextWindow
from deployctl.core.errors import LayoutError
from tests.core.checkpoint.quoted import FIXTURES, real
from tests.core.checkpoint.test_plan import plan_of

ROOT = Path(__file__).resolve().parents[3]
CORPUS = ROOT / "tests/conformance/vllm/configs"
YARN_X4 = ('{"text_config": {"rope_parameters": {"rope_type": "yarn", "factor": 4.0, '
           '"original_max_position_embeddings": 262144}}}')


def window(name: str) -> ContextWindow:
    cfg = real(name)
    text = cfg.get("text_config")
    return context_window(text, "text_config") if isinstance(text, dict) else context_window(cfg)


def derived(name: str, overrides: dict | None = None) -> float:
    w = window(name)
    d = derived_length(with_overrides(w, overrides) if overrides else w)
    assert d is not None
    return d.length


# --- the derivation, on the real config.json files ---------------------------------------------------------------

@pytest.mark.parametrize("name,length", [
    ("qwen3.5-397b-a17b", 262144),        # text_config.max_position_embeddings, rope_type default: no factor
    ("qwen3-32b", 40960),                 # max_position_embeddings, no rope scaling
    ("deepseek-v3", 4096 * 40),           # rope_scaling "type": "yarn": original 4096 x factor 40
    ("kimi-k2.6", 4096 * 64),             # yarn 4096 x 64
    ("deepseek-v4-flash", 65536 * 16),    # yarn 65,536 x 16 = 1,048,576
    ("glm-5.2", 1048576),                 # rope_parameters rope_type default
])
def test_derived_max_model_len_of_real_configs(name, length):
    assert derived(name) == length


def test_the_ci_yarn_override_admits_the_1m_tokens_of_qwen35():
    """vLLM-Ascend's weekly 986K configs (c70, c73): YaRN x4 over 262,144 merged into text_config.rope_parameters."""
    d = derived_length(with_overrides(window("qwen3.5-397b-a17b"), json.loads(YARN_X4)))
    assert d.length == 1048576 and d.allows(1010000) and "yarn over original_max_position_embeddings 262,144" in \
        d.describe() and "factor 4" in d.describe()


def test_overrides_merge_into_a_nested_text_config_and_replace_on_a_flat_one():
    w = window("qwen3.5-397b-a17b")
    # a factor alone merges into text_config.rope_parameters (rope_type stays default: the factor still applies)
    assert derived_length(with_overrides(w, {"text_config": {"rope_parameters": {"factor": 2.0}}})).length \
        == 524288
    # an override of the outer config leaves the language model's config alone
    assert derived_length(with_overrides(w, {"rope_scaling": {"rope_type": "yarn", "factor": 4.0}})).length \
        == 262144
    # a flat config's rope_scaling is replaced whole: DeepSeek-V3's factor 40 becomes 2 over the same 4096
    ds = with_overrides(window("deepseek-v3"), {"rope_scaling": {"type": "yarn", "factor": 2,
                                                                    "original_max_position_embeddings": 4096}})
    assert derived_length(ds).length == 8192
    # flat keys update the length keys
    assert derived_length(with_overrides(window("qwen3-32b"), {"max_position_embeddings": 65536})).length \
        == 65536


def test_vllm_rules_for_keys_and_rope_types():
    assert derived_length(context_window({"seq_length": 8192, "max_position_embeddings": 32768})).length == 8192
    mml = derived_length(context_window({"max_position_embeddings": 4096, "model_max_length": 131072}))
    assert mml.key == "model_max_length" and mml.length == 131072
    assert derived_length(context_window({"hidden_size": 1})) is None          # no key: vLLM takes any
    llama3 = {"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}
    assert derived_length(context_window(llama3)).length == 131072
    gemma = {"max_position_embeddings": 131072, "model_type": "gemma3_text", "rope_scaling": {"factor": 8.0}}
    assert derived_length(context_window(gemma)).length == 131072
    yarn_default = {"max_position_embeddings": 32768, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}}
    assert derived_length(context_window(yarn_default)).length == 131072   # original defaults to max_pos
    nested = {"max_position_embeddings": 8192, "rope_parameters": {
        "full_attention": {"rope_type": "linear", "factor": 2.0}, "sliding_attention": {"rope_type": "default"}}}
    assert derived_length(context_window(nested)).length == 16384


def test_sglang_derivation_for_its_engine():
    """sglang 0.5.23 get_context_length: the first key, times the factor unless original_max_position_embeddings."""
    assert first_key_length(window("deepseek-v3")) == 163840
    assert first_key_length(window("qwen3.5-397b-a17b")) == 262144
    assert first_key_length(context_window({"max_position_embeddings": 32768,
                                                 "rope_scaling": {"type": "yarn", "factor": 4.0}})) == 131072
    assert first_key_length(context_window({})) == 2048


def test_args_and_env_as_vllm_reads_them():
    assert json_arg(["--hf-overrides", '{"a": 1}', "--hf-overrides={\"b\": 2}"], "--hf-overrides") == {"b": 2}
    assert json_arg(["--hf-overrides", "not json"], "--hf-overrides") is None
    assert json_arg([], "--hf-overrides") is None
    assert allows_long({"VLLM_ALLOW_LONG_MAX_MODEL_LEN": " True "})
    assert allows_long({"VLLM_ALLOW_LONG_MAX_MODEL_LEN": 1})
    assert not allows_long({"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "0"}) and not allows_long({})


# --- the refusal, on plans -----------------------------------------------------------------------------------------

def c70(drop_overrides: bool = False, env: dict | None = None, role_env: dict | None = None) -> str:
    """c70's inventory (Qwen3.5-397B at 1,010,000 tokens, 1P1D), optionally without its --hf-overrides."""
    doc = yaml.safe_load((CORPUS / "c70.yaml").read_text())
    inv = copy.deepcopy(doc["inventory"])
    inv["model"]["config_path"] = str(ROOT / inv["model"]["config_path"])
    if drop_overrides:
        args = inv["engine"]["args"]
        i = args.index("--hf-overrides")
        del args[i:i + 2]
    inv["engine"]["env"].update(env or {})
    for role, e in (role_env or {}).items():
        inv["layout"][role]["env"] = e
    return yaml.safe_dump(inv)


def test_1m_tokens_of_qwen35_without_rope_scaling_is_refused_naming_both_numbers():
    with pytest.raises(LayoutError) as exc:
        plan_of(c70(drop_overrides=True))
    text = exc.value.render()
    assert "model.max_seq_len 1,010,000" in text and "262,144" in text
    assert "max_position_embeddings 262,144, no rope scaling" in text and "text_config" in text
    assert "vllm/config/model.py L2112-2249" in text and "prefill instances" in text and "decode instances" in text
    assert "--hf-overrides" in text and '"factor": 4.0' in text and "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1" in text
    assert "lower model.max_seq_len to 262,144" in text


def test_1m_tokens_of_qwen35_with_the_ci_yarn_override_plans():
    assert plan_of(c70())


def test_vllm_allow_long_max_model_len_lets_it_through_per_role():
    assert plan_of(c70(drop_overrides=True, env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}))
    with pytest.raises(LayoutError) as exc:                # the prefill's env only: the decode is still refused
        plan_of(c70(drop_overrides=True, role_env={"prefill": {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"}}))
    text = exc.value.render()
    assert "decode instances" in text and "prefill instances" not in text


def qwen3_32b(max_seq_len: int, args: str = "[]", env: str = "{}") -> str:
    return f"""
cluster: {{name: t, hardware: a2}}
engine: {{kind: vllm-ascend, image: 'quay.io/ascend/vllm-ascend:v0.23.0', args: {args}, env: {env}}}
model: {{name: my-qwen3-32b, quant: bf16, weights_path: /w, served_name: m, config_path: '{FIXTURES / "qwen3-32b"}',
        max_seq_len: {max_seq_len}, max_input_len: 4096, max_batch_size: 4}}
layout: {{preset: single, tp: 8}}
nodes:
  - {{name: n0, address: 10.0.0.1, interface: eth0}}
"""


def test_a_text_model_takes_rope_scaling_from_hf_overrides():
    assert plan_of(qwen3_32b(40960))
    with pytest.raises(LayoutError) as exc:
        plan_of(qwen3_32b(65536))
    text = exc.value.render()
    assert "model.max_seq_len 65,536" in text and "40,960" in text and "engine.args" in text
    yarn = json.dumps({"rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}})
    assert plan_of(qwen3_32b(131072, args=json.dumps(["--hf-overrides", yarn])))
    assert plan_of(qwen3_32b(65536, env="{VLLM_ALLOW_LONG_MAX_MODEL_LEN: 'true'}"))


def test_a_catalog_model_without_checkpoint_files_is_not_checked(monkeypatch):
    from deployctl.core import catalog
    from deployctl.core.engines.vllm_ascend.max_len import max_len_findings

    plan = plan_of(qwen3_32b(40960))
    info = catalog.model_of(plan.inventory)
    monkeypatch.setattr(catalog, "model_of", lambda inv: info.model_copy(update={"context": None}))
    assert max_len_findings(plan.model_copy(update={"inventory": plan.inventory.model_copy(
        update={"model": plan.inventory.model.model_copy(update={"max_seq_len": 10 ** 6})})}), lambda r, v: {}) == []
