"""vLLM-Ascend's INT8 ("C8") caches of sparse-attention (SFA: MLA with a DSA indexer, DeepSeek-V3.2 and GLM-5.x) and
what one cached element then costs, for the memory plan and the estimate (MemoryInputs.kv_cache_bytes).

Sources, vllm-project/vllm-ascend:
* v0.23.0 reads two --additional-config switches, each ANDed with the model's use of sparse attention
  (vllm_ascend/ascend_config.py@5cb98caa L280-281): ``enable_sparse_sfa_c8`` packs the MLA latent cache as the int8
  latent, the bf16 rope key and one fp32 scale per 128 latent values (vllm_ascend/attention/utils.py@182b75ea L22,
  L33-44: 512 + 128 + 16 = 656 bytes a token and layer for kv_lora_rank 512, rope 64); ``enable_sparse_li_c8``
  keeps the indexer key in int8 with one fp16 scale (vllm_ascend/worker/model_runner_v1.py@182b75ea L377-383,
  vllm_ascend/core/kv_cache_interface.py@182b75ea L118-144: 128 + 2 bytes for index_head_dim 128);
* before the split (#12470, in v0.23.0) one switch, ``enable_sparse_c8``, turned both on
  (vllm_ascend/ascend_config.py@7607b4cb L241-242, model_runner_v1.py L355-362); of the versions deployctl knows,
  0.18 reads it (flags/vllm-ascend-0.18.0.json).
"""

from __future__ import annotations

from typing import Any

SCALE_TILE = 128          # latent values per fp32 scale (attention/utils.py L22)


def _on(config: dict, key: str) -> bool:
    value = config.get(key)
    return value is True or (isinstance(value, str) and value.strip().lower() == "true")


def switches(version: str, config: dict) -> tuple[bool, bool]:
    """(latent C8, indexer C8) the version reads from --additional-config."""
    if version == "0.18":
        both = _on(config, "enable_sparse_c8")
        return both, both
    if version == "0.23":
        return _on(config, "enable_sparse_sfa_c8"), _on(config, "enable_sparse_li_c8")
    return False, False


def c8_bytes(model: Any, version: str, config: dict) -> tuple[float | None, float | None, tuple[str, ...]]:
    """(latent bytes per cached element, indexer-key bytes per cached element, notes) of ``model``'s KV cache under
    this version and --additional-config; None where the cache keeps the model's own type."""
    from deployctl.core.sizing.hardware import arch_of

    if model.kv.kind != "mla" or not model.kv.indexer:       # use_sparse: MLA with an indexer only
        return None, None, ()
    latent_c8, index_c8 = switches(version, config)
    kv = idx = None
    notes = []
    if latent_c8:
        mla = arch_of(model).get("mla") or {}
        lora, rope = mla.get("kv_lora_rank"), mla.get("qk_rope_head_dim")
        if lora and rope:
            packed = lora + 2 * rope + 4 * lora / SCALE_TILE
            kv = packed / (lora + rope)
            notes.append(f"SFA C8: the latent cache packed as int8 + bf16 rope + fp32 scales, {packed:.0f} bytes a "
                         "token and layer (vllm-ascend attention/utils.py L33-44)")
    if index_c8:
        idx = (model.kv.indexer + 2) / model.kv.indexer
        notes.append(f"LI C8: the indexer key in int8 + an fp16 scale, {model.kv.indexer + 2} bytes a token and "
                     "indexer layer (vllm-ascend model_runner_v1.py L377-383)")
    return kv, idx, tuple(notes)
