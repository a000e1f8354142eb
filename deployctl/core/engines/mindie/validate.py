"""Inventory checks only MindIE needs: keys deployctl owns in config.json and env, env ranges, ports."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, cast

from deployctl.core.errors import Problem
from deployctl.core.input.envcheck import env_range_problems
from deployctl.core.models.engine_settings.mindie import MindieSettings

if TYPE_CHECKING:
    from deployctl.core.input.raw import RawInventory
    from deployctl.core.models.inventory import Inventory

# engine.config keys deployctl derives from the inventory/plan; a deep-merge over them would
# make config.json disagree with the rank table, the env and the plan.
OWNED_CONFIG_KEYS = {
    ("ServerConfig", "ipAddress"): "nodes[].container_ip (set per node through MIES_CONTAINER_IP)",
    ("ServerConfig", "port"): "engine.ports.http",
    ("ServerConfig", "managementPort"): "engine.ports.management",
    ("ServerConfig", "metricsPort"): "engine.ports.metrics",
    ("ServerConfig", "interCommPort"): "engine.ports.inter_comm",
    ("ServerConfig", "inferMode"): "layout.preset (pd-split sets dmi)",
    ("ServerConfig", "distDPServerEnabled"): "layout.preset (pd-split decode runs distributed DP)",
    ("BackendConfig", "multiNodesInferEnabled"): "the node count of the instance",
    ("BackendConfig", "multiNodesInferPort"): "engine.ports.multi_node",
    ("BackendConfig", "modelInstanceNumber"): "the layout (must be 1 for multi-node)",
    ("BackendConfig", "npuDeviceIds"): "nodes[].devices",
}
# engine.ms keys deployctl derives (ports, IPs, paths, TLS, the instance shapes: ms.py)
OWNED_MS_KEYS: dict[str, dict[str, str | None]] = {
    "controller": {"deploy_mode": "layout.preset", "cluster_port": "engine.ports.cluster",
                   "global_rank_table_file_path": "engine.work_dir", "mindie_server_port": "engine.ports.http",
                   "mindie_server_control_port": "engine.ports.management",
                   "mindie_server_metric_port": "engine.ports.metrics",
                   "controller_alarm_port": "engine.ports.coordinator", "mindie_ms_coordinator_port":
                   "engine.ports.coordinator", "mindie_ms_coordinator_external_port": "engine.ports.coordinator",
                   "initial_dist_server_port": "engine.ports.dist_base",
                   "multi_node_infer_config": "layout (the P and D instance shapes)",
                   "http_server": "engine.ports.controller", "tls_config": "engine.tls"},
    "coordinator": {"http_config": None, "tls_config": "engine.tls"},
}
# http_config keys of the coordinator deployctl sets (the others, e.g. http_timeout_seconds, are the user's)
OWNED_COORDINATOR_HTTP = ("predict_ip", "predict_port", "manage_ip", "manage_port", "alarm_port", "external_port",
                          "status_port")
# env deployctl computes per node; overriding them in engine.env would break the rank-table match
OWNED_ENV_KEYS = ("MIES_CONTAINER_IP", "MIES_CONTAINER_MANAGEMENT_IP", "HOST_IP", "MASTER_IP", "WORLD_SIZE",
                  "RANK_TABLE_FILE", "RANKTABLEFILE", "MIES_CONFIG_JSON_PATH", "GLOBAL_RANK_TABLE_FILE_PATH",
                  "GLOO_SOCKET_IFNAME", "MINDIE_ENABLE_DP_DISTRIBUTED")
# MindIE's share of HBM (the planner reads it); HCCL's variables are checked for every engine (envcheck.py).
# NPU_MEMORY_FRACTION may differ per role (layout.<role>.env): each role's memory fit reads its own value
# (planning/plan.py _fits through roles.for_role) and Motor's PD samples set it per role (MindIE-Motor@5dfb024e
# mindie_motor/src/example/deploy_scripts/conf/mindie_env.json L29-39 prefill, L40-59 decode); it is range-checked
# where it is set.
ENV_RANGES = {"NPU_MEMORY_FRACTION": (0.0, 1.0, False)}


def _env_values(env: dict, raw: RawInventory, inv: Inventory | None = None) -> list[Problem]:
    from deployctl.core.input.envcheck import env_sources

    out = []
    sources = env_sources(inv) if inv is not None else [(("engine", "env"), env)]
    for path, block in sources:
        for key in OWNED_ENV_KEYS:
            if key in block:
                out.append(raw.problem(path + (key,), f"{key} is computed per node by deployctl",
                                       "remove it: set nodes[].container_ip, nodes[].interface or the layout instead"))
        out += env_range_problems(block, raw, ENV_RANGES, path)
    return out


def config_sources(inv: Inventory) -> list[tuple[tuple, dict]]:
    """(key path, overrides) of every config.json override: engine.config, then layout.<role>.engine.config."""
    from deployctl.core.input.roles import ROLES, role_block

    out: list[tuple[tuple, dict]] = [(("engine", "config"), cast(MindieSettings, inv.engine).config)]
    for role in ROLES:
        block = role_block(inv, role)
        config = (block.engine or {}).get("config") if block is not None else None
        if isinstance(config, dict) and config:
            out.append((("layout", role, "engine", "config"), config))
    return out


def _config_keys(inv: Inventory, raw: RawInventory) -> list[Problem]:
    out = []
    for base, config in config_sources(inv):
        where = ".".join(base)
        for section in ("ServerConfig", "BackendConfig", "LogConfig"):
            if section in config and not isinstance(config[section], dict):
                out.append(raw.problem(base + (section,), f"{section} must be a mapping, got {config[section]!r}",
                                       f"{where} is deep-merged into config.json: give only the keys to change "
                                       f"under {section}"))
        for (section, key), instead in OWNED_CONFIG_KEYS.items():
            block = config.get(section)
            if isinstance(block, dict) and key in block:
                out.append(raw.problem(base + (section, key), f"{section}.{key} is set by deployctl",
                                       f"set {instead} instead"))
        backend = config.get("BackendConfig")                   # not a mapping: said above
        deploy = backend.get("ModelDeployConfig") if isinstance(backend, dict) else None
        models = deploy.get("ModelConfig") if isinstance(deploy, dict) else None
        if (inv.model.speculative is not None and isinstance(models, list) and models
                and isinstance(models[0], dict) and "plugin_params" in models[0]):
            out.append(raw.problem(base + ("BackendConfig", "ModelDeployConfig", "ModelConfig", 0, "plugin_params"),
                                   "plugin_params is rendered from model.speculative",
                                   "set the drafts in model.speculative only (or remove model.speculative)"))
    return out


def _ports(e: MindieSettings, raw: RawInventory) -> list[Problem]:
    ports = e.ports.model_dump()
    fixed = {k: v for k, v in ports.items() if k not in ("coordinator", "dist_base")}
    spans = dict(fixed, **{f"coordinator+{i}": ports["coordinator"] + i for i in range(5)})
    clash = [p for p, n in Counter(spans.values()).items() if n > 1]
    if not clash:
        return []
    names = sorted(k for k, v in spans.items() if v in clash)
    user_set = [k for k in names if ("engine", "ports", k.split("+")[0]) in raw.lines]
    key = ("engine", "ports", user_set[0].split("+")[0]) if user_set else ("engine", "ports")
    return [raw.problem(key, f"ports collide: {', '.join(names)} use {clash[0]}",
                        "every engine port needs its own number (host network); "
                        "the coordinator uses 5 ports from engine.ports.coordinator")]


def _ms(e: MindieSettings, raw: RawInventory) -> list[Problem]:
    out = []
    for side, owned in OWNED_MS_KEYS.items():
        block = getattr(e.ms, side)
        for key, instead in owned.items():
            if key not in block:
                continue
            if instead is None:         # only some of its keys are deployctl's
                sub = block[key] if isinstance(block[key], dict) else {k: 1 for k in OWNED_COORDINATOR_HTTP}
                for k in OWNED_COORDINATOR_HTTP:
                    if k in sub:
                        out.append(raw.problem(("engine", "ms", side, key, k), f"{key}.{k} is set by deployctl",
                                               "set engine.ports.coordinator (5 ports from it) or the nodes instead"))
                continue
            out.append(raw.problem(("engine", "ms", side, key), f"{side} {key} is set by deployctl",
                                   f"set {instead} instead"))
    return out


# MindIE-LLM's plugins: "Only 'la', 'memory_decoding', 'prefix_cache', 'mtp' and 'splitfuse' are supported."
# (plugin_utils.py L127-135); mtp takes num_speculative_tokens in [0, 5] (validation_func_mtp L50-55)
PLUGIN_SOURCE = "Ascend/MindIE-LLM@8b4871ad:mindie_llm/text_generator/plugins/plugin_utils.py"
MTP_MAX_TOKENS = 5


def _speculative(inv: Inventory, raw: RawInventory) -> list[Problem]:
    spec = inv.model.speculative
    if spec is None:
        return []
    out = []
    if spec.method != "mtp":
        out.append(raw.problem(("model", "speculative", "method"), f"MindIE runs no {spec.method} drafts: its "
                               f"speculative plugins are mtp, la and memory_decoding ({PLUGIN_SOURCE} L127-135)",
                               "use method: mtp (DeepSeek), or the vllm-ascend engine"))
        return out
    from deployctl.core.input.roles import ROLES, role_block

    tokens = [(("model", "speculative", "tokens"), spec.tokens)] + [
        (("layout", role, "model", "speculative_tokens"), own.speculative_tokens) for role in ROLES
        if (own := getattr(role_block(inv, role), "model", None)) is not None and own.speculative_tokens is not None]
    for path, n in tokens:
        if n > MTP_MAX_TOKENS:
            out.append(raw.problem(path, f"MindIE refuses mtp num_speculative_tokens {n} (at most {MTP_MAX_TOKENS}: "
                                   f"{PLUGIN_SOURCE} L50-55)", f"use 1..{MTP_MAX_TOKENS}"))
    return out


def _assume(e: MindieSettings, raw: RawInventory) -> list[Problem]:
    from deployctl.core.engines.mindie.acceptance import assumable
    from deployctl.core.engines.mindie.assume import MATRIX

    ids = assumable()
    return [raw.problem(("engine", "assume", i, "refusal"), f"no refusal is named {a.refusal!r}",
                        f"name one of {', '.join(MATRIX)} or a MindIE acceptance check id (acceptance.yaml), as "
                        "the refusal's hint says")
            for i, a in enumerate(e.assume) if a.refusal not in ids]


def engine_problems(inv: Inventory, raw: RawInventory) -> list[Problem]:
    e = cast(MindieSettings, inv.engine)
    out = _env_values(e.env, raw, inv)
    out += _config_keys(inv, raw)
    out += _ms(e, raw)
    out += _assume(e, raw)
    out += _speculative(inv, raw)
    out += _ports(e, raw)
    from deployctl.core.engine_spec.image_hardware import image_problems
    from deployctl.core.engines.mindie.images import hardware

    out += image_problems(inv, raw, hardware)
    if inv.kubernetes.rank_table == "cluster" and inv.layout.prefill is not None:
        out.append(raw.problem(("kubernetes", "rank_table"), "rank_table: cluster does not work with pd-split",
                               "MindIE-MS's global rank table names every server's IP, so deployctl must "
                               "place the pods: use rank_table: deployctl"))
    return out
