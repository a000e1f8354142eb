"""The families of late 2026 planned from their real config.json (tests/fixtures/checkpoints, a SOURCE each): each
engine's support per version with its source, the memory fit per role, the INT8 ("C8") caches the engines keep, a
below-minimum layout refused for capacity and not for the architecture. Weights against the published totals and KV
bytes against the engine formulas: test_published.py."""

from __future__ import annotations

import pytest

from deployctl.core.errors import LayoutError
from tests.core.checkpoint.quoted import FIXTURES, real
from tests.core.checkpoint.test_engine_support import _mindie, _model_warnings
from tests.core.checkpoint.test_plan import inventory, plan_of


def _vllm(name: str, quant: str, nodes: int, hardware: str, version: str = "0.23", additional: str = "",
          max_seq_len: int = 8192) -> str:
    text = inventory(f"my-{name}", FIXTURES / name, quant=quant, nodes=nodes, preset="single" if nodes == 1
                     else "dp-ep", hardware=hardware, max_seq_len=max_seq_len)
    text = text.replace("vllm-ascend:v0.13.0", f"vllm-ascend:v{version}.0")
    return text.replace("engine: {", f"engine: {{additional_config: {{{additional}}}, ") if additional else text


# (fixture, quant, A2 servers, A3 servers): the published minimum, vllm-project/vllm-ascend@182b75ea
# docs/source/tutorials/models/GLM5.md L258, L299, L340 and GLM5.2.md L19-21 (w8a8: 1 A3, 2 A2)
GLM = [("glm-5", "w8a8", 2, 1), ("glm-5.1", "w8a8", 2, 1), ("glm-5.2", "w8a8", 2, 1), ("glm-5.2", "w4a8", 2, 1)]


@pytest.mark.parametrize("version", ["0.18", "0.23"])
@pytest.mark.parametrize("hardware", ["a2", "a3"])
@pytest.mark.parametrize("name,quant,a2,a3", GLM, ids=[f"{g[0]}-{g[1]}" for g in GLM])
def test_glm5_plans_on_the_published_minimum_with_vllm_ascend(name, quant, a2, a3, hardware, version):
    plan = plan_of(_vllm(name, quant, a2 if hardware == "a2" else a3, hardware, version))
    assert "GlmMoeDsaForCausalLM" in plan.model_display and plan.engine.version == version
    assert all(i.memory.fits for i in plan.instances)
    assert _model_warnings(plan) == []                       # SM@v0.18.0 L30, SM@v0.23.0 L46-47


def test_glm5_below_the_minimum_is_refused_for_capacity_not_for_the_architecture():
    with pytest.raises(LayoutError) as exc:
        plan_of(_vllm("glm-5", "w8a8", 1, "a2"))
    text = exc.value.render()
    assert "does not fit in memory" in text and "weights" in text
    assert "architecture" not in text and "can size" not in text


def test_glm5_on_a_vllm_ascend_version_that_does_not_list_it_is_warned():
    plan = plan_of(_vllm("glm-5", "w8a8", 1, "a3", version="0.13"))
    (warning,) = _model_warnings(plan)
    assert "unverified" in warning


def test_mindie_refuses_glm5_naming_its_support_list():
    with pytest.raises(LayoutError) as exc:
        plan_of(_mindie("glm-5", FIXTURES / "glm-5", "w8a8", 2))
    text = exc.value.render()       # the 2.2 image: MindIE-LLM's 2.2-2.3 era list
    assert "does not run on MindIE 2.2" in text and "model_support_list.md (no GLM-5 row)" in text
    assert "serve it with engine.kind vllm-ascend" in text


# vLLM-Ascend's C8 caches (deployctl/core/engines/vllm_ascend/kv_cache.py, with their lines): SFA C8 packs the latent
# as 512 int8 + 64 bf16 rope + 4 fp32 scales = 656 bytes (vllm_ascend/attention/utils.py@182b75ea L33-44), LI C8 the
# indexer key as 128 int8 + an fp16 scale = 130 bytes (model_runner_v1.py@182b75ea L377-383); per token over the 78
# layers of GLM-5.2 (21 own an indexer)
C8 = [
    ("0.23", "", 78 * 1152 + 21 * 256),
    ("0.23", "enable_sparse_li_c8: true", 78 * 1152 + 21 * 130),
    ("0.23", "enable_sparse_sfa_c8: true", 78 * 656 + 21 * 256),
    ("0.23", "enable_sparse_sfa_c8: true, enable_sparse_li_c8: true", 78 * 656 + 21 * 130),
    ("0.23", "enable_sparse_c8: 'True'", None),                      # removed in 0.23: refused (test below)
    ("0.18", "enable_sparse_c8: true", 78 * 656 + 21 * 130),        # one switch for both before #12470
]


