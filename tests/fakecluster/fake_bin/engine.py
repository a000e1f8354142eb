#!/usr/bin/python3
"""Stand-in for MindIE inside a fake container (tests/fakecluster). Standard library only.

The fake image runs it as:
  bin/mindieservice_daemon (bin/mindie_llm_server)   -> engine.py daemon
  bin/ms_controller                                   -> engine.py ms_controller
  bin/ms_coordinator IP PORT MANAGE_IP MANAGE_PORT    -> engine.py ms_coordinator ...

It runs in the container (chroot + private mounts set up by the fake docker), so it sees the container's
paths: the env (--env-file + -e), /etc/deployctl/..., the weights bind, and /dev/davinciN for each --device.
/.fakecluster/settings.json holds the node's engine faults as they were when the container started.

Daemon, in MindIE's order: config.json (MIES_CONFIG_JSON_PATH, else $MIES_INSTALL_PATH/conf/config.json):
a regular file, not a link, owned by this user, mode <= 640 (unless MINDIE_CHECK_INPUTFILES_PERMISSION=0),
valid JSON, documented value ranges; with BackendConfig.multiNodesInferEnabled the rank table at
RANK_TABLE_FILE with MindIE's own checks (ranktable_config.cpp: mode <= 640, string scalars, server_count in
[2, 60] and == len(server_list), devices per server in [1, 32] and equal, container_ip non-empty, device_id
[0, 63], device_ip an IP, rank_id [0, 511]) plus HCCL's (rank ids exactly 0..N-1, device IPs unique,
1.2 super pod rules), the local server (container_ip == MIES_CONTAINER_IP or server_id == HOST_IP), WORLD_SIZE
== devices in the table, the local devices == the /dev/davinciN the container got; the weights
(ModelConfig[0].modelWeightPath with a config.json of mode <= 750 holding torch_dtype and vocab_size).
Then it binds its ports (managementPort + metricsPort on the management IP; on the instance master also
`port`, and interCommPort in dmi mode; the master's rendezvous port multiNodesInferPort), joins the
rendezvous (the server holding rank_id "0" waits for every other server of the table; the others connect
to it), logs `Daemon start success!` and serves until SIGTERM.
"""

import hashlib
import http.server
import ipaddress
import json
import os
import re
import secrets
import signal
import socket
import socketserver
import sys
import threading
import time
import urllib.error
import urllib.request

SETTINGS_PATH = "/.fakecluster/settings.json"
STOP = threading.Event()
READY = threading.Event()
NOT_READY_REASON = ["the service is starting"]
_out_lock = threading.Lock()
PID = os.getpid()


# ---- logging (MindIE's format: [time] [pid] [tid] [component] [LEVEL] [file:line] : [code] message) ----

def _now():
    t = time.time()
    lt = time.localtime(t)
    off = time.strftime("%z", lt)
    return "%s.%03d%s:%s" % (time.strftime("%Y-%m-%d %H:%M:%S", lt), int(t * 1000) % 1000, off[:3], off[3:])


def out(text):
    with _out_lock:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


def log(level, msg, src="llm_daemon.cpp:0", comp="mindie-server", code=None):
    out("[%s] [%d] [%d] [%s] [%s] [%s] : %s%s" % (_now(), PID, threading.get_native_id(), comp, level, src,
                                                 "[%s] " % code if code else "", msg))


class Fatal(Exception):
    """Startup failure: the lines were logged already; exit with `code`."""

    def __init__(self, code=1):
        super().__init__(code)
        self.code = code


def fail(msg, src="llm_daemon.cpp:0", comp="mindie-server", code="MIE04E010101", plain=False):
    if plain:
        out(msg)
    else:
        log("ERROR", msg, src, comp, code)
    raise Fatal(1)


def load_settings():
    try:
        with open(SETTINGS_PATH) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def env(name, default=""):
    return os.environ.get(name, default)


def check_perm_enabled():
    return env("MINDIE_CHECK_INPUTFILES_PERMISSION") != "0"


# ---- MindIE's file checks (FileUtils::RegularFilePath + IsFileValid) ----------------------------

def file_problem(path, max_mode, check_perm=True, max_size=10 * 1024 * 1024):
    """None, or MindIE's error text for `path`."""
    base = os.path.basename(path.rstrip("/")) or path
    if not path:
        return "The file path: %s is empty." % path
    if os.path.islink(path.rstrip("/")):
        return "The file: %s is a link." % base
    if not os.path.exists(path):
        return "The input file: %s is not a regular file or not exists" % base
    if os.path.isfile(path):
        size = os.path.getsize(path)
        if size < 1 or size > max_size:
            return "Read input file: %s failed, file is too large" % base
    if not check_perm:
        return None
    st = os.stat(path)
    if st.st_uid != os.getuid():
        return "Check path: %s failed, by:owner id diff: current process user id is %d, file owner id is %d" % (
            base, os.getuid(), st.st_uid)
    names = {3: "Owner permission", 2: "Owner group permission", 1: "Other group permission"}
    for i in (3, 2, 1):
        shift = (i - 1) * 3
        cur = (st.st_mode >> shift) & 7
        mx = (max_mode >> shift) & 7
        if cur | mx != mx:
            return ("Check path: %s failed, by: Check %s failed: %s current permission is %d, but required no "
                    "greater than %d. Required permisssion is %o, but got permission is %o"
                    % (base, names[i], path, cur, mx, max_mode, st.st_mode & 0o777))
    return None


def read_json_file(path, max_mode, what):
    problem = file_problem(path, max_mode, check_perm_enabled())
    if problem:
        fail(problem, "file_utils.cpp:0", code="MIE04E010102")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except ValueError as e:
        fail("%s is invalid. Please check json format! (%s)" % (what, e), "config_manager.cpp:0",
             code="MIE04E010103")
    except OSError as e:
        fail("Error: Open %s failed: %s" % (what, e.strerror), "config_manager.cpp:0", code="MIE04E010103")


# ---- config.json --------------------------------------------------------------------------------

def _is_ip(v):
    try:
        ipaddress.ip_address(v)
        return True
    except ValueError:
        return False


