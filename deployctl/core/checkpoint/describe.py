"""config.json (+ index, + msmodelslim description) → `ModelDescription`."""

from __future__ import annotations

import re
from typing import Any

from deployctl.core.checkpoint.context import context_window
from deployctl.core.checkpoint.description import ModelDescription, Quantization, WeightBytes
from deployctl.core.checkpoint.families import _DTYPE_BYTES, FAMILIES
from deployctl.core.checkpoint.files import CONFIG, CheckpointFiles, IndexFile, classify, problem, tensors_per_class, \
    typed

LINEAR = ("attention", "o_proj", "dense_ffn", "routed_experts", "shared_experts", "indexer", "mtp")
_MODELSLIM_BYTES = {"FLOAT": None, "W8A8": 1.0, "W8A8_DYNAMIC": 1.0, "W8A16": 1.0, "W4A8": 0.5, "W4A8_DYNAMIC": 0.5,
                    "W4A16": 0.5, "W8A8_MIX": 1.0}


def describe_files(files: CheckpointFiles) -> ModelDescription:
    """The description of a checkpoint from its small files (InventoryError when they do not say enough)."""
    cfg_file = files.directory / CONFIG
    archs = files.config.get("architectures")
    if not isinstance(archs, list) or not archs or not isinstance(archs[0], str):
        raise problem(cfg_file, "names no architecture", "architectures",
                      "a Hugging Face config.json lists the model class, e.g. [\"DeepseekV3ForCausalLM\"]")
    arch = archs[0][:120]
    reader = FAMILIES.get(arch)
    if reader is None:
        raise problem(cfg_file, f"architecture {arch!r} is not one deployctl can size", "architectures",
                      f"deployctl reads {', '.join(FAMILIES)}; another family needs its tensor shapes per weight class "
                      "(deployctl/core/checkpoint/families/), its attention cache per token and its engine support")
    raw: Any = files.config
    if reader.text_config:
        raw = raw.get("text_config")
        if not isinstance(raw, dict):
            raise problem(cfg_file, f"{arch} keeps its language model under text_config, which is missing",
                          "text_config")
    cfg = typed(reader.config, raw, cfg_file, hint=f"the key {arch} configs carry; is this the model's own "
                "config.json?")
    shape = reader.shape(cfg)
    family = "kimi_k2" if cfg.model_type == "kimi_k2" else reader.family
    notes = list(shape.notes)
    if reader.vision:
        from deployctl.core.checkpoint.families.vision import VisionConfig, vision_fields

        vc = files.config.get("vision_config")
        if not isinstance(vc, dict):
            raise problem(cfg_file, f"{arch} has a vision tower described under vision_config, which is missing",
                          "vision_config")
        vision = vision_fields(typed(VisionConfig, vc, cfg_file, hint="the vision_config keys of the model's own "
                                     "config.json"))
        shape.params["vision"] = vision["params"]
        shape.fields["vision"] = vision
    elif reader.text_config:
        notes.append("vision tower not counted: only the language model under text_config is sized")
    key, dtype = cfg.dtype_key
    quant = _quantization(files, raw, key, dtype, shape.fields["layers"])
    per_class = {c: int(round(p * quant.bytes_per_param.get(c, _DTYPE_BYTES.get(dtype, 2))))
                 for c, p in shape.params.items() if p}
    weights = WeightBytes(by_class=per_class, by_class_source=f"tensor shapes from {CONFIG} x {quant.source}")
    if files.index is not None:
        weights = _with_index(weights, files.index, shape.fields["layers"])
    return ModelDescription(architecture=arch, family=family, model_type=cfg.model_type, vocab=cfg.vocab_size,
                            tied_embeddings=cfg.tie_word_embeddings, dtype=dtype, quantization=quant,
                            params={c: p for c, p in shape.params.items() if p}, weights=weights,
                            context=context_window(raw, "text_config" if reader.text_config else "",
                                                   str(cfg_file)),
                            notes=tuple(notes), **shape.fields)


def _with_index(w: WeightBytes, index: IndexFile, layers: int) -> WeightBytes:
    return w.model_copy(update={"index_total": index.metadata.total_size or None,
                                "index_tensors": tensors_per_class(index, layers)})


