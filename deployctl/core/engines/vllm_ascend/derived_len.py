"""The max_model_len vLLM derives from a checkpoint's config.json (core/checkpoint/context.py reads the window).

vLLM refuses to start when --max-model-len is above the length it derives from the checkpoint's config.json, unless
VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (vllm-project/vllm@0fc695fc6, the v0.23.0 wheel vLLM-Ascend 0.23 runs on,
sha256 872aeb7c..., as flags/vllm-0.23.0.json records it):

* vllm/transformers_utils/model_arch_config_convertor.py L310-343 `derive_max_model_len_and_key`: the smallest of
  the keys `LENGTH_KEYS` (core/checkpoint/context.py) the text config has (L312-337), then `model_max_length` over
  it when set (L339-342);
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

"""

from __future__ import annotations

import math
from typing import Any

from deployctl.core.checkpoint.context import LENGTH_KEYS
from deployctl.core.models.base import Frozen
from deployctl.core.models.model_info import ContextWindow


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


def _n(v: float) -> str:
    return f"{int(v):,}" if float(v).is_integer() else f"{v:,}"