def config_problems(cfg, multi_expected=None):
    """Documented constraints of config.json (service_parameter_configuration.md), one message each."""
    probs = []

    def need(obj, key, where, types):
        if not isinstance(obj, dict) or key not in obj:
            probs.append("Parameter %s%s is missing in config.json" % (where, key))
            return None
        v = obj[key]
        if not isinstance(v, types) or (isinstance(v, bool) and bool not in (types if isinstance(types, tuple)
                                                                                else (types,))):
            probs.append("Parameter %s%s has a wrong type (%s) in config.json" % (where, key, type(v).__name__))
            return None
        return v

    def rng(v, lo, hi, name):
        if v is not None and not (lo <= v <= hi):
            probs.append("Parameter %s is %s, which is out of allow range [%s, %s]." % (name, v, lo, hi))

    sc = need(cfg, "ServerConfig", "", dict) or {}
    bc = need(cfg, "BackendConfig", "", dict) or {}
    for key in ("port", "managementPort", "metricsPort"):
        rng(need(sc, key, "ServerConfig.", int), 1024, 65535, key)
    ports = [sc.get(k) for k in ("port", "managementPort", "metricsPort") if isinstance(sc.get(k), int)]
    if len(set(ports)) != len(ports):
        probs.append("Parameter port, managementPort and metricsPort must be different, got %s" % ports)
    ip = need(sc, "ipAddress", "ServerConfig.", str)
    if ip is not None and not _is_ip(ip):
        probs.append("Parameter ipAddress %r is not a valid IP address." % ip)
    rng(sc.get("maxLinkNum") if isinstance(sc.get("maxLinkNum"), int) else None, 1, 4096, "maxLinkNum")
    if "tokenTimeout" in sc:
        rng(need(sc, "tokenTimeout", "ServerConfig.", int), 1, 3600, "tokenTimeout")
    if "e2eTimeout" in sc:
        rng(need(sc, "e2eTimeout", "ServerConfig.", int), 1, 65535, "e2eTimeout")
    mode = sc.get("inferMode", "standard")
    if mode not in ("standard", "dmi"):
        probs.append("Parameter inferMode is %r, which should be standard or dmi." % mode)
    rng(need(bc, "multiNodesInferPort", "BackendConfig.", int) if "multiNodesInferPort" in bc else None,
        1024, 65535, "multiNodesInferPort")
    if bc.get("backendName", "mindieservice_llm_engine") != "mindieservice_llm_engine":
        probs.append("Parameter backendName is %r, only mindieservice_llm_engine is supported." % bc.get("backendName"))
    mi = need(bc, "modelInstanceNumber", "BackendConfig.", int)
    rng(mi, 1, 10, "modelInstanceNumber")
    multi = bc.get("multiNodesInferEnabled", False)
    if not isinstance(multi, bool):
        probs.append("Parameter multiNodesInferEnabled must be a bool.")
    if multi and mi not in (None, 1):
        probs.append("Parameter modelInstanceNumber must be 1 when multiNodesInferEnabled is true, got %s." % mi)
    ids = need(bc, "npuDeviceIds", "BackendConfig.", list)
    if ids is not None and (not ids or not all(isinstance(x, list) and x and all(isinstance(i, int) and
                                                                                   not isinstance(i, bool)
                                                                                   for i in x) for x in ids)):
        probs.append("Parameter npuDeviceIds must be a non-empty list of non-empty lists of device ids.")
    elif ids is not None and mi is not None and len(ids) != mi:
        probs.append("Parameter npuDeviceIds has %d groups, modelInstanceNumber is %d." % (len(ids), mi))
    if "tokenizerProcessNumber" in bc:
        rng(need(bc, "tokenizerProcessNumber", "BackendConfig.", int), 1, 32, "tokenizerProcessNumber")
    mdc = need(bc, "ModelDeployConfig", "BackendConfig.", dict) or {}
    msl = need(mdc, "maxSeqLen", "ModelDeployConfig.", int)
    rng(msl, 1, 4194304, "maxSeqLen")
    mil = need(mdc, "maxInputTokenLen", "ModelDeployConfig.", int)
    rng(mil, 1, 4194304, "maxInputTokenLen")
    mcs = need(mdc, "ModelConfig", "ModelDeployConfig.", list)
    if mcs is not None and not mcs:
        probs.append("Parameter ModelConfig must not be empty.")
    for i, mc in enumerate(mcs or []):
        w = "ModelConfig[%d]." % i
        if mc.get("modelInstanceType", "Standard") not in ("Standard", "StandardMock"):
            probs.append("Parameter %smodelInstanceType is %r, which should be Standard or StandardMock."
                         % (w, mc.get("modelInstanceType")))
        name = need(mc, "modelName", w, str)
        if name is not None and (len(name) > 256 or not re.fullmatch(r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?",
                                                                         name)):
            probs.append("Parameter %smodelName %r is invalid: at most 256 of [A-Za-z0-9-._], not starting or "
                         "ending with -._" % (w, name))
        need(mc, "modelWeightPath", w, str)
        ws = need(mc, "worldSize", w, int)
        if ws is not None and ws < 1:
            probs.append("Parameter %sworldSize is %d, which should be > 0." % (w, ws))
        if mc.get("backendType", "atb") not in ("atb", "torch", "ms"):
            probs.append("Parameter %sbackendType is %r, which should be atb or torch." % (w, mc.get("backendType")))
        if "npuMemSize" in mc and isinstance(mc["npuMemSize"], int) and mc["npuMemSize"] != -1 and mc["npuMemSize"] < 1:
            probs.append("Parameter %snpuMemSize is %s, which should be -1 or > 0." % (w, mc["npuMemSize"]))
    sch = need(bc, "ScheduleConfig", "BackendConfig.", dict) or {}
    if sch.get("templateType", "Standard") not in ("Standard", "Mix"):
        probs.append("Parameter templateType is %r, which should be Standard or Mix." % sch.get("templateType"))
    cbs = need(sch, "cacheBlockSize", "ScheduleConfig.", int)
    if cbs is not None and not (1 <= cbs <= 128 and cbs % 16 == 0):
        probs.append("Parameter cacheBlockSize is %d, which should be in [1, 128] and a multiple of 16." % cbs)
    mbs = need(sch, "maxBatchSize", "ScheduleConfig.", int)
    rng(mbs, 1, 819200, "maxBatchSize")
    mpb = sch.get("maxPrefillBatchSize")
    if isinstance(mpb, int) and mbs is not None and not 0 <= mpb <= mbs:
        probs.append("Parameter maxPrefillBatchSize is %d, which is out of allow range [0, %d]." % (mpb, mbs))
    mpt = need(sch, "maxPrefillTokens", "ScheduleConfig.", int)
    rng(mpt, 1, 4194304, "maxPrefillTokens")
    if mpt is not None and mil is not None and msl is not None and mpt < min(mil, msl - 1):
        probs.append("Parameter maxPrefillTokens (%d) must be >= maxInputTokenLen (%d)." % (mpt, min(mil, msl - 1)))
    mit = sch.get("maxIterTimes")
    if isinstance(mit, int) and msl is not None and not 1 <= mit <= msl:
        probs.append("Parameter maxIterTimes is %d, which is out of allow range [1, %d]." % (mit, msl))
    mpc = sch.get("maxPreemptCount", 0)
    if isinstance(mpc, int) and mbs is not None and mpc > mbs:
        probs.append("Parameter maxPreemptCount (%d) must be <= maxBatchSize (%d)." % (mpc, mbs))
    mq = sch.get("maxQueueDelayMicroseconds")
    if isinstance(mq, int):
        rng(mq, 500, 1000000, "maxQueueDelayMicroseconds")
    return probs


def tls_problems(cfg, install):
    """TLS switched on needs the certificates under $MIES_INSTALL_PATH (the fake image ships none)."""
    sc, bc = cfg.get("ServerConfig", {}), cfg.get("BackendConfig", {})
    out_ = []
    checks = [("httpsEnabled", sc, [("tlsCert", sc.get("tlsCert")), ("tlsPk", sc.get("tlsPk"))])]
    if sc.get("inferMode") == "dmi":
        checks.append(("interCommTLSEnabled", sc, [("interCommTlsCert", sc.get("interCommTlsCert"))]))
    if bc.get("multiNodesInferEnabled"):
        checks.append(("interNodeTLSEnabled", bc, [("interNodeTlsCert", bc.get("interNodeTlsCert"))]))
    for switch, where, files in checks:
        if where.get(switch, True) is not False:
            for key, rel in files:
                p = os.path.join(install, rel or "")
                if not rel or not os.path.isfile(p):
                    out_.append("%s is true but %s %s does not exist (put the certificates under %s or switch "
                                "%s off)" % (switch, key, p, install, switch))
                    break
    return out_


# ---- the rank table ------------------------------------------------------------------------------

