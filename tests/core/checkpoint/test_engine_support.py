"""Engine support by family (issue 26 item 4): a model described from its checkpoint is checked against its family's
entry in vLLM-Ascend's support.yaml (supported_models.md per tag), refused or warned as a catalog model is."""

from __future__ import annotations

from pathlib import Path

import pytest

from deployctl.core.errors import LayoutError
from tests.core.checkpoint.test_plan import FIXTURES, inventory, plan_of


def _model_warnings(plan) -> list[str]:
    return [w for w in plan.engine.warnings if "support matrix" in w or "covers it" in w]


def test_a_listed_family_is_supported_without_a_warning():
    plan = plan_of(inventory("qwen3-32b", FIXTURES / "qwen3-32b"))       # vLLM-Ascend 0.13: Qwen3 listed
    assert _model_warnings(plan) == []


def test_a_family_not_listed_for_the_version_is_warned():
    ck = FIXTURES / "minimax-m2"                                           # listed from 0.18 only
    plan = plan_of(inventory("minimax-m2", ck, quant="w8a8", nodes=2, preset="dp-ep", hardware="a3"))
    (warning,) = _model_warnings(plan)
    assert "minimax-m2" in warning and "unverified" in warning


def test_a_quantization_the_family_does_not_run_is_refused_with_the_alternative():
    """DeepSeek-V3's FP8 checkpoint as it is on Hugging Face: vLLM-Ascend runs the family in w8a8 or bf16."""
    with pytest.raises(LayoutError) as exc:
        plan_of(inventory("my-dsv3", FIXTURES / "deepseek-v3", quant="fp8", nodes=2, preset="dp-ep", hardware="a3"))
    text = exc.value.render()
    assert "not fp8" in text and "use quant w8a8" in text


def test_the_family_entry_follows_same_as_to_the_catalog_model():
    plan = plan_of(inventory("my-dsv3", FIXTURES / "deepseek-v3", quant="w8a8", nodes=2, preset="dp-ep",
                             hardware="a3"))
    assert _model_warnings(plan) == []        # deepseek_v3 -> deepseek-v3: 0.13 runs it (DeepSeek-V3.1.md)


MINDIE_22 = "swr.cn-south-1.myhuaweicloud.com/ascendhub/mindie:2.2.RC1-800I-A2-py311-openeuler24.03-lts"


def _mindie(name: str, ck: Path, quant: str, nodes: int) -> str:
    return inventory(name, ck, quant=quant, nodes=nodes, preset="dp-ep" if nodes > 1 else "single",
                     engine="mindie").replace("'mindie:test'", f"'{MINDIE_22}'")


def test_mindie_refuses_a_quantization_its_support_list_marks_no_for_the_family():
    with pytest.raises(LayoutError) as exc:
        plan_of(_mindie("glm-4.5-air", FIXTURES / "glm-4.5-air", "w4a8", 2))
    text = exc.value.render()
    assert "w4a8" in text and "model_support_list.md L98" in text and "use quant w8a8" in text


def test_mindie_runs_a_listed_family_and_warns_on_one_it_does_not_list():
    glm = plan_of(_mindie("glm-4.5-air", FIXTURES / "glm-4.5-air", "w8a8", 2))
    assert not [w for w in glm.engine.warnings if "support matrix" in w]
    nxt = plan_of(_mindie("qwen3-next", FIXTURES / "qwen3-next-80b-a3b-thinking", "w8a8", 1))
    assert any("not in MindIE's support matrix" in w for w in nxt.engine.warnings)
