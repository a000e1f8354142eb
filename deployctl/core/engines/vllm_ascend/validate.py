"""Inventory checks only vLLM-Ascend needs: engine.args against the version's own parser table, the keys of
engine.additional_config against vllm-ascend's config reader, and the flags deployctl derives."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from deployctl.core.errors import Problem
from deployctl.core.models.engine_settings.vllm_ascend import VllmAscendSettings

if TYPE_CHECKING:
    from deployctl.core.input.raw import KeyPath, RawInventory
    from deployctl.core.models.inventory import Inventory, RoleLayout

# flags deployctl renders from the inventory and plan; engine.args may not set them
OWNED_FLAGS = ("--speculative-config", "--host", "--port", "--served-model-name", "--max-model-len", "--max-num-seqs",
               "--max-num-batched-tokens", "--gpu-memory-utilization", "--tensor-parallel-size",
               "--pipeline-parallel-size", "--data-parallel-size", "--data-parallel-size-local",
               "--data-parallel-start-rank", "--data-parallel-rank", "--data-parallel-address",
               "--data-parallel-rpc-port", "--headless", "--nnodes", "--node-rank", "--master-addr", "--master-port",
               "--kv-transfer-config", "--enable-expert-parallel", "--quantization", "--additional-config", "--model")
OWNED_ENV = ("HCCL_IF_IP", "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME", "ASCEND_RT_VISIBLE_DEVICES")


def _args(args: list[str], path: KeyPath, raw: RawInventory, version: str) -> list[Problem]:
    """engine.args (or layout.<role>.engine.args at ``path``) against the version's parser table."""
    from deployctl.core.engines.vllm_ascend.catalog import option, suggest, takes_value

    out = []
    args = list(args)
    i = 0
    while i < len(args):
        key = path + (i,)
        arg = args[i]
        flag, eq, _ = arg.partition("=")
        if not flag.startswith("-"):
            out.append(raw.problem(key, f"{arg!r} is not a flag", "give flags and their values as separate items, "
                                   "e.g. [\"--max-num-seqs\", \"16\"]"))
            i += 1
            continue
        canon = option(version, flag)
        if canon is None:
            out.append(raw.problem(key, f"vllm serve {version} has no flag {flag}", suggest(version, flag)))
            i += 1
            continue
        if canon in OWNED_FLAGS:
            out.append(raw.problem(key, f"{flag} is set by deployctl from the inventory",
                                   "set it through model.speculative" if canon == "--speculative-config" else
                                   "set it through the model, layout, ports or engine.additional_config keys"))
        i += 1
        if takes_value(version, flag) and not eq:
            if i >= len(args):
                out.append(raw.problem(key, f"{flag} needs a value", f"add the value after {flag}"))
            i += 1
    return out


def _additional(config: dict, path: KeyPath, raw: RawInventory, version: str) -> list[Problem]:
    import difflib

    from deployctl.core.engines.vllm_ascend.catalog import additional_keys

    from deployctl.core.engines.vllm_ascend.catalog import ascend_table

    keys = additional_keys(version)
    table = ascend_table(version)
    source = (f"vllm-project/vllm-ascend@{table['vllm_ascend_commit'][:12]}:"
              f"{table['additional_config'].get('source', 'vllm_ascend/ascend_config.py')}")
    from deployctl.core.engines.vllm_ascend.support import matrix

    removed = matrix().get("removed_additional_config", {}).get(version, {})
    out = []
    for k in config:
        if k in removed:
            out.append(raw.problem(path + (k,), f"vllm-ascend {version} no longer reads --additional-config key "
                                   f"{k!r} (it would be ignored) [{removed[k]['source']}]",
                                   f"use {removed[k]['instead']}"))
        elif k not in keys:
            close = difflib.get_close_matches(k, list(keys), n=1)
            out.append(raw.problem(path + (k,), f"vllm-ascend {version} reads no "
                                   f"--additional-config key {k!r} (it would be ignored) [source: {source}]",
                                   f"did you mean {close[0]!r}?" if close else "see vllm_ascend/ascend_config.py of "
                                   "that version"))
    return out


def _ascend_env(inv: Inventory, raw: RawInventory, version: str) -> list[Problem]:
    """VLLM_ASCEND_* variables the version does not read are refused (vllm-ascend ignores them silently)."""
    import difflib

    from deployctl.core.engines.vllm_ascend.catalog import ascend_env

    from deployctl.core.engines.vllm_ascend.support import matrix

    known = ascend_env(version)
    removed = matrix().get("removed_env", {}).get(version, {})
    from deployctl.core.input.envcheck import env_sources

    out = []
    for path, env in env_sources(inv):
        for key in env:
            if key in removed:
                out.append(raw.problem(path + (key,), f"vllm-ascend {version} no longer reads {key} "
                                       f"({removed[key]['source']})", f"use {removed[key]['instead']}"))
            elif key.startswith("VLLM_ASCEND_") and key not in known:
                close = difflib.get_close_matches(key, sorted(known), n=1)
                out.append(raw.problem(path + (key,), f"vllm-ascend {version} reads no {key} (it would be ignored)",
                                       f"did you mean {close[0]}?" if close else "see vllm_ascend/envs.py of that "
                                       "version; newer releases moved feature switches into engine.additional_config"))
    return out


def engine_problems(inv: Inventory, raw: RawInventory) -> list[Problem]:
    from deployctl.core.engine_spec.protocol import version_from
    from deployctl.core.engines.vllm_ascend.catalog import known

    version = known(version_from(inv.engine).version)
    e = cast(VllmAscendSettings, inv.engine)
    out = (_args(e.args, ("engine", "args"), raw, version) +
           _additional(e.additional_config, ("engine", "additional_config"), raw, version) +
           _ascend_env(inv, raw, version))
    from deployctl.core.engine_spec.image_hardware import image_problems
    from deployctl.core.engines.vllm_ascend.images import hardware

    out += image_problems(inv, raw, hardware)
    from deployctl.core.input.roles import ROLES, role_block

    for role in ROLES:      # a pd-split role's own args and additional-config, checked the same way at their lines
        own = (cast("RoleLayout", role_block(inv, role)).engine if role_block(inv, role) is not None else {})
        if isinstance(own.get("args"), list):
            out += _args(own["args"], ("layout", role, "engine", "args"), raw, version)
        if isinstance(own.get("additional_config"), dict):
            out += _additional(own["additional_config"], ("layout", role, "engine", "additional_config"), raw,
                               version)
    from deployctl.core.engines.vllm_ascend.catalog import option

    if inv.model.speculative is not None and option(version, "--speculative-config") is None:
        out.append(raw.problem(("model", "speculative"), f"vllm serve {version} has no --speculative-config",
                               "remove model.speculative or use a newer image"))
    from deployctl.core.input.envcheck import env_sources

    for path, env in env_sources(inv):
        for key in OWNED_ENV:
            if key in env:
                out.append(raw.problem(path + (key,), f"{key} is computed per node by deployctl",
                                       "remove it: set nodes[].interface or let preflight find it"))
    from deployctl.core.engines.vllm_ascend.netloader import problems as netloader_problems

    return out + netloader_problems(inv, raw)
