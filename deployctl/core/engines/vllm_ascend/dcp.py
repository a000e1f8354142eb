"""Decode context parallel (DCP) across a prefill/decode split of a sparse-attention (SFA) model: on both roles or on
neither.

vllm-project/vllm-ascend@50e87d63 (releases/v0.23.0) docs/source/user_guide/release_notes.md L139 (#14322) warns
that DCP must be enabled on prefill and decode alike for SFA models (DeepSeek-V3.2, GLM-5.x); #14322 changed only
documents, and the only cross-role check the engine has (kv_p2p/mooncake_connector.py@5cb98caa L2722-2723: the
prefill's pcp x dcp divisible by the decode's) lets prefill DCP > 1 with decode DCP = 1 through. So deployctl checks
it. SFA, as the engine decides it (vllm_ascend/utils.py@5cb98caa L114-122): the config has index_topk and no
compress_ratios -- an MLA model with an indexer, which DeepSeek-V4 (compressed attention) is not.
"""

from __future__ import annotations

from typing import Any

SOURCE = ("vllm-project/vllm-ascend@50e87d63 docs/source/user_guide/release_notes.md L139 (#14322: documented only; "
          "the Mooncake connector does not check it, kv_p2p/mooncake_connector.py@5cb98caa L2722-2723)")
FLAGS = ("--decode-context-parallel-size", "-dcp")


def dcp_of(args: list[str]) -> int:
    """The --decode-context-parallel-size engine.args give (1 when they give none); the last one wins, as in
    argparse (a role's view lists the role's flags after the engine block's: core/input/roles.py)."""
    from deployctl.core.engine_spec.args import last_value

    value = last_value(args, FLAGS)
    return int(value) if value and value.isdigit() else 1


def uses_sfa(model: Any) -> bool:
    return model is not None and model.kv.kind == "mla" and bool(model.kv.indexer)


def asymmetric(plan: Any) -> tuple[int, int] | None:
    """(prefill DCP, decode DCP) of a pd-split SFA plan that enables DCP on one role only; None otherwise."""
    from deployctl.core import catalog
    from deployctl.core.input.roles import for_role

    inv = plan.inventory
    if plan.preset != "pd-split" or not uses_sfa(catalog.model_of(inv)):
        return None
    p, d = (dcp_of(list(getattr(for_role(inv, role).engine, "args", []))) for role in ("prefill", "decode"))
    return (p, d) if (p > 1) != (d > 1) else None


DSA_CP_SOURCE = ("vllm-project/vllm-ascend@5cb98caa (v0.23.0) vllm_ascend/utils.py L1531-1534 (ValueError \"DSA CP "
                 "requires SP\"), enable_sp L903-929 (enable_flashcomm1, VLLM_ASCEND_ENABLE_FLASHCOMM1, or shared-expert "
                 "DP); main dropped the requirement in #13946, after 0.23")


def dsa_cp_without_sp(inv: Any, version: str) -> list[str]:
    """The roles whose --additional-config turns on enable_dsa_cp with nothing that turns on sequence parallel (SP):
    vLLM-Ascend 0.23 refuses to start then, for a model with an indexer (index_topk: DSA / SFA, DeepSeek-V4)."""
    from deployctl.core import catalog
    from deployctl.core.input.roles import ROLES, for_role

    model = catalog.model_of(inv)
    if version != "0.23" or model is None or not (model.kv.indexer or model.kv.kind == "compressed"):
        return []
    out = []
    for role in ROLES if inv.layout.preset == "pd-split" else ("mixed",):
        view = for_role(inv, role) if role != "mixed" else inv
        cfg, env = getattr(view.engine, "additional_config", {}) or {}, view.engine.env or {}
        if not _true(cfg.get("enable_dsa_cp")):
            continue
        sp = _true(cfg.get("enable_flashcomm1")) or str(env.get("VLLM_ASCEND_ENABLE_FLASHCOMM1", "")) == "1" or \
            _true(cfg.get("enable_shared_expert_dp"))
        if not sp:
            out.append(role)
    return out


def _true(value: Any) -> bool:
    return value is True or (isinstance(value, str) and value.strip().lower() in ("true", "1"))
