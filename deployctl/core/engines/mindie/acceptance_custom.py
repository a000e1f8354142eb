"""The acceptance checks of acceptance.yaml that are more than a range, an enum or a pattern (`kind: custom`).

Each function takes (check, config, ranktable, env) and returns [(key, MindIE's message)]; the source lines
are in acceptance.yaml next to the check's id. Values of the wrong type are skipped (the type checks report them).
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from deployctl.core.input.hostile import ipv4_text
from deployctl.core.engines.mindie.acceptance import (INT_RANGES, MISSING, WHEN, fill, get, is_int, resolve, truthy,
                                                 type_name)

MODELS = "BackendConfig.ModelDeployConfig.ModelConfig"
STOI = re.compile(r"^\s*([+-]?\d+)", re.ASCII)   # strtol: C-locale blanks, ASCII digits


_SMALL_INTS = {str(i): i for i in range(1000)}     # device and rank ids: read 400,000 times at 8,192 servers


def stoi(text: object) -> int | None:
    """std::stoi: leading blanks, a sign and digits; None where it throws (no digits, outside int)."""
    if type(text) is str:
        small = _SMALL_INTS.get(text)
        if small is not None:
            return small
        if text.isascii() and text.isdigit() and len(text) < 10:
            return int(text)             # the common case, exactly: digits only, inside int32
    m = STOI.match(text) if isinstance(text, str) else None
    if not m:
        return None
    value = int(m.group(1))
    return value if INT_RANGES["int32_t"][0] <= value <= INT_RANGES["int32_t"][1] else None


def _ip_ok(ip: object, zero_ok: bool) -> bool:
    """common_util.cpp CheckIp: IPv6 when it has ':', IPv4 when it has '.', the all-zero address only if allowed."""
    if not isinstance(ip, str) or not ip:
        return False
    if ":" not in ip and ipv4_text(ip):     # the common case: dotted quad; all-zero has one spelling
        return zero_ok or ip != "0.0.0.0"
    try:
        addr = ipaddress.IPv6Address(ip) if ":" in ip else ipaddress.IPv4Address(ip) if "." in ip else None
    except ValueError:
        return False
    return addr is not None and (zero_ok or not addr.is_unspecified)


def _sets(config: Any) -> list | None:
    ids = get(config, "BackendConfig.npuDeviceIds")
    return ids if isinstance(ids, list) and all(isinstance(s, list) for s in ids) else None


def npu_device_ids(c: dict[str, Any], config: Any, rt: Any, env: dict[str, str]) -> list[tuple[str, str]]:
    ids = get(config, "BackendConfig.npuDeviceIds")
    if not isinstance(ids, list):
        return []
    for s in ids:
        if not isinstance(s, list):
            return [("BackendConfig.npuDeviceIds", "The type of param in each npuDeviceIds set should be array, "
                     f"but is {type_name(s)}")]
        for v in s:
            if not is_int(v) or not 0 <= v < 2**64:
                return [("BackendConfig.npuDeviceIds", fill(c["message"], value=v))]
    return []


def device_sets_count(c: dict[str, Any], config: Any, rt: Any, env: dict[str, str]) -> list[tuple[str, str]]:
    sets, n = _sets(config), get(config, "BackendConfig.modelInstanceNumber")
    return [("BackendConfig.npuDeviceIds", c["message"])] if sets is not None and is_int(n) and len(sets) != n else []


def device_sets_world(c: dict[str, Any], config: Any, rt: Any, env: dict[str, str]) -> list[tuple[str, str]]:
    sets, world = _sets(config), get(config, f"{MODELS}[0].worldSize")
    if sets is None or not is_int(world):
        return []
    return [("BackendConfig.npuDeviceIds", c["message"])] if any(len(s) != world for s in sets) else []


def device_sets_unique(c: dict[str, Any], config: Any, rt: Any, env: dict[str, str]) -> list[tuple[str, str]]:
    """Without a rank table the sets keep their ids: a repeated id shrinks the set below worldSize."""
    sets, world = _sets(config), get(config, f"{MODELS}[0].worldSize")
    if sets is None or not is_int(world) or WHEN["reads_ranktable"](config):
        return []
    ok = all(all(is_int(v) for v in s) and len(set(s)) == world for s in sets)
    return [] if ok else [("BackendConfig.npuDeviceIds", c["message"])]


def kv_pool_path(c: dict[str, Any], config: Any, rt: Any, env: dict[str, str]) -> list[tuple[str, str]]:
    path = get(config, "BackendConfig.kvPoolConfig.configPath", "")
    return [("BackendConfig.kvPoolConfig.configPath", c["message"])] if isinstance(path, str) and len(path) > 500 \
        else []


def inter_node_tls_lists(c: dict[str, Any], config: Any, rt: Any, env: dict[str, str]) -> list[tuple[str, str]]:
    b = get(config, "BackendConfig", {})
    for key in ("interNodeTlsCert", "interNodeTlsPk", "interNodeTlsCaPath", "interNodeTlsCrlPath"):
        if not isinstance(b.get(key), str):
            return [(f"BackendConfig.{key}", "Failed to init tls cfg")]
    for key, most, least in (("interNodeTlsCaFiles", 3, 1), ("interNodeTlsCrlFiles", 3, 0)):
        files = b.get(key)
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            return [(f"BackendConfig.{key}", f"{key} init error")]
        if not least <= len(files) <= most:
            return [(f"BackendConfig.{key}", f"{key} size is invalid")]
    return []


def standard_one_model(c: dict[str, Any], config: Any, rt: Any, env: dict[str, str]) -> list[tuple[str, str]]:
    models = get(config, MODELS)
    if get(config, "BackendConfig.ScheduleConfig.templateType") == "Standard" and isinstance(models, list) \
            and len(models) != 1:
        return [(MODELS, c["message"])]
    return []


def parallel_sizes(c: dict[str, Any], config: Any, rt: Any, env: dict[str, str]) -> list[tuple[str, str]]:
    """dp/sp/cp of every model: strings go through std::stoi, numbers and booleans are cast to int."""
    out = []
    for where, model in resolve(config, f"{MODELS}[*]"):
        if not isinstance(model, dict):
            continue
        for key in ("dp", "sp", "cp"):
            v = model.get(key, MISSING)
            if isinstance(v, str):
                size = stoi(v)
                if size is None:
                    out.append((f"{where}.{key}", f"Invalid value for {key}, which is {v}"))
                    continue
            elif isinstance(v, (int, float)) and v == v and abs(v) < 2**31:
                size = int(v)
            else:
                continue
            if size <= 0:
                out.append((f"{where}.{key}", fill(c["message"], key=key)))
    return out


def npu_mem_size(c: dict[str, Any], config: Any, rt: Any, env: dict[str, str]) -> list[tuple[str, str]]:
    out = []
    for where, v in resolve(config, f"{MODELS}[*].npuMemSize"):
        if is_int(v) and (v == 0 or v <= -2):
            out.append((where, fill(c["message"], value=v)))
    return out


def max_prefill_batch_size(c: dict[str, Any], config: Any, rt: Any, env: dict[str, str]) -> list[tuple[str, str]]:
    """0 means maxBatchSize; otherwise within [1, maxBatchSize]."""
    s = "BackendConfig.ScheduleConfig"
    v, most = get(config, f"{s}.maxPrefillBatchSize"), get(config, f"{s}.maxBatchSize")
    if not is_int(v) or not is_int(most):
        return []
    v = v if v > 0 else most
    if v > most:
        return [(f"{s}.maxPrefillBatchSize", fill(c["message"], value=v, why="is out of bound", bound=most))]
    if v < 1:
        return [(f"{s}.maxPrefillBatchSize", fill(c["message"], value=v, why="is less than", bound=1))]
    return []


def _management_checked(s: dict) -> bool:
    ip, mip = s.get("ipAddress"), s.get("managementIpAddress", s.get("ipAddress"))
    port = s.get("port")
    mport = s.get("managementPort", port)
    return not (mip == ip and mport == port and mport == s.get("metricsPort"))


def server_tls_lists(c: dict[str, Any], config: Any, rt: Any, env: dict[str, str]) -> list[tuple[str, str]]:
    """The TLS file lists are read only when their switch is on; each must be an array of strings."""
    s = get(config, "ServerConfig")
    if not isinstance(s, dict):
        return []
    keys = []
    if s.get("interCommTLSEnabled") is True:
        keys += ["interCommTlsCaFiles", "interCommTlsCrlFiles"]
    if s.get("httpsEnabled") is True:
        keys += ["tlsCaFile", "tlsCrlFiles"]
        if _management_checked(s):
            keys += ["managementTlsCaFile", "managementTlsCrlFiles", "metricsTlsCaFile", "metricsTlsCrlFiles"]
    for key in keys:
        v = s.get(key)
        if isinstance(v, list) and not all(isinstance(f, str) for f in v):
            return [(f"ServerConfig.{key}", fill(c["message"], key=key))]
    return []


def https_ca_count(c: dict[str, Any], config: Any, rt: Any, env: dict[str, str]) -> list[tuple[str, str]]:
    s = get(config, "ServerConfig")
    if not isinstance(s, dict):
        return []
    prefixes = ["tls"] + (["managementTls", "metricsTls"] if _management_checked(s) else [])
    for p in prefixes:
        ca = s.get(f"{p}CaFile" if p == "tls" else f"{p}CaFile")
        if isinstance(ca, list) and all(isinstance(f, str) for f in ca) and not 1 <= len(set(ca)) <= 3:
            return [(f"ServerConfig.{p}CaFile", f"ERR: serverConfig_.{p}CaFile size must in [1, 3] .")]
        crl, crl_path = s.get(f"{p}CrlFiles"), s.get(f"{p}CrlPath")
        if isinstance(crl, list) and all(isinstance(f, str) for f in crl) and crl_path and len(set(crl)) > 3:
            return [(f"ServerConfig.{p}CrlFiles", f"ERR: serverConfig_.{p}CrlFiles size must in [0, 3] .")]
    return []


def ip_address(c: dict[str, Any], config: Any, rt: Any, env: dict[str, str]) -> list[tuple[str, str]]:
    """MIES_CONTAINER_IP replaces ipAddress when set."""
    ip = env.get("MIES_CONTAINER_IP") or get(config, "ServerConfig.ipAddress")
    if not isinstance(ip, str):
        return []
    zero = get(config, "ServerConfig.allowAllZeroIpListening") is True
    return [] if _ip_ok(ip, zero) else [("ServerConfig.ipAddress", fill(c["message"], value=ip))]


def management_ip_address(c: dict[str, Any], config: Any, rt: Any, env: dict[str, str]) -> list[tuple[str, str]]:
    """MIES_CONTAINER_MANAGEMENT_IP, else managementIpAddress, else ipAddress (not MIES_CONTAINER_IP)."""
    ip = env.get("MIES_CONTAINER_MANAGEMENT_IP") or get(config, "ServerConfig.managementIpAddress",
                                                        get(config, "ServerConfig.ipAddress"))
    if not isinstance(ip, str):
        return []
    zero = get(config, "ServerConfig.allowAllZeroIpListening") is True
    return [] if _ip_ok(ip, zero) else [("ServerConfig.managementIpAddress", fill(c["message"], value=ip))]


def cpu_mem_with_preempt(c: dict[str, Any], config: Any, rt: Any, env: dict[str, str]) -> list[tuple[str, str]]:
    preempt = get(config, "BackendConfig.ScheduleConfig.maxPreemptCount")
    if not is_int(preempt) or preempt == 0:
        return []
    return [(where, c["message"]) for where, v in resolve(config, f"{MODELS}[*].cpuMemSize") if is_int(v) and v == 0]


def prefill_tokens_vs_input(c: dict[str, Any], config: Any, rt: Any, env: dict[str, str]) -> list[tuple[str, str]]:
    s = "BackendConfig.ScheduleConfig"
    tokens, need = get(config, f"{s}.maxPrefillTokens"), get(config, "BackendConfig.ModelDeployConfig.maxInputTokenLen")
    mix_exempt = c["sset"] != "LLM23" and get(config, f"{s}.templateType") == "Mix"
    if is_int(tokens) and is_int(need) and tokens < need and not mix_exempt:
        return [(f"{s}.maxPrefillTokens", c["message"])]
    return []


def layerwise_conflicts(c: dict[str, Any], config: Any, rt: Any, env: dict[str, str]) -> list[tuple[str, str]]:
    s = "BackendConfig.ScheduleConfig"
    model = get(config, f"{MODELS}[0]", {})
    model = model if isinstance(model, dict) else {}
    conflicts = [("BackendConfig.multiNodesInferEnabled", "multiNodesInferEnabled.",
                  truthy(config, "BackendConfig.multiNodesInferEnabled")),
                 ("ServerConfig.distDPServerEnabled", "distDPServerEnabled.", truthy(config, "ServerConfig.distDPServerEnabled")),
                 (f"{MODELS}[0].backendType", f"backendType {model.get('backendType')}", model.get("backendType") != "atb"),
                 (f"{MODELS}[0].plugin_type", "plugin_type: splitfuse.", model.get("plugin_type") == "splitfuse"),
                 (f"{s}.templateType", f"templateType {get(config, f'{s}.templateType', '')}",
                  get(config, f"{s}.templateType") != "Standard"),
                 (f"{s}.supportSelectBatch", "supportSelectBatch.", truthy(config, f"{s}.supportSelectBatch")),
                 (f"{s}.bufferResponseEnabled", "bufferResponseEnabled.", truthy(config, f"{s}.bufferResponseEnabled"))]
    return [(key, fill(c["message"], key=what)) for key, what, bad in conflicts if bad][:1]


# ------------------------------------------------------------------ the rank table
def _servers(rt: Any) -> list:
    servers = rt.get("server_list") if isinstance(rt, dict) else None
    return [s for s in servers if isinstance(s, dict)] if isinstance(servers, list) else []


def _devices(server: dict) -> list:
    devices = server.get("device")
    return [d for d in devices if isinstance(d, dict)] if isinstance(devices, list) else []


def _str(node: dict, key: str) -> str:
    """GetStringParamValue: the string, else ""."""
    v = node.get(key)
    return v if isinstance(v, str) else ""


def ranktable_present(c: dict[str, Any], config: Any, rt: Any, env: dict[str, str]) -> list[tuple[str, str]]:
    return [] if rt is not None else [("BackendConfig.multiNodesInferEnabled", c["message"] + " (no rank table is "
                                       "rendered for this node: it runs a single-server instance)")]


def ranktable_server_count(c: dict[str, Any], config: Any, rt: Any, env: dict[str, str]) -> list[tuple[str, str]]:
    if rt is None:
        return []
    if not isinstance(rt, dict) or not isinstance(rt.get("server_count"), str) or stoi(rt["server_count"]) is None:
        return [("server_count", c["message"])]
    if not isinstance(rt.get("server_list"), list):
        return [("server_list", "Parameter server_list is invalid in ranktable file")]
    return []


def _count(rt: Any) -> int | None:
    n = stoi(rt.get("server_count")) if isinstance(rt, dict) else None
    return n if n is not None and n >= 0 else None


def ranktable_count_range(c: dict[str, Any], config: Any, rt: Any, env: dict[str, str]) -> list[tuple[str, str]]:
    n = _count(rt)
    return [("server_count", fill(c["message"], value=n))] if n is not None and not 2 <= n <= 60 else []


def ranktable_count_length(c: dict[str, Any], config: Any, rt: Any, env: dict[str, str]) -> list[tuple[str, str]]:
    n = _count(rt)
    if n is None or not isinstance(rt.get("server_list"), list) or n == len(rt["server_list"]):
        return []
    return [("server_count", fill(c["message"], value=n, bound=len(rt["server_list"])))]


def ranktable_devices(c: dict[str, Any], config: Any, rt: Any, env: dict[str, str]) -> list[tuple[str, str]]:
    servers = _servers(rt)
    if not servers:
        return []
    first = len(_devices(servers[0]))
    if not 1 <= first <= 32:
        return [("server_list[0].device", fill(c["message"], value=first))]
    for i, s in enumerate(servers):
        if len(_devices(s)) != first:
            return [(f"server_list[{i}].device", f"The number of devices in every server node is "
                     f"{len(_devices(s))} which not equal in ranktable file, which is {first}")]
    return []


def ranktable_container_ip(c: dict[str, Any], config: Any, rt: Any, env: dict[str, str]) -> list[tuple[str, str]]:
    for i, s in enumerate(_servers(rt)):
        if _str(s, "container_ip") == "":
            return [(f"server_list[{i}].container_ip", c["message"])]
    return []


def ranktable_device_fields(c: dict[str, Any], config: Any, rt: Any, env: dict[str, str]) -> list[tuple[str, str]]:
    for i, s in enumerate(_servers(rt)):
        for j, d in enumerate(_devices(s)):
            dev, rank = stoi(_str(d, "device_id")), stoi(_str(d, "rank_id"))
            if dev is None or not 0 <= dev <= 63:
                return [(f"server_list[{i}].device[{j}].device_id", f"Parameter device_id is "
                         f"{_str(d, 'device_id')!r}, which is out of allow range [0, 63]." if dev is not None
                         else c["message"])]
            if not _ip_ok(_str(d, "device_ip"), False):
                return [(f"server_list[{i}].device[{j}].device_ip", "Parameter device_ip is invalid in ranktable "
                         "file.")]
            if rank is None or not 0 <= rank <= 511:
                return [(f"server_list[{i}].device[{j}].rank_id", "Parameter rankId in ranktable is out of allow "
                         "range [0, 511].")]
    return []


def ranktable_local_server(c: dict[str, Any], config: Any, rt: Any, env: dict[str, str]) -> list[tuple[str, str]]:
    """After the rank-table update npuDeviceIds are the local server's devices and worldSize the device count
    of the last server listed; the local server is the one whose container_ip is MIES_CONTAINER_IP (or whose
    server_id is HOST_IP). Without MIES_CONTAINER_IP MindIE asks the hostname: not known here."""
    servers, me = _servers(rt), env.get("MIES_CONTAINER_IP")
    if not servers or not me or _sets(config) is None:
        return []
    local = [s for s in servers if _str(s, "container_ip") == me or (env.get("HOST_IP") and
                                                                      _str(s, "server_id") == env["HOST_IP"])]
    ids = [stoi(_str(d, "device_id")) for d in _devices(local[-1])] if local else []
    if any(i is None for i in ids):
        return [("server_list", "Invalid device_id in ranktable file")]
    world = len(_devices(servers[-1]))
    if len(set(ids)) != world:
        why = (f"no server of the rank table has container_ip {me}" if not local else
               f"the local server lists {len(set(ids))} distinct devices, the rank table's last server {world}")
        return [("BackendConfig.npuDeviceIds", f"{c['message']} ({why})")]
    return []


# the checks that read nothing but the rank table (not config.json, not the env): one answer per table
RANKTABLE_ONLY = frozenset({"ranktable_server_count", "ranktable_count_range", "ranktable_count_length",
                            "ranktable_devices", "ranktable_container_ip", "ranktable_device_fields"})

CUSTOM = {name: fn for name, fn in globals().items() if callable(fn) and not name.startswith("_")
          and fn.__module__ == __name__ and name not in ("stoi",)}
# the checks that read the env deployctl exports per node (MIES_CONTAINER_IP, HOST_IP): evaluated for each node
READS_ENV = frozenset({"ip_address", "management_ip_address", "ranktable_local_server"})
