"""A model's context window as config.json gives it, and the rope scaling an engine's config override adds.

This module only reads: the length keys of the text config, its rope scaling (ContextWindow), an override object
given on an engine's command line (`json_arg`) merged as vLLM and SGLang merge it (`with_overrides`). Each engine's
own derivation and refusal live in its folder: vLLM-Ascend's in engines/vllm_ascend/derived_len.py and max_len.py,
SGLang's in engines/sglang/context_length.py.

* The length keys read: vLLM's list (vllm/transformers_utils/model_arch_config_convertor.py@0fc695fc6 L312-329),
  which holds SGLang's (sglang 0.5.23 srt/utils/hf_transformers/common.py L668-674).
* The rope parameters: rope_scaling wins over rope_parameters (vllm/transformers_utils/config.py L441-537; one
  attribute in transformers 5: transformers 5.24.0 configuration_utils.py L720-733); yarn's
  original_max_position_embeddings is the config's own key when it has one (transformers 5.24.0
  modeling_rope_utils.py L835-842).
* --hf-overrides (a JSON object; argparse keeps the last one): flat values update the config before the rope
  parameters are patched (transformers_utils/config.py L855-864); dict values after it (vllm/config/model.py
  L504-518, L557-559): into a nested config (text_config) key by key, merging dicts (L421-447 `_update_nested`), and
  on the config itself replacing the value whole (L449-464 `_apply_dict_overrides`).
"""

from __future__ import annotations

import json
import math
from typing import Any

from deployctl.core.models.model_info import ContextWindow

# the keys a text config may give its length under: vLLM's list, in its order (model_arch_config_convertor.py@0fc695fc6
# L312-329); SGLang's (common.py L668-674) are among them
LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
               "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")
ROPE_KEYS = ("rope_type", "type", "factor", "original_max_position_embeddings")
_LIMIT = 1 << 40


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not 0 < v < _LIMIT:
        return None
    return v


def _rope_subset(rope: Any, depth: int = 0) -> dict[str, Any] | None:
    """The keys of a rope dict that decide the length (per layer type when nested), typed; None if not a dict."""
    if not isinstance(rope, dict):
        return None
    if rope and depth == 0 and all(isinstance(v, dict) or v is None for v in rope.values()):
        return {str(k)[:80]: _rope_subset(v, 1) for k, v in list(rope.items())[:32] if isinstance(v, dict)}
    out: dict[str, Any] = {}
    for k in ROPE_KEYS:
        v = rope.get(k)
        if isinstance(v, str) and k in ("rope_type", "type"):
            out[k] = v[:40]
        elif k in rope and (v is None or _number(v) is not None):
            out[k] = v
    return out


def context_window(text: dict, under: str = "", source: str = "config.json") -> ContextWindow:
    """The facts of a config.json text config (``under`` the key that holds it in a VL model's config)."""
    keys = {k: v for k in LENGTH_KEYS if (v := _number(text.get(k))) is not None}
    scaling = text.get("rope_scaling")
    rope = _rope_subset(scaling if scaling else text.get("rope_parameters"))
    return ContextWindow(keys=keys, rope=rope, model_type=str(text.get("model_type", ""))[:80], under=under,
                         original_max_position_embeddings=_number(text.get("original_max_position_embeddings")),
                         source=source)


def _merge(base: dict, update: dict) -> dict:
    """vllm/config/model.py L421-447 `_update_nested`: dicts merge key by key, other values replace."""
    out = dict(base)
    for k, v in update.items():
        out[k] = _merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def with_overrides(w: ContextWindow, overrides: dict) -> ContextWindow:
    """The window once vLLM has applied an --hf-overrides object to the config (see the module's notes)."""
    if w.under:
        text = overrides.get(w.under)
        if not isinstance(text, dict):
            return w                 # overrides of the outer config leave the language model's keys alone
        merge = True
    else:
        text, merge = overrides, False
    keys = dict(w.keys)
    for k in LENGTH_KEYS:
        if k in text and not isinstance(text[k], dict):
            v = _number(text[k])
            if v is None:
                keys.pop(k, None)
            else:
                keys[k] = v
    ompe = w.original_max_position_embeddings
    if "original_max_position_embeddings" in text and not isinstance(text["original_max_position_embeddings"], dict):
        ompe = _number(text["original_max_position_embeddings"])
    rope = w.rope
    for name in ("rope_parameters", "rope_scaling"):       # one attribute in transformers 5; rope_scaling set last
        if name in text:
            new = text[name]
            rope = _rope_subset(_merge(rope, new) if merge and isinstance(new, dict) and rope is not None else new)
    return w.model_copy(update={"keys": keys, "rope": rope, "original_max_position_embeddings": ompe})


def json_arg(args: list[str], name: str) -> dict | None:
    """The JSON object engine.args give the flag ``name`` (e.g. --hf-overrides; the last one, as argparse keeps
    it); None without one or when it is not a JSON object (the engine refuses that itself)."""
    found = None
    for i, arg in enumerate(args):
        flag, eq, value = arg.partition("=")
        if flag == name:
            found = value if eq else (args[i + 1] if i + 1 < len(args) else None)
    if found is None:
        return None
    try:
        data = json.loads(found)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None
