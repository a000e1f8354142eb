"""A model described from model.config_path belongs to the inventory that names it, not to the process: two
inventories naming the same model.name with different checkpoints plan each with its own, and validating one
leaves the built-in catalog as it was."""

from __future__ import annotations

from deployctl.core import catalog
from deployctl.core.sizing.estimate import context
from tests.core.checkpoint.test_plan import FIXTURES, inventory, plan_of


def test_the_same_name_with_two_checkpoints_plans_each_with_its_own():
    before = dict(catalog.models())
    small = plan_of(inventory("local-qwen", FIXTURES / "qwen3-8b"))
    large = plan_of(inventory("local-qwen", FIXTURES / "qwen3-32b"))
    # Qwen3-8B: 36 layers, 8 KV heads of 128; Qwen3-32B: 64 layers, 8 KV heads of 128 (their config.json files);
    # TP 8 leaves one KV head per rank, K and V in bf16
    assert small.instances[0].memory.kv_bytes_per_token == 36 * 2 * 1 * 128 * 2
    assert large.instances[0].memory.kv_bytes_per_token == 64 * 2 * 1 * 128 * 2
    # planned again after the other was validated: still its own checkpoint
    assert plan_of(inventory("local-qwen", FIXTURES / "qwen3-8b")).instances[0].memory == small.instances[0].memory
    assert catalog.models() == before and "local-qwen" not in catalog.models()
    # the estimate steps the inventory's own model too
    assert context(small).setups[small.instances[0].name].model_info.layers == 36
    assert context(large).setups[large.instances[0].name].model_info.layers == 64


def test_copies_of_a_validated_inventory_keep_its_checkpoint():
    plan = plan_of(inventory("local-qwen", FIXTURES / "qwen3-8b"))
    inv = plan.inventory
    copy = inv.model_copy(update={"model": inv.model.model_copy(update={"max_batch_size": 16})})
    assert catalog.model_of(copy) is catalog.model_of(inv) and catalog.model_of(inv).family == "qwen3"


def test_a_built_in_model_needs_no_checkpoint():
    plan = plan_of(inventory("qwen3-235b-a22b", None, nodes=2, preset="tp-pp"))
    assert plan.inventory.checkpoint_model is None
    assert catalog.model_of(plan.inventory) is catalog.builtin_models()["qwen3-235b-a22b"]