class Server:
    def __init__(self, server_id, container_ip, devices):
        self.server_id, self.container_ip, self.devices = server_id, container_ip, devices

    @property
    def addr(self):
        return self.container_ip or self.server_id

    def describe(self):
        return "%s (container_ip %s)" % (self.server_id, self.container_ip or "-")


def _s(obj, key, where):
    """GetStringParamValue: every scalar of the rank table is a string."""
    if not isinstance(obj, dict) or key not in obj:
        fail("json object property Name[%s] of %s is missing in ranktable file" % (key, where),
             "ranktable_config.cpp:0", comp="llm")
    v = obj[key]
    if not isinstance(v, str):
        fail("json object property value of Name[%s] is not string! (%s = %r)" % (key, where, v),
             "ranktable_config.cpp:0", comp="llm")
    return v


def parse_ranktable(devices_here, join_timeout):
    """MindIE's RanktableConfigManager + the HCCL checks -> (servers, master, local)."""
    path = env("RANK_TABLE_FILE")
    if not path:
        fail("Ranktable file is not exist, please set a valid ranktable file path with RANK_TABLE_FILE environment.",
             plain=True)
    problem = file_problem(path, 0o640, check_perm_enabled())
    if problem:
        out(problem)
        fail("Ranktable file path is invalid.", "ranktable_config.cpp:0", comp="llm")
    out("Start to parse ranktable file")
    deadline = time.time() + join_timeout
    while True:
        try:
            with open(path, encoding="utf-8") as f:
                doc = json.load(f)
        except ValueError:
            out("Ranktable file is invalid. Please check json format! ")
            fail("Failed to parse the json data of ranktable file data.", "ranktable_config.cpp:0", comp="llm")
        if not isinstance(doc, dict):
            out("Ranktable file is invalid. Please check json format! ")
            fail("Failed to parse the json data of ranktable file data.", "ranktable_config.cpp:0", comp="llm")
        status = doc.get("status")
        if status == "completed":
            break
        if time.time() > deadline or STOP.is_set():    # HCCL polls a table that is not completed yet
            fail("ranktable status is %r, not \"completed\", after %g s" % (status, join_timeout),
                 "ranktable_config.cpp:0", comp="llm")
        time.sleep(0.5)
    if not isinstance(doc.get("server_count"), str):
        out("Ranktable file is invalid. Please check json format! ")
        fail("Failed to parse the json data of ranktable file data.", "ranktable_config.cpp:0", comp="llm")
    try:
        count = int(doc["server_count"])
    except ValueError:
        out("Invalid server_count in ranktable file")
        fail("Failed to parse the json data of ranktable file data.", "ranktable_config.cpp:0", comp="llm")
    if not isinstance(doc.get("server_list"), list):
        out("Parameter server_list is invalid in ranktable file")
        fail("Failed to parse the json data of ranktable file data.", "ranktable_config.cpp:0", comp="llm")
    version = doc.get("version")
    if not isinstance(version, str) or version not in ("1.0", "1.2"):
        fail("ranktable version %r is not supported (\"1.0\" or \"1.2\")" % (version,), "ranktable_config.cpp:0",
             comp="llm")
    servers = []
    for i, se in enumerate(doc["server_list"]):
        where = "server_list[%d]" % i
        sid = _s(se, "server_id", where)
        cip = _s(se, "container_ip", where) if isinstance(se, dict) and "container_ip" in se else ""
        devs = []
        if not isinstance(se.get("device"), list):
            fail("%s.device must be a list in ranktable file" % where, "ranktable_config.cpp:0", comp="llm")
        for j, de in enumerate(se["device"]):
            w = "%s.device[%d]" % (where, j)
            d = {"device_id": _s(de, "device_id", w), "device_ip": _s(de, "device_ip", w),
                 "rank_id": _s(de, "rank_id", w)}
            if version == "1.2":
                d["super_device_id"] = _s(de, "super_device_id", w)
            devs.append(d)
        servers.append(Server(sid, cip, devs))
    out("Finished parsing ranktable file.")
    # RanktableConfigManager::CheckParam
    errs = []
    if not 2 <= count <= 60:
        errs.append("Parameter server_count must be in range [2, 60], but got %d" % count)
    if count != len(servers):
        errs.append("Parameter server_count is %d, which is not equal to server_list length in ranktable file, "
                    "which is %d" % (count, len(servers)))
    local_count = len(servers[0].devices) if servers else 0
    if not 1 <= local_count <= 32:
        errs.append("The number of devices on single node must be in [1, 32], but got %d" % local_count)
    for s in servers:
        if len(s.devices) != local_count:
            errs.append("The number of devices in every server node is %d which not equal in ranktable file, "
                        "which is %d" % (len(s.devices), local_count))
            break
        if s.container_ip == "":
            errs.append("The containerIp in the server node is empty in ranktable file.")
            break
        bad = None
        for d in s.devices:
            if not d["device_id"].isdigit():
                bad = "Parameter device_id is invalid in ranktable file."
            elif int(d["device_id"]) > 63:
                bad = "Parameter device_id is %s, which is out of allow range [0, 63]." % d["device_id"]
            elif not _is_ip(d["device_ip"]):
                bad = "Parameter device_ip is invalid in ranktable file."
            elif not d["rank_id"].isdigit():
                bad = "Parameter rankId is invalid in ranktable file."
            elif int(d["rank_id"]) > 511:
                bad = "Parameter rankId in ranktable is %s, which is out of allow range [0, 511]." % d["rank_id"]
            if bad:
                break
        if bad:
            errs.append(bad)
            break
    for e in errs:
        log("ERROR", e, "ranktable_config.cpp:0", "llm")
    if errs:
        fail("Failed to init ranktable config, please check the ranktable file %s." % path,
             "ranktable_config.cpp:0", comp="llm")
    # HCCL's rules (topoinfo_ranktableParser / Concise)
    hccl = []
    ids = [s.server_id for s in servers]
    if len(set(ids)) != len(ids):
        hccl.append("server_id %s is used repeatedly" % sorted({i for i in ids if ids.count(i) > 1}))
    ranks = sorted(int(d["rank_id"]) for s in servers for d in s.devices)
    if ranks != list(range(len(ranks))):
        hccl.append("rank_id must be 0..%d, each once (must start from 0 or it is used repeatedly): got %s"
                    % (len(ranks) - 1, ranks))
    ips = [d["device_ip"] for s in servers for d in s.devices]
    dup = sorted({i for i in ips if ips.count(i) > 1})
    if dup:
        hccl.append("The IP is used repeatedly: device_ip %s" % ", ".join(dup))
    if version == "1.2":
        pods = doc.get("super_pod_list")
        if not isinstance(pods, list) or not pods:
            hccl.append("super_pod_list is missing in a version 1.2 ranktable")
        else:
            sizes, seen = set(), []
            for p in pods:
                members = [_s(x, "server_id", "super_pod_list") for x in p.get("server_list", [])]
                _s(p, "super_pod_id", "super_pod_list")
                sizes.add(len(members))
                seen += members
                sdids = [d["super_device_id"] for s in servers if s.server_id in members for d in s.devices]
                if any(not x.isdigit() for x in sdids):
                    hccl.append("superDeviceId invalid in super pod %s" % p.get("super_pod_id"))
                if len(set(sdids)) != len(sdids):
                    hccl.append("super_device_id is used repeatedly in super pod %s" % p.get("super_pod_id"))
            if len(sizes) > 1:
                hccl.append("every super pod must have the same number of servers, got %s" % sorted(sizes))
            if sorted(seen) != sorted(ids):
                hccl.append("super_pod_list servers %s do not match server_list %s" % (sorted(seen), sorted(ids)))
    for e in hccl:
        log("ERROR", "[EI0004] " + e, "topoinfo_ranktableParser.cc:0", "hccl")
    if hccl:
        fail("HCCL rank table check failed (EI0004): the ranktable is invalid.", "ranktable_config.cpp:0", comp="llm")
    container_ip, host_ip = env("MIES_CONTAINER_IP"), env("HOST_IP")
    if not container_ip:
        out("The env variable MIES_CONTAINER_IP isn't exist.")
    local = next((s for s in servers if s.container_ip and s.container_ip == container_ip), None) or \
        next((s for s in servers if host_ip and s.server_id == host_ip), None)
    if local is None:
        fail("Can not find the local server in ranktable file: no server_list[].container_ip equals "
             "MIES_CONTAINER_IP=%s and no server_id equals HOST_IP=%s (servers: %s)"
             % (container_ip or "(unset)", host_ip or "(unset)", ", ".join(s.describe() for s in servers)),
             "ranktable_config.cpp:0", comp="llm")
    master = next(s for s in servers if any(d["rank_id"] == "0" for d in s.devices))
    total = sum(len(s.devices) for s in servers)
    ws = env("WORLD_SIZE")
    if ws and ws != str(total):
        fail("WORLD_SIZE=%s in the environment is not equal to the number of devices in ranktable file, which is "
             "%d" % (ws, total), "ranktable_config.cpp:0", comp="llm")
    if len(local.devices) != len(devices_here):
        fail("The local server %s has %d devices in ranktable file, but the container sees %d NPUs (%s)"
             % (local.describe(), len(local.devices), len(devices_here),
                " ".join("/dev/davinci%d" % d for d in devices_here) or "none"), "ranktable_config.cpp:0", comp="llm")
    missing = [d["device_id"] for d in local.devices if int(d["device_id"]) not in devices_here]
    if missing:
        fail("ranktable config devId is inconsistent with the local devId: device_id %s of %s not in the "
             "container (%s)" % (",".join(missing), local.server_id,
                                 " ".join("/dev/davinci%d" % d for d in devices_here) or "no NPUs"),
             "topoinfo_ranktableParser.cc:0", comp="hccl", code="EI0004")
    digest = hashlib.sha256(json.dumps([[s.server_id, s.container_ip, s.devices] for s in servers],
                                       sort_keys=True).encode()).hexdigest()
    return servers, master, local, total, digest