def _quantization(files: CheckpointFiles, cfg: dict, key: str, dtype: str, layers: int) -> Quantization:
    base = float(_DTYPE_BYTES.get(dtype, 2))
    if files.quant_description:
        return _modelslim(files, base, layers)
    qc = cfg.get("quantization_config") or files.config.get("quantization_config")
    if not isinstance(qc, dict):
        return Quantization(scheme="bf16" if base == 2 else dtype, source=f"{CONFIG} {key} {dtype}",
                            bytes_per_param={})
    method = str(qc.get("quant_method", ""))[:40]
    where = f"{CONFIG} quantization_config.quant_method {method}"
    if method == "fp8":
        block = qc.get("weight_block_size") or [128, 128]
        scale = 4 / (block[0] * block[1]) if _ints(block) else 0.0      # one fp32 scale per block
        per = {c: 1 + scale for c in LINEAR}
        if str(cfg.get("expert_dtype", "")).lower() == "fp4":
            # DeepSeek-V4's release: routed experts in FP4 (e2m1, half a byte) with an e8m0 scale per 32 weights
            per["routed_experts"] = 0.5 + 1 / 32
            return Quantization(scheme="fp8", source=where + " (routed experts: expert_dtype fp4)",
                                bytes_per_param=per)
        return Quantization(scheme="fp8", source=where, bytes_per_param=per)
    if method == "compressed-tensors":
        return _compressed(qc, base, where)
    raise problem(files.directory / CONFIG, f"quantization method {method!r} is not one deployctl can size",
                  "quantization_config.quant_method", "deployctl reads fp8, compressed-tensors (int4/int8 weights) "
                  "and msmodelslim's quant_model_description.json")


def _ints(v: object) -> bool:
    return isinstance(v, list) and len(v) == 2 and all(isinstance(x, int) and 0 < x <= 1 << 16 for x in v)


def _compressed(qc: dict, base: float, where: str) -> Quantization:
    """compressed-tensors: the weight bits of its config groups; Kimi-K2-Thinking quantizes only routed experts."""
    cg = qc.get("config_groups")
    groups = cg if isinstance(cg, dict) else {}
    bits, group = 16, 0
    for g in groups.values():
        w = g.get("weights") if isinstance(g, dict) else None
        if isinstance(w, dict) and isinstance(w.get("num_bits"), int):
            bits = min(bits, w["num_bits"])
            group = w["group_size"] if isinstance(w.get("group_size"), int) and w["group_size"] > 0 else 0
    if bits >= 16:
        return Quantization(scheme="bf16", source=where + " (no weight bits)", bytes_per_param={})
    ignore = [str(x) for x in qc.get("ignore", []) if isinstance(x, str)][:10000]
    per = bits / 8 + (2 / group if group else 0)            # bf16 scale per group
    kept = {c for c in LINEAR if any(_ignored(c, pat) for pat in ignore)}
    return Quantization(scheme=f"w{bits}a16", source=where + f" (num_bits {bits}, group_size {group or 'none'})",
                        bytes_per_param={c: base if c in kept else per for c in LINEAR})


def _ignored(cls: str, pattern: str) -> bool:
    marks = {"attention": ("self_attn", "attn"), "o_proj": ("self_attn", "o_proj"), "shared_experts": ("shared_expert",),
             "dense_ffn": ("layers.0.mlp", "dense"), "indexer": ("indexer",), "mtp": ()}
    return any(m in pattern for m in marks.get(cls, ()))


def _modelslim(files: CheckpointFiles, base: float, layers: int) -> Quantization:
    """msmodelslim's quant_model_description: the majority type of each class's weights."""
    counts: dict[str, dict[str, int]] = {}
    for name, kind in files.quant_description.items():
        if not name.endswith(".weight"):
            continue
        c = classify(name, layers)
        counts.setdefault(c, {}).setdefault(kind.upper(), 0)
        counts[c][kind.upper()] += 1
    per = {}
    for c, kinds in counts.items():
        kind = max(kinds, key=kinds.__getitem__)
        b = _MODELSLIM_BYTES.get(kind, base)
        per[c] = base if b is None else b
    top = str(files.quant_description.get("model_quant_type", "")).upper()
    scheme = top.removesuffix("_DYNAMIC").lower() or "w8a8"
    return Quantization(scheme=scheme, source=f"{files.quant_file} (msmodelslim; W4 weights counted at their loaded "
                        "size, 0.5 B)", bytes_per_param=per, kv_cache_bytes=_c8(files.quant_description, layers))


def _c8(description: dict, layers: int) -> float | None:
    """An INT8 KV cache of the GQA layers the description calibrated: ``kv_cache_type: C8`` and a
    ``...k_proj.kv_cache_scale`` per such layer (vllm-project/vllm-ascend@182b75ea
    vllm_ascend/quantization/modelslim_config.py L1034-1052; supported for GQA models since v0.18.0rc1,
    docs/source/user_guide/release_notes.md L818): 1 byte an element there, 2 elsewhere."""
    if str(description.get("kv_cache_type", "")) != "C8":
        return None
    c8 = {int(m.group(1)) for k in description if "k_proj.kv_cache_scale" in k
          for m in [re.search(r"\.(\d+)\.", k)] if m}
    share = min(len(c8), layers) / layers if layers else 0.0
    return 1.0 * share + 2.0 * (1 - share)
