"""A model's context window as the engines derive it from config.json, and the rope scaling --hf-overrides adds.

The engine plug-ins hold their own refusals (vLLM-Ascend: engines/vllm_ascend/max_len.py); this module only reads
config.json and derives the lengths, by each engine's rule: `derived_length` (vLLM), `first_key_length` (SGLang).

vLLM refuses to start when --max-model-len is above the length it derives from the checkpoint's config.json, unless
VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (vllm-project/vllm@0fc695fc6, the v0.23.0 wheel vLLM-Ascend 0.23 runs on,
sha256 872aeb7c..., as flags/vllm-0.23.0.json records it):

* vllm/transformers_utils/model_arch_config_convertor.py L310-343 `derive_max_model_len_and_key`: the smallest of
  the keys `LENGTH_KEYS` the text config has (L312-337), then `model_max_length` over it when set (L339-342);
* vllm/config/model.py L2112-2249 `_get_and_verify_max_len`, called with the text config (L1735-1744, hf_text_config:
  text_config of a VL model): no key at all -> any --max-model-len goes (L2146-2149); the rope parameters scale it
  (L2165-2197): every rope_type but su / longrope / llama3 multiplies it by `factor` (1 when absent or null), and yarn
  first replaces it by `original_max_position_embeddings` (L2185-2186); gemma3 is left unscaled (L2173); a larger
  --max-model-len is allowed up to `model_max_length` (L2222-2227), else "User-specified max_model_len (X) is greater
  than the derived max_model_len (...)" and a ValueError unless VLLM_ALLOW_LONG_MAX_MODEL_LEN (L2228-2248), which
  vllm/envs.py L1015-1018 reads as "1" or "true" (stripped, any case).
* The rope parameters: rope_scaling wins over rope_parameters and a legacy "type" names the rope_type (vllm/
  transformers_utils/config.py L441-490 patch_legacy_rope_type: su -> longrope, mrope -> default; L492-537
  patch_rope_parameters); yarn's original_max_position_embeddings is the config's own key when it has one, else the
  rope dict's, else max_position_embeddings (transformers 5.24.0 modeling_rope_utils.py L835-842
  standardize_rope_params). The same rule and keys are in the stored vllm-project/vllm@18ec6629 vllm/config/model.py.
* --hf-overrides (a JSON object; argparse keeps the last one): flat values update the config before the rope
  parameters are patched (transformers_utils/config.py L855-864); dict values after it (vllm/config/model.py
  L504-518, L557-559): into a nested config (text_config) key by key, merging dicts (L421-447 `_update_nested`), and
  on the config itself replacing the value whole (L449-464 `_apply_dict_overrides`). rope_scaling and rope_parameters
  are one attribute in transformers 5 (transformers 5.24.0 configuration_utils.py L720-733).

Not modelled: --disable-sliding-window (caps it at the sliding window, L2127-2135), the tokenizer's model_max_length
(read for pooling runners only, L1725-1734), encoder configs (L2199-2200) and callable overrides.

SGLang has its own check, which `first_key_length` replicates for its engine: sglang 0.5.23 (PyPI wheel)
python/sglang/srt/configs/model_config.py L1291-1318 `_derive_context_length` refuses --context-length above the
derived one ("User-specified context_length (X) is greater than the derived context_length (Y)") unless
SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1 (srt/environ.py L320); it derives it in
srt/utils/hf_transformers/common.py L668-694 `get_context_length`: the first of `FIRST_KEYS` the text config has,
times rope_scaling.factor -- 1 when rope_scaling has original_max_position_embeddings or rope_type llama3.
"""

from __future__ import annotations

import json
import math
from typing import Any

from deployctl.core.models.base import Frozen
from deployctl.core.models.model_info import ContextWindow

# vLLM's: vllm/transformers_utils/model_arch_config_convertor.py@0fc695fc6 L312-329, in its order (the smallest wins)
LENGTH_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
               "max_target_positions", "max_sequence_length", "max_seq_length", "seq_len")
# SGLang's: sglang 0.5.23 python/sglang/srt/utils/hf_transformers/common.py L668-674, in its order (the first wins)
FIRST_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length", "max_position_embeddings")
ROPE_KEYS = ("rope_type", "type", "factor", "original_max_position_embeddings")
_LIMIT = 1 << 40


class Derived(Frozen):
    """vLLM's derived max_model_len: the length, the key it came from, how the rope scaling changed it, and
    model_max_length (a larger --max-model-len up to it is allowed)."""

    length: float
    key: str
    key_value: float                     # that key's value, before the rope scaling
    scaling: str = ""
    model_max_length: float | None = None

    def allows(self, max_model_len: int) -> bool:
        return max_model_len <= self.length or (self.model_max_length is not None
                                                and max_model_len <= self.model_max_length)

    def describe(self) -> str:
        return f"{self.key} {_n(self.key_value)}" + (f", {self.scaling}" if self.scaling else ", no rope scaling")


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


def _rope_type(rp: dict) -> str:
    t = rp.get("rope_type") or rp.get("type") or "default"
    return {"su": "longrope", "mrope": "default"}.get(str(t), str(t))


def derived_length(w: ContextWindow) -> Derived | None:
    """vLLM's derived max_model_len of the window (None: config.json has no length key, vLLM takes any length)."""
    derived, key = math.inf, ""
    for k in LENGTH_KEYS:
        v = w.keys.get(k)
        if v is not None:
            if v < derived:
                key = k
            derived = min(derived, v)
    mml = w.keys.get("model_max_length")
    if mml:
        derived, key = mml, "model_max_length"
    if derived == math.inf:
        return None
    base, scaling = derived, ""
    rope = w.rope
    if rope is not None and "gemma3" not in w.model_type:
        layers = list(rope.values()) if rope and all(isinstance(v, dict) for v in rope.values()) else [rope]
        factor: Any = 1.0
        for rp in layers:
            rtype = _rope_type(rp)
            if rtype not in ("su", "longrope", "llama3"):
                factor = rp.get("factor", factor)
                if rtype == "yarn":
                    ompe = (w.original_max_position_embeddings or rp.get("original_max_position_embeddings")
                            or w.keys.get("max_position_embeddings") or derived)
                    derived = ompe
                    scaling = f"yarn over original_max_position_embeddings {_n(ompe)}"
        factor = 1.0 if factor is None else float(factor)
        if factor != 1.0:
            scaling = f"{scaling or 'rope scaling'} x factor {factor:g}"
        derived *= factor
    return Derived(length=derived, key=key, key_value=base, scaling=scaling,
                   model_max_length=w.keys.get("model_max_length"))


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


def _n(v: float) -> str:
    return f"{int(v):,}" if float(v).is_integer() else f"{v:,}"