# ---- HTTP --------------------------------------------------------------------------------------

class Server_(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def bind_http(ip, port, handler, what, role):
    try:
        srv = Server_((ip, port), handler)
        srv.role = role
    except OSError as e:
        fail("%s failed to listen on %s:%d: %s (errno %d)" % (what, ip, port, e.strerror, e.errno),
             "http_server.cpp:0", code="MIE04E020401")
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
    return srv


def words(text):
    return re.findall(r"\S+", text or "")


class ApiHandler(http.server.BaseHTTPRequestHandler):
    """Business port (OpenAI API) and management port (health); `self.server.role` says which."""
    server_version = "MindIE-Server"
    sys_version = ""
    ctx = {}

    def log_message(self, fmt, *args):
        pass

    def _json(self, code, obj, headers=()):
        body = (json.dumps(obj) + "\n").encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _error(self, code, message, typ="invalid_request_error", err_code=None, param=None):
        self._json(code, {"error": {"message": message, "type": typ, "param": param, "code": err_code}})

    def do_GET(self):
        role, path = self.server.role, self.path.split("?")[0]
        if role in ("management", "metrics") and path in ("/v2/health/live", "/health/live"):
            return self._json(200, {})
        if role in ("management", "metrics") and path in ("/v2/health/ready", "/health/ready", "/health"):
            if READY.is_set():
                return self._json(200, {})
            return self._json(503, {"error": NOT_READY_REASON[0]})
        if role == "metrics" and path == "/metrics":
            body = ("# HELP request_received_total Count of received requests.\n# TYPE request_received_total "
                    "counter\nrequest_received_total %d\n" % self.ctx.get("requests", 0)).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            return self.wfile.write(body)
        if role == "business" and path == "/v1/models":
            return self._json(200, {"object": "list", "data": [
                {"id": self.ctx["model"], "object": "model", "created": int(self.ctx["started"]),
                 "owned_by": "MindIE Server"}]})
        if role == "business" and path.startswith("/v1/models/"):
            name = path[len("/v1/models/"):]
            if name == self.ctx["model"]:
                return self._json(200, {"id": name, "object": "model", "created": int(self.ctx["started"]),
                                        "owned_by": "MindIE Server"})
            return self._error(404, "The model `%s` does not exist." % name, err_code="model_not_found")
        return self._error(404, "Not Found: %s" % path, typ="not_found")

    def do_POST(self):
        role, path = self.server.role, self.path.split("?")[0]
        if role != "business" or path not in ("/v1/chat/completions", "/v1/completions"):
            return self._error(404, "Not Found: %s" % path, typ="not_found")
        self.ctx["requests"] = self.ctx.get("requests", 0) + 1
        if not READY.is_set():
            return self._json(503, {"error": {"message": "The service is not ready: %s" % NOT_READY_REASON[0],
                                              "type": "service_unavailable", "param": None, "code": 503}})
        try:
            n = int(self.headers.get("Content-Length") or 0)
            req = json.loads(self.rfile.read(n) or b"null")
        except ValueError:
            return self._error(400, "The request body is not valid JSON.")
        if not isinstance(req, dict):
            return self._error(400, "The request body must be a JSON object.")
        answer(self, req, path, self.ctx)


def answer(h, req, path, ctx, source=None):
    """An OpenAI-style completion, deterministic, made up from the request."""
    chat = path.endswith("/chat/completions")
    model = req.get("model")
    if not model:
        return h._error(400, "you must provide a model parameter", param="model")
    if model != ctx["model"]:
        return h._error(404, "The model `%s` does not exist." % model, err_code="model_not_found", param="model")
    if chat:
        msgs = req.get("messages")
        if not isinstance(msgs, list) or not msgs or not all(isinstance(m, dict) and "role" in m for m in msgs):
            return h._error(400, "'messages' must be a non-empty list of {role, content}", param="messages")
        prompt = " ".join(m.get("content") if isinstance(m.get("content"), str) else json.dumps(m.get("content"))
                          for m in msgs)
        last = next((m.get("content") for m in reversed(msgs) if m.get("role") == "user"), "")
    else:
        prompt = req.get("prompt")
        if not isinstance(prompt, str):
            return h._error(400, "'prompt' must be a string", param="prompt")
        last = prompt
    prompt_tokens = len(words(prompt)) + (4 * len(req.get("messages") or []) if chat else 0)
    if prompt_tokens > ctx["max_input"]:
        return h._error(400, "The input length %d exceeds maxInputTokenLen %d." % (prompt_tokens, ctx["max_input"]),
                        param="messages" if chat else "prompt")
    max_tokens = req.get("max_tokens", req.get("max_completion_tokens"))
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1):
        return h._error(400, "max_tokens must be a positive integer", param="max_tokens")
    text = ("This is %s answering from %s (fake MindIE %s, %d devices, instance master %s). You said: %s"
            % (ctx["model"], source or ctx["where"], ctx["mode"], ctx["world"], ctx["master"],
               " ".join(words(last if isinstance(last, str) else json.dumps(last))[:24])))
    toks = words(text)
    limit = max_tokens if max_tokens is not None else max(1, ctx["max_seq"] - prompt_tokens)
    finish = "stop"
    if len(toks) > limit:
        toks, finish = toks[:limit], "length"
    created = int(time.time())
    rid = ("chatcmpl-" if chat else "cmpl-") + secrets.token_hex(12)
    usage = {"prompt_tokens": prompt_tokens, "completion_tokens": len(toks),
             "total_tokens": prompt_tokens + len(toks)}
    if not req.get("stream"):
        if chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": " ".join(toks)}, "logprobs": None,
                      "finish_reason": finish}
        else:
            choice = {"index": 0, "text": " ".join(toks), "logprobs": None, "finish_reason": finish}
        return h._json(200, {"id": rid, "object": "chat.completion" if chat else "text_completion",
                             "created": created, "model": ctx["model"], "choices": [choice], "usage": usage})
    h.send_response(200)
    h.send_header("Content-Type", "text/event-stream")
    h.send_header("Cache-Control", "no-cache")
    h.send_header("Connection", "close")
    h.end_headers()
    obj = "chat.completion.chunk" if chat else "text_completion"

    def chunk(delta, finish_reason=None, extra=None):
        c = {"index": 0, "logprobs": None, "finish_reason": finish_reason}
        if chat:
            c["delta"] = delta
        else:
            c["text"] = delta.get("content", "")
        doc = {"id": rid, "object": obj, "created": created, "model": ctx["model"], "choices": [c]}
        if extra:
            doc.update(extra)
        h.wfile.write(("data: " + json.dumps(doc) + "\n\n").encode())
        h.wfile.flush()

    try:
        if chat:
            chunk({"role": "assistant", "content": ""})
        for i, t in enumerate(toks):
            chunk({"content": (" " if i else "") + t})
            time.sleep(0.002)
        chunk({}, finish)
        if (req.get("stream_options") or {}).get("include_usage"):
            h.wfile.write(("data: " + json.dumps({"id": rid, "object": obj, "created": created, "model": ctx["model"],
                                                  "choices": [], "usage": usage}) + "\n\n").encode())
        h.wfile.write(b"data: [DONE]\n\n")
        h.wfile.flush()
    except (BrokenPipeError, ConnectionResetError):
        pass


