"""vLLM-Ascend 0.23's rules, each with its source line: decode context parallel on both roles of a sparse-attention
P/D split or on neither (vllm-project/vllm-ascend@50e87d63 docs/source/user_guide/release_notes.md L139, #14322), the
removed ASCEND_BUFFER_POOL (L112, #13834; replacements docs/source/user_guide/feature_guide/kv_pool.md@5cb98caa
L86-93) and the removed --additional-config key enable_sparse_c8 (release_notes.md@5cb98caa L108, #12351)."""

from __future__ import annotations

from pathlib import Path

import pytest

from deployctl.core.errors import InventoryError, LayoutError
from tests.core.checkpoint.quoted import FIXTURES
from tests.core.checkpoint.test_plan import plan_of

ROOT = Path(__file__).resolve().parents[3]


def pd(model: str, config: Path | None, prefill_args: list[str], decode_args: list[str], *, env: str = "",
       additional: str = "", version: str = "0.23") -> str:
    """A 1P1D split on four A3 servers (GLM5.2.md's shape: P DP4 x TP8 on two, D DP4 x TP8 on two)."""
    cfg = f", config_path: '{config}'" if config else ""
    nodes = "\n".join(f"  - {{name: n{k}, address: 10.0.{k}.1, interface: eth0}}" for k in range(4))
    return f"""
cluster: {{name: t, hardware: a3}}
engine: {{kind: vllm-ascend, image: 'quay.io/ascend/vllm-ascend:v{version}.0-a3'{env}{additional}}}
model: {{name: {model}, quant: w8a8, weights_path: /w, served_name: m{cfg},
        max_seq_len: 8192, max_input_len: 4096, max_batch_size: 16}}
layout:
  preset: pd-split
  prefill: {{nodes: [n0, n1], tp: 8, dp: 4, engine: {{args: {prefill_args}}}}}
  decode: {{nodes: [n2, n3], tp: 8, dp: 4, engine: {{args: {decode_args}}}}}
nodes:
{nodes}
"""


GLM = ("my-glm-5.2", FIXTURES / "glm-5.2")


@pytest.mark.parametrize("model,config", [GLM, ("deepseek-v3.2", None)], ids=["glm-5.2", "deepseek-v3.2"])
def test_dcp_on_one_role_of_a_sparse_attention_split_is_refused_citing_the_release_notes(model, config):
    with pytest.raises(LayoutError) as exc:
        plan_of(pd(model, config, ["--decode-context-parallel-size", "8"], []))
    text = exc.value.render()
    assert "layout.prefill.engine.args" in text and "prefill DCP 8, decode DCP 1" in text
    assert "release_notes.md L139 (#14322" in text and "to both roles" in text
    with pytest.raises(LayoutError) as exc:
        plan_of(pd(model, config, [], ["--decode-context-parallel-size=8"]))
    assert "layout.decode.engine.args" in exc.value.render() and "prefill DCP 1, decode DCP 8" in exc.value.render()


@pytest.mark.parametrize("model,config", [GLM, ("deepseek-v3.2", None)], ids=["glm-5.2", "deepseek-v3.2"])
def test_dcp_on_both_roles_or_on_neither_plans(model, config):
    assert plan_of(pd(model, config, ["--decode-context-parallel-size", "8"], ["--decode-context-parallel-size", "8"]))
    assert plan_of(pd(model, config, [], []))


def test_a_dense_attention_model_may_split_dcp_unevenly():
    """The rule is the sparse-attention (SFA) models' (vllm_ascend/utils.py@5cb98caa L114-122): GQA Qwen3 is not."""
    assert plan_of(pd("qwen3-235b-a22b", None, ["--decode-context-parallel-size", "2"], []))


