"""An instance's configured request limits as the planner, the renderers and the estimate read them."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from deployctl.core.models.inventory import Inventory



def max_prefill_tokens(inv: Inventory, role: str = "mixed") -> int:
    """The tokens of one forward batch an instance is configured and memory-sized for (pass the role's view,
    inventory/roles.for_role): the model's (or role's) max_prefill_tokens; unset, a whole longest input, except on
    a pd-split decode role of an engine that chunks prefills, which only ever runs decode steps: its batch
    times (1 + speculative tokens), as vllm-ascend's PD CI sizes its decode instances (DeepSeek-V3_2-W8A8-EP.yaml
    @182b75ea L138/L141/L134: --max-num-batched-tokens 42 = --max-num-seqs 14 x (1 + 2 MTP tokens))."""
    m = inv.model
    if m.max_prefill_tokens:
        return m.max_prefill_tokens
    if role == "decode" and inv.engine_spec.chunked_prefill(inv):
        return m.max_batch_size * (1 + (m.speculative.tokens if m.speculative is not None else 0))
    return max(8192, m.max_input_len)


def workspace_tokens(inv: Inventory, role: str = "mixed") -> int:
    """The tokens of one forward batch the role's memory fit reserves activation workspace for: the role's
    layout.<role>.model.prefill_budget_tokens, else its max_prefill_tokens. A MindIE decode role must be
    configured with maxPrefillTokens >= maxInputTokenLen (Ascend/MindIE-LLM@8b4871ad
    src/config_manager/config_manager_impl.cpp:318-331) although it never prefills: Huawei's DeepSeek-V3.2 128K
    P/D decode config sets 128000 "for validation; decode does not read it"
    (docs/zh/user_guide/models/deepseek/deepseek_v3.2.md:462-530 there); its decode warm-up runs one decode step
    over requests of that total length (mindie_llm/text_generator/generator.py:1355-1414 there), which takes KV
    blocks, not a prefill's activations. The key lets such a role be sized for what it runs."""
    from deployctl.core.input.roles import role_block

    block = role_block(inv, role)
    budget = block.model.prefill_budget_tokens if block is not None and block.model is not None else None
    return budget or max_prefill_tokens(inv, role)