# ---- the multi-node rendezvous (what HCCL's root-info exchange amounts to) -----------------------

def send(conn, obj):
    conn.sendall((json.dumps(obj) + "\n").encode())


_buffers = {}


def recv_line(conn, deadline):
    """The next JSON line from `conn` (bytes after it stay buffered for the next call)."""
    buf = _buffers.pop(conn.fileno(), b"")
    while b"\n" not in buf:
        remaining = deadline - time.time()
        if remaining <= 0 or STOP.is_set():
            _buffers[conn.fileno()] = buf
            raise TimeoutError()
        conn.settimeout(min(remaining, 0.2))
        try:
            chunk = conn.recv(4096)
        except socket.timeout:
            continue
        if not chunk:
            raise ConnectionError("connection closed")
        buf += chunk
    line, rest = buf.split(b"\n", 1)
    if rest:
        _buffers[conn.fileno()] = rest
    return json.loads(line.decode())


def watch_peer(conn, who):
    """After the start: a peer that goes away breaks the communicator (HCCL heartbeat lost)."""
    def run():
        conn.settimeout(None)
        try:
            while True:
                data = conn.recv(4096)
                if not data:
                    break
        except OSError:
            pass
        if STOP.is_set():
            return
        READY.clear()
        NOT_READY_REASON[0] = "lost %s" % who
        log("ERROR", "[EI0010] HCCL heartbeat lost: the connection with %s is broken; the communicator is "
                     "unusable, exiting" % who, "heartbeat.cc:0", "hccl")
        log("ERROR", "Daemon wait pid with %d exit, Please check the service log or python log." % PID,
            "llm_daemon.cpp:76", code="MIE04E010109")
        out("Daemon is killing...")
        os._exit(1)
    threading.Thread(target=run, daemon=True).start()


def rendezvous_master(lsock, servers, local, timeout, digest, started):
    others = {s.addr: s for s in servers if s is not local}
    log("INFO", "Multi-node master %s waiting for %d server(s) on %s:%d (timeout %g s)"
        % (local.server_id, len(others), lsock.getsockname()[0], lsock.getsockname()[1], timeout),
        "multi_node.cpp:0")
    joined = {}
    deadline = started + timeout
    lsock.settimeout(0.2)
    while len(joined) < len(others):
        if STOP.is_set():
            raise Fatal(0)
        if time.time() > deadline:
            missing = [s for a, s in others.items() if a not in joined]
            for conn in joined.values():
                try:
                    send(conn, {"abort": "servers did not join within %g s: %s"
                                         % (timeout, ", ".join(s.server_id for s in missing))})
                except OSError:
                    pass
            log("ERROR", "[EI0006] Getting socket times out. Reason: 1. The remote does not initiate a connect "
                         "request; some NPUs in the cluster are abnormal. 2. The remote does not initiate a connect "
                         "request because the collective communication operator is started too late or is not "
                         "started by some NPU in the cluster. Servers of the ranktable that did not connect to the "
                         "master %s within %g s: %s" % (local.addr, timeout,
                                                         ", ".join(s.describe() for s in missing)),
                "hccl_socket.cc:0", "hccl")
            log("ERROR", "Failed to init multi-node communicator (rank 0, timeout %g s)." % timeout,
                "multi_node.cpp:0", code="MIE04E010110")
            out("Daemon is killing...")
            raise Fatal(1)
        try:
            conn, peer = lsock.accept()
        except socket.timeout:
            continue
        try:
            hello = recv_line(conn, time.time() + 5)
        except (TimeoutError, ConnectionError, ValueError):
            conn.close()
            continue
        addr = hello.get("addr")
        server = others.get(addr)
        if server is None:
            send(conn, {"abort": "%s is not a server of the master's ranktable" % addr})
            log("WARN", "refused a connection from %s (%s): not in the ranktable" % (addr, peer[0]),
                "multi_node.cpp:0")
            conn.close()
            continue
        if hello.get("digest") != digest:
            reason = ("the ranktable of %s differs from the master's (every server must use the same "
                      "ranktable)" % server.describe())
            for c in list(joined.values()) + [conn]:
                try:
                    send(c, {"abort": reason})
                except OSError:
                    pass
            log("ERROR", "[EI0004] " + reason, "topoinfo_ranktableParser.cc:0", "hccl")
            out("Daemon is killing...")
            raise Fatal(1)
        if hello.get("config") != ApiHandler.ctx.get("config_digest"):
            log("WARN", "config.json of %s differs from the master's (ModelDeployConfig/ScheduleConfig); MindIE "
                        "expects the same config on every node" % server.describe(), "multi_node.cpp:0")
        if addr in joined:
            joined[addr].close()
        joined[addr] = conn
        send(conn, {"ack": True})
        log("INFO", "server %s joined (%d/%d)" % (server.describe(), len(joined), len(others)), "multi_node.cpp:0")
    for addr, conn in joined.items():
        try:
            send(conn, {"go": True})
        except OSError:
            pass                   # it died meanwhile: its watcher below notices
        watch_peer(conn, "server %s" % others[addr].describe())
    log("INFO", "All %d servers of the ranktable joined; multi-node communicator initialized." % len(servers),
        "multi_node.cpp:0")


