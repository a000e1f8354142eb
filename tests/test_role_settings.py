"""Per-role settings (layout.<role>.engine / model / env): what a pd-split role may set over the engine and model
blocks, how it merges, and that the role's own instances are planned with it."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from deployctl.errors import InventoryError
from deployctl.inventory.load import parse_yaml
from deployctl.inventory.roles import for_role
from deployctl.inventory.validate import validate_inventory
from deployctl.planning.plan import plan_layout

EXAMPLE = Path(__file__).parent.parent / "inventories" / "examples" / "vllm-a3-1p1d-qwen3.yaml"


def inventory(prefill: dict, decode: dict, engine: dict | None = None):
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["layout"]["prefill"].update(prefill)
    doc["layout"]["decode"].update(decode)
    doc["engine"].update(engine or {})
    return validate_inventory(parse_yaml(yaml.safe_dump(doc, sort_keys=False), "pd.yaml", EXAMPLE.parent))


def problems(prefill: dict, decode: dict) -> list[str]:
    with pytest.raises(InventoryError) as exc:
        inventory(prefill, decode)
    return [f"{p.path}: {p.message}" for p in exc.value.problems]


def test_a_role_merges_its_engine_keys_limits_and_env_over_the_blocks():
    inv = inventory({"engine": {"args": ["--enforce-eager"], "additional_config": {"recompute_scheduler_enable": True}},
                     "model": {"max_batch_size": 16}, "env": {"HCCL_BUFFSIZE": 256}},
                    {"engine": {"gpu_memory_utilization": 0.92}},
                    {"args": ["--block-size", "128"], "additional_config": {"enable_cpu_binding": True},
                     "env": {"HCCL_BUFFSIZE": 1024}})
    p = for_role(inv, "prefill")
    assert p.engine.args == ["--block-size", "128", "--enforce-eager"]   # appended: the role's flag comes last
    assert p.engine.additional_config == {"enable_cpu_binding": True, "recompute_scheduler_enable": True}
    assert p.engine.env["HCCL_BUFFSIZE"] == 256 and p.model.max_batch_size == 16
    d = for_role(inv, "decode")
    assert d.engine.gpu_memory_utilization == 0.92 and d.engine.args == ["--block-size", "128"]
    assert d.engine.env["HCCL_BUFFSIZE"] == 1024 and d.model.max_batch_size == inv.model.max_batch_size
    assert for_role(inv, "mixed") is inv


def test_each_role_is_planned_with_its_own_memory_share_and_hccl_buffer():
    inv = inventory({"engine": {"gpu_memory_utilization": 0.8}, "env": {"HCCL_BUFFSIZE": 256}},
                    {"engine": {"gpu_memory_utilization": 0.92}, "env": {"HCCL_BUFFSIZE": 1024}})
    plan = plan_layout(inv)
    p, d = plan.role("prefill")[0].memory, plan.role("decode")[0].memory
    assert p.memory_fraction == 0.8 and d.memory_fraction == 0.92
    assert p.comm_buffers_gb < d.comm_buffers_gb


def test_keys_that_cannot_differ_per_role_are_refused_at_their_line():
    found = problems({"engine": {"image": "other:1"}}, {"engine": {"gpu_memory_utilization": 1.5}})
    assert any(f.startswith("layout.prefill.engine.image: engine.image cannot differ per role") for f in found)
    assert any(f.startswith("layout.decode.engine.gpu_memory_utilization") and "0.99" in f for f in found)


def test_role_env_hccl_buffer_is_range_checked_and_other_hccl_settings_stay_global():
    found = problems({"env": {"HCCL_BUFFSIZE": "lots"}}, {"env": {"HCCL_CONNECT_TIMEOUT": 600}})
    assert any(f.startswith("layout.prefill.env.HCCL_BUFFSIZE") and "not an integer" in f for f in found)
    assert any(f.startswith("layout.decode.env.HCCL_CONNECT_TIMEOUT") for f in found)