@pytest.mark.parametrize("version,additional,per_token", C8, ids=[f"{c[0]}-{c[1] or 'bf16'}" for c in C8])
def test_the_c8_caches_the_engine_keeps_are_the_ones_planned(version, additional, per_token):
    text = _vllm("glm-5.2", "w4a8", 1, "a3", version, additional)
    if per_token is None:
        with pytest.raises(Exception):
            plan_of(text)
        return
    plan = plan_of(text)
    (inst,) = plan.instances
    assert inst.memory.kv_bytes_per_token == per_token
    bf16 = plan_of(_vllm("glm-5.2", "w4a8", 1, "a3", version))
    if per_token < 78 * 1152 + 21 * 256:     # the smaller cache holds more tokens in the same budget
        assert inst.memory.max_tokens > bf16.instances[0].memory.max_tokens


# the published single-server deployments: vllm-project/vllm-ascend@182b75ea docs/source/tutorials/models/
# Qwen3.5-397B-A17B.md (A3, w8a8, TP16) and Qwen3-VL-235B-A22B-Instruct.md (A3, w8a8-QuaRot, DP4 x TP4)
QWEN = [("qwen3.5-397b-a17b", "w8a8"), ("qwen3-vl-235b-a22b-instruct", "w8a8"), ("qwen3.5-35b-a3b", "bf16"),
        ("qwen3-vl-30b-a3b-instruct", "bf16")]


@pytest.mark.parametrize("version", ["0.18", "0.23"])
@pytest.mark.parametrize("name,quant", QWEN, ids=[q[0] for q in QWEN])
def test_the_multimodal_qwen_families_plan_with_their_vision_tower(name, quant, version):
    plan = plan_of(_vllm(name, quant, 1, "a3", version))
    (inst,) = plan.instances
    assert inst.memory.fits and _model_warnings(plan) == []
    tower = inst.memory.weights_breakdown_gb["vision"]
    assert 0.8 / inst.degrees.tp - 0.01 < tower < 1.2 / inst.degrees.tp + 0.01   # 0.45-0.58B params x 2 bytes, by TP
    # the workspace holds, beyond the 1 GB runtime, the encoder cache of the largest image: 16,384 tokens x
    # out_hidden x (1 + deepstack mergers) x 2 bytes (out_hidden and the mergers from the real vision_config)
    v = real(name)["vision_config"]
    cache_gb = 16384 * v["out_hidden_size"] * (1 + len(v["deepstack_visual_indexes"])) * 2 / 1e9
    assert inst.memory.workspace_gb >= round(1.0 + cache_gb, 2)


def test_qwen3_5_below_the_minimum_is_refused_for_capacity():
    with pytest.raises(LayoutError) as exc:
        plan_of(_vllm("qwen3.5-397b-a17b", "bf16", 1, "a2"))       # 807 GB of BF16 weights, 512 GB of HBM
    text = exc.value.render()
    assert "does not fit in memory" in text and "can size" not in text


def test_mindie_refuses_qwen3_5_naming_its_support_list():
    with pytest.raises(LayoutError) as exc:
        plan_of(_mindie("qwen3.5", FIXTURES / "qwen3.5-35b-a3b", "w8a8", 1))
    assert "no Qwen3.5 row" in exc.value.render()



# the published minimum: vllm-project/vllm-ascend@182b75ea docs/source/tutorials/models/DeepSeek-V4-Flash.md L26, L144
# (W8A8 on 1 A3 or 1 A2) and DeepSeek-V4-Pro.md L26, L136 (W4A8 on 2 A3 or 4 A2)
DSV4 = [("deepseek-v4-flash", "w8a8", 1, 1), ("deepseek-v4-pro", "w4a8", 4, 2)]


@pytest.mark.parametrize("hardware", ["a2", "a3"])
@pytest.mark.parametrize("name,quant,a2,a3", DSV4, ids=[d[0] for d in DSV4])
def test_deepseek_v4_plans_on_the_published_minimum(name, quant, a2, a3, hardware):
    plan = plan_of(_vllm(name, quant, a2 if hardware == "a2" else a3, hardware))
    assert "DeepseekV4ForCausalLM" in plan.model_display and _model_warnings(plan) == []
    assert all(i.memory.fits for i in plan.instances)


def test_deepseek_v4_pro_below_the_minimum_is_refused_for_capacity():
    """One A2 (512 GB) cannot hold V4-Pro's ~800 GB of W4A8 weights. (One A3 can by deployctl's count, with 7.8 GB
    of KV cache a die; the tutorial's minimum of two A3 is for its 135,000-token context: docs/models.md.)"""
    with pytest.raises(LayoutError) as exc:
        plan_of(_vllm("deepseek-v4-pro", "w4a8", 1, "a2"))
    text = exc.value.render()
    assert "does not fit in memory" in text and "can size" not in text


def test_deepseek_v4_on_0_18_is_warned_and_mindie_refuses_it():
    (warning,) = _model_warnings(plan_of(_vllm("deepseek-v4-flash", "w8a8", 1, "a3", version="0.18")))
    assert "unverified" in warning
    with pytest.raises(LayoutError) as exc:
        plan_of(_mindie("dsv4", FIXTURES / "deepseek-v4-flash", "w8a8", 1))
    assert "no DeepSeek-V4 row" in exc.value.render()