def rendezvous_worker(master, local, port, timeout, digest, started):
    deadline = started + timeout
    log("INFO", "Connecting to the multi-node master %s at %s:%d (timeout %g s)"
        % (master.server_id, master.addr, port, timeout), "multi_node.cpp:0")
    conn = None
    while conn is None:
        if STOP.is_set():
            raise Fatal(0)
        if time.time() > deadline:
            log("ERROR", "[EI0006] Getting socket times out. Reason: the master %s did not accept a connection "
                         "on %s:%d within %g s (is the engine running there?)" % (master.describe(), master.addr,
                                                                                   port, timeout),
                "hccl_socket.cc:0", "hccl")
            log("ERROR", "Failed to init multi-node communicator (timeout %g s)." % timeout, "multi_node.cpp:0",
                code="MIE04E010110")
            out("Daemon is killing...")
            raise Fatal(1)
        try:
            conn = socket.create_connection((master.addr, port), timeout=1)
        except OSError:
            time.sleep(0.2)
    send(conn, {"addr": local.addr, "server_id": local.server_id, "devices": len(local.devices), "digest": digest,
                "config": ApiHandler.ctx.get("config_digest")})
    while True:
        try:
            msg = recv_line(conn, deadline)
        except TimeoutError:
            if STOP.is_set():
                raise Fatal(0)
            log("ERROR", "[EI0006] Getting socket times out. Reason: the master %s did not start the communicator "
                         "within %g s (some servers of the ranktable did not join)" % (master.describe(), timeout),
                "hccl_socket.cc:0", "hccl")
            out("Daemon is killing...")
            raise Fatal(1)
        except (ConnectionError, OSError, ValueError):
            log("ERROR", "[EI0006] the connection to the master %s was closed during the communicator init"
                % master.describe(), "hccl_socket.cc:0", "hccl")
            out("Daemon is killing...")
            raise Fatal(1)
        if msg.get("abort"):
            log("ERROR", "The master %s aborted the multi-node init: %s" % (master.describe(), msg["abort"]),
                "multi_node.cpp:0", code="MIE04E010110")
            out("Daemon is killing...")
            raise Fatal(1)
        if msg.get("go"):
            watch_peer(conn, "the master %s" % master.describe())
            log("INFO", "Multi-node communicator initialized (master %s)." % master.describe(), "multi_node.cpp:0")
            return


# ---- daemon -------------------------------------------------------------------------------------

def wait_stop():
    while not STOP.wait(1):
        pass
    raise Fatal(0)


def sleep_or_stop(seconds):
    if STOP.wait(seconds):
        raise Fatal(0)


def visible_devices():
    try:
        names = os.listdir("/dev")
    except OSError:
        return []
    return sorted(int(m.group(1)) for m in (re.fullmatch(r"davinci(\d+)", n) for n in names) if m)


def daemon():
    settings = load_settings()
    faults = settings.get("engine") or {}
    t0 = time.time()
    out("[%s] [%d] [%d] [mindie-server] ===init log===" % (_now(), PID, PID))
    install = env("MIES_INSTALL_PATH") or os.path.abspath(os.path.join(os.path.dirname(sys.argv[0] or "."), ".."))
    if not install or not os.path.isdir(install):
        install = os.getcwd()
    cfg_path = env("MIES_CONFIG_JSON_PATH") or os.path.join(install, "conf", "config.json")
    cfg = read_json_file(cfg_path, 0o640, "config.json")
    if faults.get("reject_config"):
        reason = faults["reject_config"] if isinstance(faults["reject_config"], str) else \
            "BackendConfig.ModelDeployConfig is not supported by this MindIE version"
        fail("Check config.json failed: %s (%s)" % (reason, cfg_path), "config_manager.cpp:0", code="MIE04E010103")
    probs = config_problems(cfg) + tls_problems(cfg, install)
    for p in probs:
        log("ERROR", p, "config_manager.cpp:0", code="MIE04E010103")
    if probs:
        fail("Failed to init config manager: config.json %s is invalid." % cfg_path, "config_manager.cpp:0",
             code="MIE04E010103")
    sc, bc = cfg["ServerConfig"], cfg["BackendConfig"]
    mdc = bc["ModelDeployConfig"]
    mc = mdc["ModelConfig"][0]
    mode = sc.get("inferMode", "standard")
    ip = env("MIES_CONTAINER_IP") or sc["ipAddress"]
    mgmt_ip = env("MIES_CONTAINER_MANAGEMENT_IP") or sc.get("managementIpAddress") or ip
    for what, addr in (("MIES_CONTAINER_IP", ip), ("MIES_CONTAINER_MANAGEMENT_IP", mgmt_ip)):
        if not _is_ip(addr):
            fail("%s %r is not a valid IP address." % (what, addr), "config_manager.cpp:0", code="MIE04E010103")
        if addr in ("0.0.0.0", "::") and not sc.get("allowAllZeroIpListening"):
            fail("%s is %s but allowAllZeroIpListening is false." % (what, addr), "config_manager.cpp:0",
                 code="MIE04E010103")
    devices = visible_devices()
    multi = bool(bc.get("multiNodesInferEnabled"))
    join_timeout = float(faults.get("join_timeout") or 15)
    if multi:
        servers, master, local, world, digest = parse_ranktable(devices, join_timeout)
        is_master = local is master
        out("Update worldSize and npuDeviceIds of backend config successfully for Multi Nodes Inference.")
        if env("MASTER_IP") and env("MASTER_IP") not in (master.server_id, master.container_ip):
            log("WARN", "MASTER_IP=%s is not the master of the ranktable (%s)" % (env("MASTER_IP"), master.describe()),
                "multi_node.cpp:0")
    else:
        servers, local, master, digest = None, None, None, None
        is_master = True
        ids = bc["npuDeviceIds"][0]
        bad = [i for i in ids if i >= len(devices)]
        if bad:
            fail("npuDeviceIds %s: the container sees %d NPUs (%s), logical ids must be < %d"
                 % (ids, len(devices), " ".join("/dev/davinci%d" % d for d in devices) or "none", len(devices)),
                 "config_manager.cpp:0", code="MIE04E010103")
        if mc["worldSize"] != len(ids):
            fail("Parameter worldSize (%d) must equal the number of npuDeviceIds (%d) on a single node."
                 % (mc["worldSize"], len(ids)), "config_manager.cpp:0", code="MIE04E010103")
        world = len(ids)
    # the weights (ParamChecker::GetJsonData: config.json at most 750, owned by us)
    wpath = mc["modelWeightPath"]
    if not os.path.isdir(wpath):
        fail("The path %s realpath parsing failed. modelWeightPath of %s is not a directory."
             % (wpath, mc["modelName"]), "param_checker.cpp:0", code="MIE04E010103")
    wcfg_path = os.path.join(wpath, "config.json")
    problem = file_problem(wcfg_path, 0o750, check_perm_enabled())
    if problem:
        out(problem)
        fail("Failed to read the model config.json of %s in %s" % (mc["modelName"], wpath), "param_checker.cpp:0",
             code="MIE04E010103")
    try:
        with open(wcfg_path) as f:
            wcfg = json.load(f)
    except (OSError, ValueError):
        fail("ERR: model config.json file is invalid. Please check it! ", plain=True)
    lacking = [k for k in ("torch_dtype", "vocab_size") if k not in wcfg]
    if lacking:
        fail("model config.json in %s lacks %s" % (wpath, ", ".join(lacking)), "param_checker.cpp:0",
             code="MIE04E010103")
    # ports: bind everything before loading, a busy port fails now
    ApiHandler.ctx = {"model": mc["modelName"], "started": t0, "max_input": min(mdc["maxInputTokenLen"],
                                                                                 mdc["maxSeqLen"] - 1),
                      "max_seq": mdc["maxSeqLen"], "mode": mode, "world": world,
                      "where": settings.get("node") or socket.gethostname(),
                      "master": (master.server_id if master else ip),
                      "config_digest": hashlib.sha256(json.dumps([mdc, bc.get("ScheduleConfig")],
                                                                 sort_keys=True).encode()).hexdigest()}
    http_servers = []

    def serve(addr, port, role, what):
        http_servers.append(bind_http(addr, port, ApiHandler, what, role))

    lsock = None
    if multi and is_master:
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            lsock.bind((ip, int(bc.get("multiNodesInferPort", 1120))))
            lsock.listen(128)
        except OSError as e:
            fail("multi-node master failed to listen on %s:%d: %s (errno %d)" % (
                ip, int(bc.get("multiNodesInferPort", 1120)), e.strerror, e.errno), "multi_node.cpp:0",
                code="MIE04E020401")
    serve(mgmt_ip, sc["managementPort"], "management", "management HttpServer")
    serve(mgmt_ip, sc["metricsPort"], "metrics", "metrics HttpServer")
    if is_master:
        serve(ip, sc["port"], "business", "HttpServer")
        if mode == "dmi":
            isock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            isock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                isock.bind((ip, int(sc.get("interCommPort", 1121))))
                isock.listen(16)
            except OSError as e:
                fail("interComm server failed to listen on %s:%d: %s (errno %d)" % (
                    ip, int(sc.get("interCommPort", 1121)), e.strerror, e.errno), "http_server.cpp:0",
                    code="MIE04E020401")
    log("INFO", "MindIE Server (fake) %s: model %s, %s, %d device(s) here, world size %d%s"
        % (settings.get("node") or "", mc["modelName"], mode, len(devices), world,
           ", multi-node %s" % ("master" if is_master else "slave") if multi else ""), "llm_daemon.cpp:0")
    crash_on = faults.get("crash_on") or ""
    if crash_on and "=" in crash_on and os.environ.get(crash_on.split("=", 1)[0]) == crash_on.split("=", 1)[1]:
        faults = dict(faults, crash="HBM ECC error while loading weights (%s)" % crash_on)
    if faults.get("crash"):
        sleep_or_stop(0.3)
        msg = faults["crash"] if isinstance(faults["crash"], str) else (
            "NPU out of memory. Tried to allocate 450.00 MiB (NPU 0; 60.97 GiB total capacity; 14.67 GiB already "
            "allocated; 14.67 GiB current active; 22.66 MiB free; 14.71 GiB reserved in total by PyTorch)")
        log("ERROR", "[Model]\t>>> Exception:%s" % msg, "model.py:40")
        out("RuntimeError: %s" % msg)
        log("ERROR", "[Model]\t>>> return initialize error result: {'status': 'error', 'npuBlockNum': '0', "
                     "'cpuBlockNum': '0'}", "model.py:43", code="MIE04E13030A")
        log("ERROR", "[daemon] Daemon wait pid with %d exit, Please check the service log or python log." % PID,
            "llm_daemon.cpp:76", code="MIE04E010109")
        out("Daemon is killing...")
        raise Fatal(1)
    slow = float(faults.get("slow_start") or 0)
    if slow > 0:
        NOT_READY_REASON[0] = "loading the weights"
        log("INFO", "Loading the weights of %s from %s ..." % (mc["modelName"], wpath), "model_runner.py:0")
        sleep_or_stop(slow)
    if multi:
        NOT_READY_REASON[0] = "waiting for the multi-node communicator"
        if is_master:
            rendezvous_master(lsock, servers, local, join_timeout, digest, t0)
        else:
            rendezvous_worker(master, local, int(bc.get("multiNodesInferPort", 1120)), join_timeout, digest, t0)
    if faults.get("never_ready"):
        NOT_READY_REASON[0] = "the model has not finished warming up"
        log("INFO", "Warming up the model ...", "generator.py:0")
        wait_stop()
    READY.set()
    out("Daemon start success!")
    wait_stop()


