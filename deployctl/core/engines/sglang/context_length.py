"""The context length SGLang derives from a checkpoint's config.json (core/checkpoint/context.py reads the window).

SGLang has its own check, which `first_key_length` replicates: sglang 0.5.23 (PyPI wheel)
python/sglang/srt/configs/model_config.py L1291-1318 `_derive_context_length` refuses --context-length above the
derived one ("User-specified context_length (X) is greater than the derived context_length (Y)") unless
SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 (srt/environ.py L320); it derives it in
srt/utils/hf_transformers/common.py L668-694 `get_context_length`: the first of `FIRST_KEYS` the text config has,
times rope_scaling.factor -- 1 when rope_scaling has original_max_position_embeddings or rope_type llama3.
"""

from __future__ import annotations

from typing import Any

from deployctl.core.models.model_info import ContextWindow

# SGLang's: sglang 0.5.23 python/sglang/srt/utils/hf_transformers/common.py L668-674, in its order (the first wins)
FIRST_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length", "max_position_embeddings")


def first_key_length(w: ContextWindow) -> int:
    """SGLang's derived context length (common.py L677-694; 2048 when no key is set), for its engine."""
    rope = w.rope if w.rope and not all(isinstance(v, dict) for v in w.rope.values()) else None
    factor: Any = 1
    if rope:
        factor = rope.get("factor", 1)
        if "original_max_position_embeddings" in rope or rope.get("rope_type") == "llama3":
            factor = 1
    for k in FIRST_KEYS:
        if k in w.keys:
            return int((factor or 1) * w.keys[k])
    return 2048
