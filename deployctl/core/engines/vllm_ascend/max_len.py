"""--max-model-len (model.max_seq_len) against the length vLLM derives from the checkpoint's config.json.

vLLM refuses to start when it is larger, unless the rope scaling (config.json's, or one --hf-overrides adds) raises
the derived length or VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 is set (vllm/config/model.py@0fc695fc6 L2222-2248; the
derivation is derived_len.py, over the window deployctl/core/checkpoint/context.py reads). A catalog model without
checkpoint files has no config.json to read: no check then.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from deployctl.core.engine_spec.protocol import Finding

if TYPE_CHECKING:
    from deployctl.core.checkpoint.context import ContextWindow
    from deployctl.core.models.inventory import Inventory
    from deployctl.core.models.plan import Plan


SOURCE = ("vllm-project/vllm@0fc695fc6 (v0.23.0) vllm/config/model.py L2112-2249 _get_and_verify_max_len; "
          "vllm/transformers_utils/model_arch_config_convertor.py L310-343")


def allows_long(env: dict) -> bool:
    """VLLM_ALLOW_LONG_MAX_MODEL_LEN as vllm/envs.py@0fc695fc6 L1015-1018 reads it: "1" or "true", stripped, any
    case."""
    return str(env.get("VLLM_ALLOW_LONG_MAX_MODEL_LEN", "0")).strip().lower() in ("1", "true")


def _n(v: float) -> str:
    return f"{int(v):,}" if float(v).is_integer() else f"{v:,}"


def max_len_findings(plan: Plan, env_of: Callable[[str, Inventory], dict]) -> list[Finding]:
    """An error per role (one for a mixed instance) whose --max-model-len vLLM would refuse; ``env_of(role, view)``
    is the environment the role's processes get (support.py: the presets under the role's engine.env)."""
    from deployctl.core import catalog
    from deployctl.core.checkpoint.context import json_arg, with_overrides
    from deployctl.core.engines.vllm_ascend.derived_len import derived_length
    from deployctl.core.input.roles import for_role

    inv = plan.inventory
    model = catalog.model_of(inv)
    if model is None or model.context is None:
        return []
    out: list[Finding] = []
    roles = ("prefill", "decode") if plan.preset == "pd-split" else ("mixed",)
    for role in roles:
        view = for_role(inv, role) if role != "mixed" else inv
        wanted = view.model.max_seq_len
        args = list(getattr(view.engine, "args", []) or [])
        overrides = json_arg(args, "--hf-overrides")
        window = with_overrides(model.context, overrides) if overrides else model.context
        derived = derived_length(window)
        if derived is None or derived.allows(wanted):
            continue
        if allows_long(env_of(role, view)):
            continue
        where = "engine" if role == "mixed" else f"layout.{role}.engine"
        env_at = "engine.env" if role == "mixed" else f"engine.env or layout.{role}.env"
        flag = "--max-model-len" if role == "mixed" else f"the {role} instances' --max-model-len"
        given = " with the --hf-overrides of engine.args" if overrides else ""
        out.append(Finding(
            "error", "model.max_seq_len",
            f"model.max_seq_len {_n(wanted)} ({flag}) is more than the {_n(derived.length)} tokens vLLM "
            f"derives from {window.where}{given} ({derived.describe()}): vllm serve refuses to start (\"User-specified "
            f"max_model_len ({wanted}) is greater than the derived max_model_len\")",
            SOURCE,
            hint=f"lower model.max_seq_len to {_n(derived.length)}; or give the model's rope scaling in "
                 f"{where}.args with the factor the model's card gives, e.g. --hf-overrides "
                 f"'{_example(window, wanted)}' (YaRN admits original_max_position_embeddings x factor, as "
                 "vLLM-Ascend's 1M-token Qwen3.5 CI configs do); or set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 in "
                 f"{env_at} (vLLM then only warns: with RoPE, positions past the derived length give NaN, with "
                 "absolute positions an out-of-bounds error)"))
    return out


def _example(window: ContextWindow, wanted: int) -> str:
    """A YaRN --hf-overrides that admits ``wanted`` tokens: a power-of-two factor over the model's own
    original_max_position_embeddings (its YaRN one, else max_position_embeddings)."""
    import json

    rope = window.rope or {}
    base = rope.get("original_max_position_embeddings") if rope.get("rope_type", rope.get("type")) == "yarn" else None
    base = int(base or window.keys.get("max_position_embeddings") or min(window.keys.values()))
    factor = 2.0
    while base * factor < wanted:
        factor *= 2
    body = {"rope_parameters" if window.under else "rope_scaling": {
        "rope_type": "yarn", "factor": factor, "original_max_position_embeddings": base}}
    return json.dumps({window.under: body} if window.under else body)