# ---- MindIE-MS --------------------------------------------------------------------------------

def ms_log(level, msg, comp="ms_controller", src="main.cpp:0"):
    log(level, msg, src, comp)


def global_table():
    path = env("GLOBAL_RANK_TABLE_FILE_PATH")
    if not path:
        fail("GLOBAL_RANK_TABLE_FILE_PATH is not set.", comp="ms", code="MIE03E000001")
    doc = read_json_file(path, 0o640, "global ranktable")
    if doc.get("status") != "completed":
        fail("global ranktable status is %r, not \"completed\"." % doc.get("status"), comp="ms", code="MIE03E000002")
    groups = doc.get("server_group_list")
    if not isinstance(groups, list):
        fail("global ranktable has no server_group_list.", comp="ms", code="MIE03E000002")
    probs, instances = [], []
    by_id = {}
    for g in groups:
        gid = g.get("group_id")
        if not isinstance(gid, str):
            probs.append("group_id %r is not a string" % (gid,))
            continue
        by_id[gid] = g
        sl = g.get("server_list")
        if not isinstance(sl, list) or not isinstance(g.get("server_count"), str) or \
                not g["server_count"].isdigit() or int(g["server_count"]) != len(sl):
            probs.append("group %s: server_count %r is not the length of server_list" % (gid, g.get("server_count")))
            continue
        if int(gid) >= 2:
            masters = []
            for s in sl:
                for key in ("server_id", "server_ip", "predict_port", "mgmt_port"):
                    if not isinstance(s.get(key), str):
                        probs.append("group %s: server %s: %s must be a string" % (gid, s.get("server_id"), key))
                if not _is_ip(str(s.get("server_ip"))):
                    probs.append("group %s: server_ip %r is not an IP" % (gid, s.get("server_ip")))
                devs = s.get("device")
                if not isinstance(devs, list) or not 1 <= len(devs) <= 128:
                    probs.append("group %s: server %s: device list length must be in [1, 128]" % (gid, s.get("server_id")))
                    continue
                for d in devs:
                    for key in ("device_id", "device_ip", "rank_id"):
                        if not isinstance(d.get(key), str):
                            probs.append("group %s: server %s: device %s must be a string"
                                         % (gid, s.get("server_id"), key))
                if any(d.get("rank_id") == "0" for d in devs):
                    masters.append(s)
            if len(masters) != 1:
                probs.append("group %s: %d servers hold rank_id \"0\"" % (gid, len(masters)))
            else:
                m = masters[0]
                instances.append({"group": gid, "role": {"0": "prefill", "1": "decode"}.get(g.get("deploy_server"),
                                                                                           "server"),
                                  "ip": m.get("server_ip"), "port": int(m.get("predict_port") or 0),
                                  "mgmt": int(m.get("mgmt_port") or 0), "servers": len(sl)})
    for gid in ("0", "1"):
        if gid not in by_id:
            probs.append("group %s (%s) is missing" % (gid, "coordinator" if gid == "0" else "controller"))
    if not instances:
        probs.append("no server groups (group_id >= 2)")
    for p in probs:
        log("ERROR", "global ranktable: " + p, "global_ranktable.cpp:0", "ms")
    if probs:
        fail("Failed to load the global ranktable %s." % path, "global_ranktable.cpp:0", comp="ms",
             code="MIE03E000002")
    return instances


def instance_ready(inst):
    try:
        with urllib.request.urlopen("http://%s:%d/v2/health/ready" % (inst["ip"], inst["mgmt"]), timeout=1) as r:
            return r.status == 200
    except (OSError, urllib.error.URLError):
        return False


