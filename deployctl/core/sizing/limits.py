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