def test_ascend_buffer_pool_is_refused_on_0_23_with_its_replacements():
    with pytest.raises(InventoryError) as exc:
        plan_of(pd(*GLM, [], [], env=", env: {ASCEND_BUFFER_POOL: '4:8'}"))
    text = exc.value.render()
    assert "no longer reads ASCEND_BUFFER_POOL" in text and "release_notes.md@50e87d63 L112" in text
    assert "ASCEND_ENABLE_USE_FABRIC_MEM=1" in text and "HCCL_INTRA_ROCE_ENABLE=1" in text


def test_enable_sparse_c8_is_refused_on_0_23_naming_the_two_keys_that_replace_it():
    with pytest.raises(InventoryError) as exc:
        plan_of(pd(*GLM, [], [], additional=", additional_config: {enable_sparse_c8: true}"))
    text = exc.value.render()
    assert "no longer reads --additional-config key 'enable_sparse_c8'" in text
    assert "release_notes.md@5cb98caa L108" in text and "enable_sparse_sfa_c8" in text and "enable_sparse_li_c8" in text
    # 0.18 reads it (flags/vllm-ascend-0.18.0.json)
    assert plan_of(pd(*GLM, [], [], additional=", additional_config: {enable_sparse_c8: true}", version="0.18"))


def test_enable_dsa_cp_without_sequence_parallel_is_refused_on_0_23():
    """vllm_ascend/utils.py@5cb98caa L1531-1534: "DSA CP requires SP to be enabled" (enable_flashcomm1,
    VLLM_ASCEND_ENABLE_FLASHCOMM1=1, or shared-expert DP: enable_sp L903-929)."""
    dsa = ["--decode-context-parallel-size", "1"]
    text = pd(*GLM, dsa, dsa).replace("prefill: {nodes: [n0, n1], tp: 8, dp: 4, engine: {args:",
                                      "prefill: {nodes: [n0, n1], tp: 8, dp: 4, engine: {additional_config: "
                                      "{enable_dsa_cp: true}, args:")
    with pytest.raises(LayoutError) as exc:
        plan_of(text)
    err = exc.value.render()
    assert "layout.prefill.engine.additional_config.enable_dsa_cp" in err and "utils.py L1531-1534" in err
    assert "layout.decode" not in err
    assert plan_of(text.replace("{enable_dsa_cp: true}", "{enable_dsa_cp: true, enable_flashcomm1: true}"))
    assert plan_of(text.replace("{enable_dsa_cp: true}", "{enable_dsa_cp: true, enable_shared_expert_dp: true}"))
    assert plan_of(text.replace("version: '0.23'", "") .replace("v0.23.0-a3", "v0.18.0-a3")
                   .replace("{enable_dsa_cp: true}", "{}"))


def test_dcp_keeps_a_share_of_each_tokens_latent_and_the_whole_indexer_key_on_a_rank():
    """kv_cache_interface.py@v0.23.0 L241-249 (max_model_len // dcp tokens a rank) and L79-98 with
    model_runner_v1.py L455-457 (the SFA indexer key replicated over the DCP ranks): GLM-5.2 at TP8 costs
    78 x 1152 B of latent (W8A8: BF16 cache) a token plus the indexer key of the layers that own one; DCP8 keeps
    1/8 of the latent."""
    whole = plan_of(pd(*GLM, [], []))
    split = plan_of(pd(*GLM, ["--decode-context-parallel-size", "8"], ["--decode-context-parallel-size", "8"]))
    for role in ("prefill", "decode"):
        w, s = whole.role(role)[0].memory, split.role(role)[0].memory
        latent, key = 78 * 1152, w.kv_bytes_per_token - 78 * 1152
        assert key > 0
        assert s.kv_bytes_per_token == round(latent / 8 + key)
        assert s.max_tokens > 5 * w.max_tokens


def test_the_last_dcp_flag_wins_as_in_argparse():
    from deployctl.core.engines.vllm_ascend.dcp import dcp_of

    assert dcp_of(["--decode-context-parallel-size", "2", "-dcp", "8"]) == 8
    assert dcp_of(["--decode-context-parallel-size=4"]) == 4
    assert dcp_of([]) == 1