def ms_controller():
    path = env("MINDIE_MS_CONTROLLER_CONFIG_FILE_PATH")
    if not path:
        fail("MINDIE_MS_CONTROLLER_CONFIG_FILE_PATH is not set.", comp="ms_controller", code="MIE03E000001")
    cfg = read_json_file(path, 0o640, "ms_controller.json")
    for key in ("deploy_mode", "http_server"):
        if key not in cfg:
            fail("ms_controller.json lacks %s." % key, comp="ms_controller", code="MIE03E000001")
    instances = global_table()
    hs = cfg["http_server"]
    MsHandler.ctx = {"instances": instances}
    bind_http(hs.get("ip"), int(hs.get("port")), MsHandler, "controller http server", "controller")
    ms_log("INFO", "MindIE-MS controller started: %s, %d instance(s): %s" % (
        cfg["deploy_mode"], len(instances),
        ", ".join("%s %s:%d" % (i["role"], i["ip"], i["port"]) for i in instances)))
    announced = False
    while not STOP.wait(0.3):
        ok = all(instance_ready(i) for i in instances)
        if ok and not announced:
            ms_log("INFO", "All instances are ready; the cluster status is normal.")
            READY.set()
            announced = True
        elif not ok and announced:
            ms_log("WARN", "An instance is not ready any more.")
            READY.clear()
            announced = False
    raise Fatal(0)


class MsHandler(ApiHandler):
    server_version = "MindIE-MS"
    ctx = {}

    def do_GET(self):
        path = self.path.split("?")[0]
        if path in ("/v1/health", "/v1/startup", "/v2/health/live", "/health"):
            return self._json(200, {})
        if path in ("/v1/readiness", "/v2/health/ready"):
            return self._json(200, {}) if READY.is_set() else self._json(503, {"error": NOT_READY_REASON[0]})
        if path == "/v1/instances":
            return self._json(200, {"instances": self.ctx.get("instances", [])})
        if self.server.role == "predict" and path == "/v1/models":
            return self._relay("GET", path, None)
        return self._error(404, "Not Found: %s" % path, typ="not_found")

    def do_POST(self):
        path = self.path.split("?")[0]
        if self.server.role != "predict" or path not in ("/v1/chat/completions", "/v1/completions"):
            return self._error(404, "Not Found: %s" % path, typ="not_found")
        if not READY.is_set():
            return self._json(503, {"error": {"message": "MindIE-MS coordinator is not ready: %s" % NOT_READY_REASON[0],
                                              "type": "service_unavailable", "param": None, "code": 503}})
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        return self._relay("POST", path, body)

    def _relay(self, method, path, body):
        """Prefill on the P instance, then the answer from the D instance (streamed through as it comes)."""
        insts = self.ctx["instances"]
        p = next((i for i in insts if i["role"] == "prefill"), insts[0])
        d = next((i for i in insts if i["role"] == "decode"), insts[-1])
        try:
            if method == "POST":
                req = json.loads(body or b"null")
                if isinstance(req, dict):
                    pre = dict(req, stream=False, max_tokens=1)
                    pre.pop("max_completion_tokens", None)
                    r = urllib.request.Request("http://%s:%d%s" % (p["ip"], p["port"], path),
                                               data=json.dumps(pre).encode(), method="POST",
                                               headers={"Content-Type": "application/json"})
                    try:
                        urllib.request.urlopen(r, timeout=30).read()
                    except urllib.error.HTTPError as e:
                        return self._passthrough(e.code, e.headers, e.read())
            r = urllib.request.Request("http://%s:%d%s" % (d["ip"], d["port"], path), data=body, method=method,
                                       headers={"Content-Type": "application/json"})
            try:
                resp = urllib.request.urlopen(r, timeout=60)
            except urllib.error.HTTPError as e:
                return self._passthrough(e.code, e.headers, e.read())
        except (OSError, urllib.error.URLError) as e:
            return self._json(503, {"error": {"message": "no instance answered: %s" % e, "type": "service_unavailable",
                                              "param": None, "code": 503}})
        ctype = resp.headers.get("Content-Type", "application/json")
        if ctype.startswith("text/event-stream"):
            self.send_response(200)
            self.send_header("Content-Type", ctype)
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                for line in resp:
                    self.wfile.write(line)
                    self.wfile.flush()
            except (BrokenPipeError, ConnectionResetError):
                pass
            return None
        return self._passthrough(resp.status, resp.headers, resp.read())

    def _passthrough(self, code, headers, data):
        self.send_response(code)
        self.send_header("Content-Type", headers.get("Content-Type", "application/json"))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def ms_coordinator(argv):
    if len(argv) != 4 or not all(a for a in argv):
        fail("Usage: ms_coordinator PREDICT_IP PREDICT_PORT MANAGE_IP MANAGE_PORT (got %s)" % argv,
             comp="ms_coordinator", code="MIE03E000001")
    pip, pport, mip, mport = argv
    for ip_ in (pip, mip):
        if not _is_ip(ip_):
            fail("%r is not a valid IP address." % ip_, comp="ms_coordinator", code="MIE03E000001")
    for port in (pport, mport):
        if not port.isdigit() or not 1024 <= int(port) <= 65535:
            fail("port %r is out of allow range [1024, 65535]." % port, comp="ms_coordinator", code="MIE03E000001")
    path = env("MINDIE_MS_COORDINATOR_CONFIG_FILE_PATH")
    if not path:
        fail("MINDIE_MS_COORDINATOR_CONFIG_FILE_PATH is not set.", comp="ms_coordinator", code="MIE03E000001")
    cfg = read_json_file(path, 0o640, "ms_coordinator.json")
    if "http_config" not in cfg:
        fail("ms_coordinator.json lacks http_config.", comp="ms_coordinator", code="MIE03E000001")
    instances = global_table()
    MsHandler.ctx = {"instances": instances}
    for ip_, port, role in ((pip, int(pport), "predict"), (mip, int(mport), "manage")):
        bind_http(ip_, port, MsHandler, "coordinator %s server" % role, role)
    NOT_READY_REASON[0] = "waiting for the instances"
    ms_log("INFO", "MindIE-MS coordinator listening on %s:%s (predict) and %s:%s (manage); waiting for %s" % (
        pip, pport, mip, mport, ", ".join("%s %s:%d" % (i["role"], i["ip"], i["mgmt"]) for i in instances)),
        comp="ms_coordinator")
    announced = False
    while not STOP.wait(0.25):
        ok = all(instance_ready(i) for i in instances)
        if ok and not announced:
            READY.set()
            out("MindIE-MS coordinator is ready!")
            announced = True
        elif not ok and announced:
            READY.clear()
            NOT_READY_REASON[0] = "an instance is not ready"
            ms_log("WARN", "An instance is not ready any more; requests are refused.", comp="ms_coordinator")
            announced = False
    raise Fatal(0)


def main():
    signal.signal(signal.SIGTERM, lambda *_: STOP.set())
    signal.signal(signal.SIGINT, lambda *_: STOP.set())
    role = sys.argv[1] if len(sys.argv) > 1 else "daemon"
    try:
        if role == "daemon":
            daemon()
        elif role == "ms_controller":
            ms_controller()
        elif role == "ms_coordinator":
            ms_coordinator(sys.argv[2:])
        else:
            out("unknown role %r" % role)
            return 2
    except Fatal as f:
        if f.code == 0 and role == "daemon":
            out("Daemon is killing...")
        return f.code
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    os._exit(code)
