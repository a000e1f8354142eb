"""plan, render and recommend from each real config.json of issue 26's families (tests/fixtures/checkpoints, a SOURCE
each), on A2 and A3, for every vLLM-Ascend version whose support matrix lists the family; the engines that do not run
a family, or not in that quantization, refuse it naming their source."""

from __future__ import annotations

from pathlib import Path

import pytest

from deployctl.core.errors import LayoutError
from deployctl.core.input.raw import parse_yaml
from deployctl.app.inventory import validate_inventory
from deployctl.core.render import render_artifacts
from tests.core.checkpoint.quoted import FIXTURES, real
from tests.core.checkpoint.test_engine_support import _mindie, _model_warnings
from tests.core.checkpoint.test_plan import inventory, plan_of

# (fixture, quant, A2 servers, A3 servers): the fewest servers of 8 (A2) / 16 (A3) 64 GB dies the weights fit
CASES = [
    ("qwen3-235b-a22b", "w8a8", 1, 1),
    ("qwen3-next-80b-a3b-thinking", "bf16", 1, 1),
    ("glm-4.5-air", "bf16", 1, 1),
    ("glm-4.7-fp8", "w8a8", 1, 1),
    ("deepseek-v3.2", "w8a8", 2, 1),
    ("kimi-k2-instruct", "w8a8", 4, 2),
]
# deployctl/core/engines/vllm_ascend/support.yaml `families`: every one of these six runs on 0.13, 0.18 and 0.23 (each
# entry with its supported_models.md line; deepseek_v32 through deepseek-v3.2's guide)
VERSIONS = ("0.13", "0.18", "0.23")
# --quantization ascend with modelslim W8A8 weights, none for BF16: vllm-ascend @v0.23.0
# docs/source/tutorials/models/GLM4.x.md L152, Qwen3-235B-A22B.md L230, Qwen3-Next.md L133 (BF16, no flag)


def _text(name: str, quant: str, hardware: str, servers: int, version: str) -> str:
    """`name` served as my-<name>: no catalog model has that name, so the checkpoint alone describes it."""
    return inventory(f"my-{name}", FIXTURES / name, quant=quant, nodes=servers, preset="single" if servers == 1 else "dp-ep",
                     hardware=hardware).replace("vllm-ascend:v0.13.0", f"vllm-ascend:v{version}.0")


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("hardware", ["a2", "a3"])
@pytest.mark.parametrize("name,quant,a2,a3", CASES, ids=[c[0] for c in CASES])
def test_plan_and_render_from_the_real_config(name, quant, a2, a3, hardware, version):
    servers = a2 if hardware == "a2" else a3
    plan = plan_of(_text(name, quant, hardware, servers, version))
    assert plan.engine.version == version and real(name)["architectures"][0] in plan.model_display
    assert all(i.memory.fits for i in plan.instances)
    assert _model_warnings(plan) == []                       # the family is listed for this version
    args = [a.content.decode().split("\n") for a in render_artifacts(plan) if a.path.endswith(".args")]
    assert args and all(a[0] == "/w" for a in args)          # model.weights_path is what vLLM serves
    assert all(("--quantization" in a and a[a.index("--quantization") + 1] == "ascend") == (quant == "w8a8")
               for a in args)


@pytest.mark.parametrize("hardware", ["a2", "a3"])
@pytest.mark.parametrize("name,quant,a2,a3", CASES, ids=[c[0] for c in CASES])
def test_recommend_from_the_real_config(name, quant, a2, a3, hardware):
    from deployctl.core.sizing.recommend import Objective, recommend

    servers = a2 if hardware == "a2" else a3
    inv = validate_inventory(parse_yaml(_text(name, quant, hardware, servers, "0.23"), "t.yaml", Path(".")))
    cands = recommend(inv, Objective(input_len=2048, output_len=512))
    assert cands and all(c.max_concurrency > 0 and c.tpot_ms > 0 for c in cands)
    assert all(c.dies <= servers * (8 if hardware == "a2" else 16) for c in cands)


def test_a_quantization_the_family_does_not_run_is_refused_naming_the_source():
    with pytest.raises(LayoutError) as exc:
        plan_of(_text("glm-4.7-fp8", "w4a8", "a3", 1, "0.23"))
    text = exc.value.render()
    assert "not w4a8" in text and "VA tutorials" in text and "use quant w8a8" in text


def test_a_version_no_guide_covers_is_warned_unverified():
    """vLLM-Ascend 0.11's support matrix has no Kimi-K2 row (support.yaml kimi_k2 starts at 0.13)."""
    plan = plan_of(_text("kimi-k2-instruct", "w8a8", "a3", 2, "0.11"))
    (warning,) = _model_warnings(plan)
    assert "0.11" in warning and "unverified" in warning


def test_mindie_refuses_the_families_and_quantizations_its_support_list_does_not_run():
    with pytest.raises(LayoutError) as exc:            # DeepSeek-V3.2: MindIE 3.0 only
        plan_of(_mindie("my-deepseek-v3.2", FIXTURES / "deepseek-v3.2", "w8a8", 2))
    assert "does not run on MindIE 2.2" in exc.value.render() and "Ascend/MindIE-LLM@" in exc.value.render()
    with pytest.raises(LayoutError) as exc:
        plan_of(_mindie("my-qwen3-235b", FIXTURES / "qwen3-235b-a22b", "w4a8", 2))
    assert "in w4a8" in exc.value.render() and "model_support_list.md L54-55" in exc.value.render()
    plan = plan_of(_mindie("my-qwen3-235b", FIXTURES / "qwen3-235b-a22b", "w8a8", 2))
    assert all(i.memory.fits for i in plan.instances) and _model_warnings(plan) == []
