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
to it), logs `Daemon start success!` and serves until SIGTERM. Monitoring: GET /metrics on the metrics port with
MIES_SERVICE_MONITOR_MODE=1, GET /metrics-json on the management port (see MONITOR_HELP). Settings `engine.timing`
(node spec engine_timing) paces the answers (openai_fake.Timing); MindIE-MS's coordinator marks its decode request
as prefilled.
"""

import hashlib
import http.server
import ipaddress
import json
import os
import re
import signal
import socket
import socketserver
import sys
import threading
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from openai_fake import (PREFILLED_HEADER, JsonHandler, Timing, answer, interface_addresses,  # noqa: E402
                         passthrough, prom_histogram, read_settings, relay_stream)  # (shared with vllm.py)

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


def env(name, default=""):
    return os.environ.get(name, default)


def check_perm_enabled():
    return env("MINDIE_CHECK_INPUTFILES_PERMISSION") != "0"


# config.json and the rank table: owner (st_uid == getuid()) and mode (<= 640) are checked even with
# MINDIE_CHECK_INPUTFILES_PERMISSION=0. MindIE-LLM src/config_manager/param_checker.cpp L35-42 (config.json) and
# src/config_manager/ranktable_config.cpp L43-50 (rank table) call the FileUtils::IsFileValid overload of
# src/utils/log/file_utils.cpp L293-321, whose failed ConstrainOwner (L342-355) / ConstrainPermission returns
# false in both branches of `if (!checkPermission)` (L315-320): the env only adds a "[ERROR] ... chmod" line.
# (param_checker.cpp L139-144 reads the weights' config.json through the same overload; the stand-in keeps the
# env switch there, as before.)
OWNER_CHECK_ALWAYS = True


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


def read_json_file(path, max_mode, what, always_check=False):
    """`always_check`: owner + mode checked whatever MINDIE_CHECK_INPUTFILES_PERMISSION says (see
    OWNER_CHECK_ALWAYS)."""
    problem = file_problem(path, max_mode, True if always_check else check_perm_enabled())
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
        # at load, before any rank table is read (MindIE-LLM backend_config.cpp@v3.0.0 L156-165, 40fb063
        # L175-181; config_manager_impl.cpp L117-118 runs it before UpdateMultiNodesInfer at L134)
        if ws is not None and isinstance(ids, list) and any(isinstance(x, list) and len(x) != ws for x in ids):
            probs.append("The size of npuDeviceIds (subset) does not equal to worldSize.")
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
    problem = file_problem(path, 0o640, OWNER_CHECK_ALWAYS or check_perm_enabled())  # ranktable_config.cpp L43-50
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


# MindIE Server's monitoring (MindIE-LLM @8b4871a, src/server/endpoint/http_wrapper/): GET /metrics on the metrics
# server (InitializeMetricsResource, http_handler.cpp L1963-1971; listening on managementIpAddress:metricsPort,
# http_server.cpp L284) answers only when MIES_SERVICE_MONITOR_MODE=1 (prometheus_metrics.cpp L58-69; else 500
# {"error": "Environment variable MIES_SERVICE_MONITOR_MODE is not set.", ...}, http_handler.cpp L960-967;
# environment_variable.md L51), in Prometheus text (prometheus-cpp) with gauges num_requests_running /
# num_requests_waiting / num_requests_swapped {model_name="<modelName[ & modelName...]>"} (L119-132), set by a
# collector thread every COLLECT_SLEEP = 1000 ms (L40, L561-570, RecordRequestNums L501-523). GET /metrics-json on
# the management port (InitializeServiceStatusResource, http_handler.cpp L666-673: 503 while not healthy; JSON of
# parse_protocol.cpp JsonHttpMetrics L711-757 with TTFT, TBT, waitingInferRequestNum, processingInferRequestNum,
# remainBlocks; service_APIs_usage_guidance.md L90-91) needs no switch. The stand-in counts a request from its
# arrival until its last token as running (openai_fake.Timing.active); nothing waits or is swapped; TTFT, TBT and
# remainBlocks stay 0.
MONITOR_HELP = (("num_requests_running", "Number of requests currently running on NPU."),
                ("num_requests_waiting", "Number of requests waiting to be processed."),
                ("num_requests_swapped", "Number of requests swapped to CPU."))
COLLECT_SLEEP_S = 1.0


def monitor_mode(value):
    """MIES_SERVICE_MONITOR_MODE through std::stoi (leading digits count) == 1."""
    m = re.match(r"\s*([+-]?\d+)", value or "")
    return bool(m) and int(m.group(1)) == 1


def start_metrics_collector(ctx):
    def run():
        while not STOP.is_set():
            timing = ctx.get("timing")
            ctx["sampled"] = (timing.active if isinstance(timing, Timing) else 0, 0, 0)
            STOP.wait(COLLECT_SLEEP_S)
    ctx["sampled"] = (0, 0, 0)
    threading.Thread(target=run, daemon=True).start()


def prometheus_text(ctx):
    label = ctx.get("metric_model", ctx.get("model", "")).replace("\\", "\\\\").replace('"', '\\"')
    lines = ["# HELP request_received_total Count of received requests.", "# TYPE request_received_total counter",
             'request_received_total{model_name="%s"} %d' % (label, ctx.get("requests", 0))]
    for (name, doc), value in zip(MONITOR_HELP, ctx.get("sampled") or (0, 0, 0)):
        lines += ["# HELP %s %s" % (name, doc), "# TYPE %s gauge" % name,
                  '%s{model_name="%s"} %d' % (name, label, value)]
    return "\n".join(lines + latency_lines(ctx, 'model_name="%s"' % label)) + "\n"


# More of the same file's metrics, those deployctl's dashboard reads (prometheus_metrics.cpp @8b4871a):
# time_to_first_token_seconds L146 and time_per_output_token_seconds L151 (histograms), prompt_tokens_total L178 and
# generation_tokens_total L183 (counters), npu_cache_usage_perc L189 (gauge). The stand-in counts answered requests
# (openai_fake.tally); its cache use is the share of maxBatchSize in flight; one TPOT observation per generated token
# after the first, at the configured TPOT.
def latency_lines(ctx, labels):
    t = dict(ctx.get("tally") or {"requests": 0, "prompt": 0, "generated": 0, "ttft_s": 0.0})
    running = (ctx.get("sampled") or (0,))[0]
    timing = ctx.get("timing")
    tpot = timing.cfg["tpot_ms"] / 1000.0 if isinstance(timing, Timing) else 0.0
    steps = max(0, t["generated"] - t["requests"])
    out = prom_histogram("time_to_first_token_seconds", "Histogram of time to first token in seconds.", labels,
                         t["requests"], t["ttft_s"])
    out += prom_histogram("time_per_output_token_seconds", "Histogram of time per output token in seconds.", labels,
                          steps, steps * tpot)
    for name, doc, value in (("prompt_tokens_total", "Number of prefill tokens processed.", t["prompt"]),
                             ("generation_tokens_total", "Number of generation tokens processed.", t["generated"])):
        out += ["# HELP %s %s" % (name, doc), "# TYPE %s counter" % name, "%s{%s} %d" % (name, labels, value)]
    use = min(1.0, running / float(ctx.get("max_batch") or 1))
    return out + ["# HELP npu_cache_usage_perc NPU KV-cache usage. 1 means 100 percent usage.",
                  "# TYPE npu_cache_usage_perc gauge", "npu_cache_usage_perc{%s} %s" % (labels, repr(use))]


def metrics_json(ctx, mgmt_ip, mgmt_port):
    timing = ctx.get("timing")
    running = timing.active if isinstance(timing, Timing) else 0
    items = (("TTFT", "%f" % 0), ("TBT", "%f" % 0), ("waitingInferRequestNum", "0"),
             ("processingInferRequestNum", str(running)), ("remainBlocks", "0"))
    return {"resultType": "vector", "result": [
        {"metric": [{"__name__": name, "job": "node", "instance": "%s:%s" % (mgmt_ip, mgmt_port)}], "value": value}
        for name, value in items]}


class ApiHandler(JsonHandler):
    """Business port (OpenAI API) and management port (health); `self.server.role` says which."""
    server_version = "MindIE-Server"
    sys_version = ""
    ctx = {}

    def do_GET(self):
        role, path = self.server.role, self.path.split("?")[0]
        if role in ("management", "metrics") and path in ("/v2/health/live", "/health/live"):
            return self._json(200, {})
        if role in ("management", "metrics") and path in ("/v2/health/ready", "/health/ready", "/health"):
            if READY.is_set():
                return self._json(200, {})
            return self._json(503, {"error": NOT_READY_REASON[0]})
        if role == "metrics" and path == "/metrics":
            if not self.ctx.get("monitor"):
                return self._json(500, {"error": "Environment variable MIES_SERVICE_MONITOR_MODE is not set.",
                                        "error_type": "Incomplete Generation"})
            body = prometheus_text(self.ctx).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            return self.wfile.write(body)
        if role == "management" and path == "/metrics-json":
            if not READY.is_set():
                self.send_response(503)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None
            addr, port = self.server.server_address[:2]
            body = json.dumps(metrics_json(self.ctx, addr, port), separators=(",", ":")).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
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
        # MindIE-MS's decode request carries the stand-in's marker: the prompt was prefilled on the P instance
        answer(self, req, path, self.ctx, prefilled=self.headers.get(PREFILLED_HEADER) == "1")


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


# ---- upstream rules --------------------------------------------------------------------------------
# What the real MindIE / MindIE-MS refuse, read from their sources (MindIE-LLM @8b4871ad = v3.0.0, MindIE-Motor
# @5dfb024e) independently of deployctl's renderer. Each check names its source next to it. Pure functions of
# (config dicts, env mapping, ...) so tests can call them without a container.

def _int(value, default):
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def torch_runtime_problem(mc, world):
    """backendType "torch" (mindie_llm/runtime): the exception ParallelInfoManager.__init__ raises, or None.
    `world` is torch.distributed.get_world_size(): the rank table's device count on multi-node (worldSize and
    npuDeviceIds are overwritten from it: src/config_manager/backend_config.cpp L241-262 UpdateMultiNodesInfer),
    else worldSize. models.deepseekv2.parallel_options (o_proj/lm_head local TP) is never read by mindie_llm/runtime
    (parallel_info_manager.py L234-237 ties ATTN_O_PROJ_TP to attn_tp and LM_HEAD_TP to mlp_tp): ignored here."""
    def even_divide(n, d):      # mindie_llm/runtime/utils/distributed/utils.py L58-76
        if d == 0 or n % d:
            raise ValueError("%d is not evenly divisible by %d." % (n, d))
        return n // d

    def tp_size(v):              # parallel_info_manager.py L360-368 _init_tp_parallel_info: -1 -> world
        v = _int(v, -1)
        size = world if v == -1 else v
        even_divide(world, size)
        return size

    def dp_size(v):              # parallel_info_manager.py L389-393 _init_dp_parallel_info: -1 -> 1
        v = _int(v, -1)
        size = 1 if v == -1 else v
        even_divide(world, size)
        return size

    try:
        tp_size(mc.get("tp", world))         # L200 attn_tp
        dp_size(mc.get("dp", -1))            # L201 attn_dp
        dp_size(mc.get("cp", -1))            # L202 attn_cp
        moe_tp = tp_size(mc.get("moe_tp", -1))   # L205
        moe_ep = dp_size(mc.get("moe_ep", -1))   # L207
    except ValueError as e:
        return "ValueError: %s" % e
    # parallel_info_manager.py L210-216
    if moe_tp * moe_ep != world:
        return ("ValueError: MoE parallel strategy process number mismatch: global world_size(%d) != "
                "moe_tp.group_size(%d) \u00d7 moe_ep.group_size(%d)" % (world, moe_tp, moe_ep))
    # Pipeline parallel. NOT an upstream raise: parallel_info_manager.py L248-260 only documents it ("Pipeline
    # parallelism is not currently implemented", L252; has_pp() always False) and model_wrapper/utils/config.py
    # L89 parses `pp` without using it, so the real torch runtime silently runs every layer on every rank (a
    # plan split by pp is wrong, and its moe_ep sized for one stage usually trips L210 above). The stand-in
    # refuses pp > 1 outright (stand-in policy, text borrowed from L252) so such a plan cannot pass unnoticed.
    pp = _int(mc.get("pp", 1), 1)
    if pp > 1:
        return ("ValueError: Pipeline parallelism is not currently implemented (pp=%d) in the torch runtime "
                "[fake MindIE: stand-in refusal, upstream ignores pp]" % pp)
    return None


DEEPSEEK_TYPES = ("deepseek_v3", "deepseek_v2", "deepseekv3")     # atb_llm/models/__init__.py L71


def atb_deepseek_problem(mc, weights_cfg, environ):
    """backendType "atb", DeepSeek (router deepseekv2): the ValueError of FlashDeepseekv2ForCausalLM, or None.
    lm_head local TP comes from ModelConfig.models[<model_type>|deepseekv2].parallel_options.lm_head_local_tp
    (atb_llm/models/__init__.py L70-82 renames the model_type key to deepseekv2 and merges models.deepseekv2
    into llm; utils/configuration_utils.py L91-101), enabled when > 1 (atb_llm/utils/mapping.py L81-84)."""
    model_type = str(weights_cfg.get("model_type", "")).lower()
    routed = {"deepseek_v2": "deepseekv2", "deepseek_v3": "deepseekv2"}.get(model_type, model_type)  # L144-145
    if routed != "deepseekv2" and model_type not in DEEPSEEK_TYPES:
        return None
    models = mc.get("models")
    if isinstance(models, str):
        try:
            models = json.loads(models)
        except ValueError:
            models = None
    models = dict(models) if isinstance(models, dict) else {}
    if model_type in DEEPSEEK_TYPES and model_type in models:
        models["deepseekv2"] = models.pop(model_type)
    ds = models.get("deepseekv2") if isinstance(models.get("deepseekv2"), dict) else {}
    po = ds.get("parallel_options") if isinstance(ds.get("parallel_options"), dict) else {}
    lm = po.get("lm_head_local_tp", -1)
    enabled = isinstance(lm, int) and not isinstance(lm, bool) and lm > 1            # mapping.py L81-84
    # atb_llm/utils/env.py L85: enable_dp_partition_up = DP_PARTITION_UP_ENABLE == "1"
    # atb_llm/models/deepseekv2/flash_causal_deepseekv2.py L1080-1085
    if enabled and environ.get("DP_PARTITION_UP_ENABLE", "0") != "1":
        return ("ValueError: If LmHeadLocalTp is enabled, DpPartitionUp should also be enabled. \n"
                "                   If LM_HEAD_LOCAL_TP=1 and DEEPSEEK_MTP=1,                    please unset one "
                "of them. (lm_head_local_tp=%d, DP_PARTITION_UP_ENABLE=%s)"
                % (lm, environ.get("DP_PARTITION_UP_ENABLE", "unset")))
    return None


def gloo_problem(environ, container_ip, ifaces, rank=0, size=2, master="", port=0):
    """Multi-node torch runtime: the lines gloo logs when its rendezvous cannot work, or None.
    MindIE-LLM docs/zh/user_guide/models/deepseek/deepseek_v3.2.md L138/L147: set GLOO_SOCKET_IFNAME to the NIC
    carrying MIES_CONTAINER_IP; docs/zh/faq/faq.md L889-936: otherwise gloo picks a wrong interface and fails
    "failed to connect ... error=SO_ERROR: Connection refused". The stand-in treats unset as that failure (the
    hostname fallback that may work on some hosts is not modelled)."""
    name = environ.get("GLOO_SOCKET_IFNAME", "")
    names = [n.strip() for n in name.split(",") if n.strip()]
    for n in names:
        if n not in ifaces:      # torch's gloo tcp device (device.cc) for an interface that is not there
            return ["RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != "
                    "nullptr. Unable to find address for: %s" % n]
    local = next((ifaces[n] for n in names if ifaces.get(n)), None)
    if names and container_ip in [ifaces.get(n) for n in names]:
        return None
    local = local or "127.0.0.1"
    why = ("GLOO_SOCKET_IFNAME is not set" if not names else
           "GLOO_SOCKET_IFNAME=%s carries %s, not MIES_CONTAINER_IP %s" % (name, local, container_ip or "(unset)"))
    return ["[E ProcessGroupGloo.cpp] ERROR failed to connect, willRetry=1, retry=3, retryLimit=3, rank=%d, size=%d, "
            "local=[%s]:%d, remote=[%s]:%d, error=SO_ERROR: Connection refused (%s)"
            % (rank, size, local, 29500 + rank, master or "?", port or 29500, why),
            "RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] "
            "no error"]


# MindIE-MS: what the dynamic loader must find (Motor mindie_motor/src/controller/CMakeLists.txt L106 and
# coordinator/CMakeLists.txt L133 link crypto ssl boundscheck; the docs name the rest:
# docs/zh/user_guide/cluster_management_component/controller.md L621 libmie_role_manager.so, coordinator.md L305
# libmie_digs.so), all in <MindIE>/latest/mindie-service/lib, found only through LD_LIBRARY_PATH
# (controller.md L622, coordinator.md L313-316; 2.2-era boot.sh 7be35ef L27, L40 export $MIES_INSTALL_PATH/lib).
MS_NEEDED = {"ms_controller": ("libcrypto.so.3", "libssl.so.3", "libboundscheck.so", "libmie_role_manager.so"),
             "ms_coordinator": ("libcrypto.so.3", "libssl.so.3", "libboundscheck.so", "libmie_digs.so")}
SYSTEM_LIB_DIRS = ("/lib", "/lib64", "/usr/lib", "/usr/lib64", "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
                   "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu")


def ms_missing_library(role, environ, cwd=None):
    """The first library of `role` ld.so cannot find (LD_LIBRARY_PATH, empty entries = cwd, then the system
    directories), or None."""
    cwd = cwd or os.getcwd()
    entries = environ.get("LD_LIBRARY_PATH", "").split(":") if environ.get("LD_LIBRARY_PATH") else []
    dirs = [os.path.join(cwd, e) if not e.startswith("/") else e for e in entries] + list(SYSTEM_LIB_DIRS)
    for lib in MS_NEEDED[role]:
        if not any(os.path.isfile(os.path.join(d, lib)) for d in dirs):
            return lib
    return None


def ms_kmc_problem(role, cfg, environ):
    """HSECEASY_PATH (KMC's libhse_cryption.so): needed with TLS on (coordinator.md L301 "开启tls校验时必须设置")
    and, for the controller, also when logging to a file (controller.md L623-627). The message is a guess."""
    tls = [k for k, v in (cfg.get("tls_config") or {}).items() if k.endswith("_tls_enable") and v is True]
    to_file = role == "ms_controller" and (cfg.get("log_info") or {}).get("to_file") is True
    if not tls and not to_file:
        return None
    path = environ.get("HSECEASY_PATH", "")
    if path and os.path.isfile(os.path.join(path, "libhse_cryption.so")):
        return None
    return ("Failed to load the KMC library libhse_cryption.so from HSECEASY_PATH=%s (needed for %s): set "
            "HSECEASY_PATH=<MindIE>/latest/mindie-service/lib" % (path or "(unset)",
                                                                 ", ".join(tls + (["log_info.to_file"] if to_file
                                                                                  else []))))


PREFILL, DECODE, UNDEF = "prefill", "decode", "UN_DEF_INSTANCE"


def pd_init_role(deploy_server, p_dist, d_dist):
    """Motor controller/constant/ControllerConfig.cpp L611-628 GetPDInitRole (g_prefillServer = 2,
    g_decodeServer = 1: L38-39)."""
    if p_dist == d_dist:
        return {2: PREFILL, 1: DECODE}.get(deploy_server, UNDEF)
    return PREFILL if bool(deploy_server) == p_dist else DECODE


def assign_roles(instances, ctl_cfg):
    """Roles and endpoints of the server groups as the MindIE-MS controller derives them -> (instances, errors).
    Each instance gets role, distributed, endpoints [{ip, port, mgmt}] (the servers the controller talks to)."""
    mnic = ctl_cfg.get("multi_node_infer_config") if isinstance(ctl_cfg.get("multi_node_infer_config"), dict) else {}
    errors, out_ = [], []
    if not mnic.get("multi_node_infer_enable"):
        # not multi-node mode: RankTableLoader.cpp L446-452 ParseServerNodes, the role manager decides. Not
        # modelled: the stand-in takes deploy_server "0" as prefill, "1" as decode (guess, as before).
        for inst in instances:
            out_.append(dict(inst, role={"0": PREFILL, "1": DECODE}.get(inst.get("deploy_server"), PREFILL),
                             distributed=False,
                             endpoints=[{"ip": inst["ip"], "port": inst["port"], "mgmt": inst["mgmt"]}]))
        return out_, errors
    pcfg, dcfg = mnic.get("p_node_config") or {}, mnic.get("d_node_config") or {}
    # ControllerConfig.cpp L336-349 InitMultiNodeConfig
    p_dist, d_dist = bool(pcfg.get("enable_dist_dp_server")), bool(dcfg.get("enable_dist_dp_server"))
    first_port = _int(ctl_cfg.get("initial_dist_server_port", 10000), 10000)
    for inst in instances:
        # RankTableLoader.cpp L366-376 GetDeployConfig: isDistribute = bool(stoi(deploy_server)),
        # initRole = GetPDInitRole(stoi(deploy_server)); no deploy_server: centralized, UN_DEF
        ds = inst.get("deploy_server")
        code = _int(ds, None) if ds is not None else None
        if ds is not None and code is None:
            errors.append("group %s: deploy_server %r is not an integer (std::stoi throws)" % (inst["group"], ds))
            continue
        distributed = bool(code) if code is not None else False
        role = pd_init_role(code, p_dist, d_dist) if code is not None else UNDEF
        if distributed:
            # RankTableLoader.cpp L215-277 ParseDistributeNodeInfo + L128-146 UpdateNodeInfo: per server entry the
            # port restarts at initial_dist_server_port; one node per npuNumPerDp = cp_size * tp_size devices of
            # the role's node config (1 for UN_DEF), at port p (predict), p+1 (mgmt), p+2 (metric), p+3 (inter
            # comm); the next one at p+4.
            ncfg = pcfg if role == PREFILL else dcfg if role == DECODE else {}
            per_dp = max(1, _int(ncfg.get("cp_size", 1), 1) * _int(ncfg.get("tp_size", 1), 1)) if ncfg else 1
            eps = []
            for ip, ndev in inst["server_devices"]:
                p = first_port
                for _ in range(0, ndev, per_dp):
                    eps.append({"ip": ip, "port": p, "mgmt": p + 1})
                    p += 4
        else:
            eps = [{"ip": inst["ip"], "port": inst["port"], "mgmt": inst["mgmt"]}]
        out_.append(dict(inst, role=role, distributed=distributed, endpoints=eps))
    # Who settles a group left UN_DEF_INSTANCE: InstanceRoleManager::Init (role_manager/InstanceRoleManager.cpp
    # L118-147). With different P/D node_machine_num (is_skip_decision_for_cross_node_mode,
    # node_scheduler/role_manager_initializer/RoleManagerInitializer.cpp L186-190) AssignRoleForCrossNodeSize
    # (L196-216) keeps the rank-table roles: UN_DEF stays, the instance is never used. With equal counts the role
    # manager assigns roles by ratio / DIGS (L131-147); the stand-in approximates that by giving UN_DEF groups
    # the role still missing (prefill first).
    if _int(pcfg.get("node_machine_num"), 0) == _int(dcfg.get("node_machine_num"), 0):
        for inst in out_:
            if inst["role"] == UNDEF:
                have = {i["role"] for i in out_}
                inst["role"] = PREFILL if PREFILL not in have else DECODE
                inst["role_note"] = "assigned by the role manager (equal node_machine_num)"
    else:
        for inst in out_:
            if inst["role"] == UNDEF:
                errors.append("group %s: deploy_server %r gives role UN_DEF_INSTANCE (p_node_config."
                              "enable_dist_dp_server=%s, d_node_config.enable_dist_dp_server=%s: only \"2\" is "
                              "prefill and \"1\" decode when they are equal); the instance gets no role"
                              % (inst["group"], inst.get("deploy_server"), str(p_dist).lower(), str(d_dist).lower()))
    return out_, errors


def model_init_failure(lines):
    """A Python exception while the model initializes, as MindIE logs it (text of the crash fault)."""
    log("ERROR", "[Model]\t>>> Exception:%s" % lines[-1].split(": ", 1)[-1], "model.py:40")
    for line in lines:
        out(line)
    log("ERROR", "[Model]\t>>> return initialize error result: {'status': 'error', 'npuBlockNum': '0', "
                 "'cpuBlockNum': '0'}", "model.py:43", code="MIE04E13030A")
    log("ERROR", "[daemon] Daemon wait pid with %d exit, Please check the service log or python log." % PID,
        "llm_daemon.cpp:76", code="MIE04E010109")
    out("Daemon is killing...")
    raise Fatal(1)


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


def daemon_args(argv):
    """mindieservice_daemon's command line: `--config-file PATH` (the config instead of MIES_CONFIG_JSON_PATH, as
    Motor's node_manager starts each distributed DP server: llm_daemon_starter.py L38-47) and `--expert-parallel
    true|false`. -> {"config_file": str|None, "expert_parallel": bool}."""
    opts = {"config_file": None, "expert_parallel": False}
    i = 0
    while i < len(argv):
        a = argv[i]
        key, eq, val = a.partition("=")
        if key in ("--config-file", "--expert-parallel"):
            if not eq:
                if i + 1 >= len(argv):
                    fail("Option %s needs a value." % key, code="MIE04E010101")
                val = argv[i + 1]
                i += 1
            if key == "--config-file":
                if not val:
                    fail("--config-file needs a path.", code="MIE04E010101")
                opts["config_file"] = val
            else:
                if val not in ("true", "false"):
                    fail("--expert-parallel must be true or false, got %r." % val, code="MIE04E010101")
                opts["expert_parallel"] = val == "true"
        else:
            fail("Unknown option %r (mindieservice_daemon takes --config-file PATH and --expert-parallel "
                 "true|false)." % a, code="MIE04E010101")
        i += 1
    return opts


class MgmtHandler(ApiHandler):
    """Management port of a distributed DP server: also takes the controller's role request (Motor
    ControllerConstant.cpp L58-66 POST /v2/role/{prefill,decode}; the body's local[].dp_inst_list[].device would
    name this server's devices, llm_manager_impl.cpp L782-803). The stand-in accepts it and keeps serving."""
    roles = []

    def do_POST(self):
        path = self.path.split("?")[0]
        if self.server.role == "management" and path in ("/v2/role/prefill", "/v2/role/decode"):
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"null")
            except ValueError:
                return self._error(400, "The request body is not valid JSON.")
            self.roles.append((path.rsplit("/", 1)[1], body))
            log("INFO", "Received the role %s from the controller" % path.rsplit("/", 1)[1], "http_handler.cpp:0")
            return self._json(200, {})
        return ApiHandler.do_POST(self)


def daemon(argv=()):
    settings = read_settings(SETTINGS_PATH)
    faults = settings.get("engine") or {}
    t0 = time.time()
    out("[%s] [%d] [%d] [mindie-server] ===init log===" % (_now(), PID, PID))
    # stand-in instrumentation (not MindIE's): the ATB allocator the daemon really got, after set_env.sh ran
    out("[fake] ATB_WORKSPACE_MEM_ALLOC_ALG_TYPE=%s" % env("ATB_WORKSPACE_MEM_ALLOC_ALG_TYPE", "unset"))
    opts = daemon_args(list(argv))
    install = env("MIES_INSTALL_PATH") or os.path.abspath(os.path.join(os.path.dirname(sys.argv[0] or "."), ".."))
    if not install or not os.path.isdir(install):
        install = os.getcwd()
    cfg_path = opts["config_file"] or env("MIES_CONFIG_JSON_PATH") or os.path.join(install, "conf", "config.json")
    cfg = read_json_file(cfg_path, 0o640, "config.json", always_check=OWNER_CHECK_ALWAYS)  # param_checker.cpp L42
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
    # Distributed DP server (Motor boot.sh L115-142 + gen_config_single_container.py: N daemons per node, each
    # `--config-file configI.json`): ServerConfig.distDPServerEnabled gives this process its own endpoints
    # (server_config.cpp L58, L311; endpoint.cpp L89); ScheduleConfig.distributedEnable loads the HCCL rank table
    # (schedule_config.cpp L51, L210-211; config_manager_impl.cpp L129-135) but there is no multiNodesInfer
    # rendezvous: the devices of this DP rank come from the controller's POST /v2/role/decode
    # (llm_manager_impl.cpp L782-803), one executor per process (L1357-1358).
    dist = bool(sc.get("distDPServerEnabled"))
    sched_dist = bool((bc.get("ScheduleConfig") or {}).get("distributedEnable"))
    dp_slice = None
    if dist and multi:
        fail("distDPServerEnabled with multiNodesInferEnabled: a distributed DP server runs one executor per "
             "process (llm_manager_impl.cpp L1357-1358) [fake MindIE: stand-in refusal, not modelled]",
             "config_manager.cpp:0", code="MIE04E010103")
    if sched_dist and not multi:
        servers, master, local, world, digest = parse_ranktable(devices, join_timeout)
        tp, cp = max(1, _int(mc.get("tp", mc.get("worldSize", 1)), 1)), max(1, _int(mc.get("cp", 1), 1))
        per_dp = tp * cp
        if len(local.devices) % per_dp:
            fail("The %d devices of the local server %s in ranktable file are not a multiple of tp*cp = %d*%d: "
                 "a distributed DP server takes tp*cp devices (RankTableLoader.cpp L215-277 npuNumPerDp)"
                 % (len(local.devices), local.describe(), tp, cp), "ranktable_config.cpp:0", comp="llm",
                 code="MIE04E010103")
        base = _int(env("INITIAL_DP_SERVER_PORT"), 10000)
        k, off = divmod(int(sc["port"]) - base, 4)
        if off or not 0 <= k < len(local.devices) // per_dp:
            log("WARN", "port %d is not a DP server port the controller computes (initial_dist_server_port %d + 4k, "
                "k < %d): no controller will address this server" % (sc["port"], base, len(local.devices) // per_dp),
                "config_manager.cpp:0")
            k = None
        else:
            dp_slice = local.devices[k * per_dp:(k + 1) * per_dp]
        out("Update npuDeviceIds of backend config successfully for distributed DP: %d device(s) per DP rank"
            "%s" % (per_dp, ", DP rank %d of this node: ranks %s" % (
                k, ",".join(d["rank_id"] for d in dp_slice)) if dp_slice else ""))
        is_master = True
    elif multi:
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
                      "max_seq": mdc["maxSeqLen"], "mode": mode,
                      "world": len(dp_slice) if dp_slice else world,
                      "where": settings.get("node") or socket.gethostname(),
                      "master": (master.server_id if master else ip),
                      "config_digest": hashlib.sha256(json.dumps([mdc, bc.get("ScheduleConfig")],
                                                                 sort_keys=True).encode()).hexdigest(),
                      "timing": Timing(faults.get("timing")),
                      "max_batch": (bc.get("ScheduleConfig") or {}).get("maxBatchSize") or 1,
                      "monitor": monitor_mode(env("MIES_SERVICE_MONITOR_MODE")),
                      "metric_model": " & ".join(str(m.get("modelName", "")) for m in mdc["ModelConfig"])}
    if ApiHandler.ctx["monitor"]:
        start_metrics_collector(ApiHandler.ctx)
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
    http_servers.append(bind_http(mgmt_ip, sc["managementPort"], MgmtHandler if sched_dist and not multi else
                                  ApiHandler, "management HttpServer", "management"))
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
           ", multi-node %s" % ("master" if is_master else "slave") if multi else
           ", distributed DP server on %s:%d (config %s)" % (ip, sc["port"], cfg_path) if sched_dist else ""),
        "llm_daemon.cpp:0")
    crash_on = faults.get("crash_on") or ""
    if crash_on and "=" in crash_on and os.environ.get(crash_on.split("=", 1)[0]) == crash_on.split("=", 1)[1]:
        faults = dict(faults, crash="HBM ECC error while loading weights (%s)" % crash_on)
    if faults.get("crash"):
        sleep_or_stop(0.3)
        msg = faults["crash"] if isinstance(faults["crash"], str) else (
            "NPU out of memory. Tried to allocate 450.00 MiB (NPU 0; 60.97 GiB total capacity; 14.67 GiB already "
            "allocated; 14.67 GiB current active; 22.66 MiB free; 14.71 GiB reserved in total by PyTorch)")
        model_init_failure(["RuntimeError: %s" % msg])
    slow = float(faults.get("slow_start") or 0)
    if slow > 0:
        NOT_READY_REASON[0] = "loading the weights"
        log("INFO", "Loading the weights of %s from %s ..." % (mc["modelName"], wpath), "model_runner.py:0")
        sleep_or_stop(slow)
    backend = mc.get("backendType", "atb")
    if (multi or sched_dist) and len(servers) > 1 and backend == "torch":
        # the torch runtime's gloo groups need GLOO_SOCKET_IFNAME on the NIC of MIES_CONTAINER_IP (gloo_problem)
        rank = min(int(d["rank_id"]) for d in (dp_slice or local.devices))
        problem = gloo_problem(os.environ, ip, interface_addresses(), rank=rank, size=world,
                               master=master.addr, port=_int(env("MASTER_PORT"), 0))
        if problem:
            model_init_failure(problem)
    if multi:
        NOT_READY_REASON[0] = "waiting for the multi-node communicator"
        if is_master:
            rendezvous_master(lsock, servers, local, join_timeout, digest, t0)
        else:
            rendezvous_worker(master, local, int(bc.get("multiNodesInferPort", 1120)), join_timeout, digest, t0)
    # the model runtime's own checks, once the communicator is up (every rank raises the same)
    problem = torch_runtime_problem(mc, world) if backend == "torch" else \
        atb_deepseek_problem(mc, wcfg, os.environ) if backend == "atb" else None
    if problem:
        model_init_failure([problem])
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
                instances.append({"group": gid, "deploy_server": g.get("deploy_server"),
                                  "ip": m.get("server_ip"), "port": int(m.get("predict_port") or 0),
                                  "mgmt": int(m.get("mgmt_port") or 0), "servers": len(sl),
                                  "server_devices": [(s.get("server_ip"), len(s.get("device") or [])) for s in sl]})
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
    coordinators = [s.get("server_ip") for s in by_id["0"].get("server_list") or []]
    return instances, coordinators


def endpoint_ready(ep):
    """True (ready), False (answers, not ready) or None (nothing listens there)."""
    try:
        with urllib.request.urlopen("http://%s:%d/v2/health/ready" % (ep["ip"], ep["mgmt"]), timeout=1) as r:
            return r.status == 200
    except urllib.error.HTTPError:
        return False
    except (OSError, urllib.error.URLError):
        return None


def ms_loader_check(role):
    """Before main() runs: ld.so must find the MindIE-MS libraries (MS_NEEDED) or the process exits 127."""
    missing = ms_missing_library(role, os.environ)
    if missing:
        sys.stderr.write("%s: error while loading shared libraries: %s: cannot open shared object file: No such "
                         "file or directory\n" % (env("FAKECLUSTER_ARGV0") or "./bin/" + role, missing))
        sys.stderr.flush()
        raise Fatal(127)


def ms_start_checks(role, cfg_path_env, cfg_name):
    """The config file (as before), then KMC (HSECEASY_PATH, ms_kmc_problem)."""
    path = env(cfg_path_env)
    if not path:
        fail("%s is not set." % cfg_path_env, comp=role, code="MIE03E000001")
    cfg = read_json_file(path, 0o640, cfg_name)
    problem = ms_kmc_problem(role, cfg, os.environ)
    if problem:
        fail(problem, comp=role, code="MIE03E000001")
    return cfg


def ms_controller():
    cfg = ms_start_checks("ms_controller", "MINDIE_MS_CONTROLLER_CONFIG_FILE_PATH", "ms_controller.json")
    for key in ("deploy_mode", "http_server"):
        if key not in cfg:
            fail("ms_controller.json lacks %s." % key, comp="ms_controller", code="MIE03E000001")
    table, coordinators = global_table()
    instances, errors = assign_roles(table, cfg)
    for e in errors:
        log("ERROR", "[RankTableLoader] " + e, "RankTableLoader.cpp:0", "ms_controller")
    hs = cfg["http_server"]
    MsHandler.ctx = {"instances": instances}
    bind_http(hs.get("ip"), int(hs.get("port")), MsHandler, "controller http server", "controller")
    ms_log("INFO", "MindIE-MS controller started: %s, %d instance(s): %s" % (
        cfg["deploy_mode"], len(instances), "; ".join(
            "group %s %s%s %s" % (i["group"], i["role"], " (distributed DP, %d servers)" % len(i["endpoints"])
                                  if i["distributed"] else "", ", ".join("%s:%d" % (e["ip"], e["port"])
                                                                         for e in i["endpoints"]))
            for i in instances)))
    # the controller pushes the instances it can use to the coordinator (ControllerConstant.cpp L44
    # POST /v1/instances/refresh, on mindie_ms_coordinator_port of the coordinator group "0")
    cport = _int(cfg.get("mindie_ms_coordinator_port"), 0)
    announced, unreachable = False, set()
    while not STOP.wait(0.3):
        usable = []
        for inst in instances:
            states = [endpoint_ready(ep) for ep in inst["endpoints"]]
            for ep, st in zip(inst["endpoints"], states):
                key = (ep["ip"], ep["mgmt"])
                if st is None and key not in unreachable:
                    unreachable.add(key)
                    ms_log("WARN", "group %s (%s%s): no server answers at %s:%d (mgmt %d)%s" % (
                        inst["group"], inst["role"], ", distributed DP" if inst["distributed"] else "", ep["ip"],
                        ep["port"], ep["mgmt"], "; a distributed DP instance needs one server per DP rank on ports "
                        "from initial_dist_server_port" if inst["distributed"] else ""))
                elif st is not None:
                    unreachable.discard(key)
            if inst["role"] in (PREFILL, DECODE) and all(st is True for st in states):
                usable.append(inst)
        roles = {i["role"] for i in usable}
        ok = len(usable) == len(instances) and {PREFILL, DECODE} <= roles
        for ip_ in coordinators:
            if cport:
                try:
                    body = json.dumps({"ids": [int(i["group"]) for i in usable], "instances": usable}).encode()
                    req = urllib.request.Request("http://%s:%d/v1/instances/refresh" % (ip_, cport), data=body,
                                                 method="POST", headers={"Content-Type": "application/json"})
                    urllib.request.urlopen(req, timeout=1).read()
                except (OSError, urllib.error.URLError):
                    pass
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
        if self.server.role == "manage" and path == "/v1/instances/refresh":
            # from the controller (coordinator ControllerListener.cpp L110-140): the instances to use
            try:
                doc = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"null")
                self.ctx["instances"] = list(doc["instances"])
                self.ctx["refreshed"] = time.time()
            except (ValueError, KeyError, TypeError):
                return self._error(400, "bad refresh request")
            return self._json(200, {})
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
        p = dict(next(i for i in insts if i["role"] == PREFILL)["endpoints"][0])
        d = dict(next(i for i in insts if i["role"] == DECODE)["endpoints"][0])
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
            headers = {"Content-Type": "application/json"}
            if method == "POST":
                headers[PREFILLED_HEADER] = "1"          # stand-in marker: D skips the prefill delay
            r = urllib.request.Request("http://%s:%d%s" % (d["ip"], d["port"], path), data=body, method=method,
                                       headers=headers)
            try:
                resp = urllib.request.urlopen(r, timeout=60)
            except urllib.error.HTTPError as e:
                return self._passthrough(e.code, e.headers, e.read())
        except (OSError, urllib.error.URLError) as e:
            return self._json(503, {"error": {"message": "no instance answered: %s" % e, "type": "service_unavailable",
                                              "param": None, "code": 503}})
        return relay_stream(self, resp)

    def _passthrough(self, code, headers, data):
        return passthrough(self, code, headers, data)


def ms_coordinator(argv):
    if env("FAKECLUSTER_MINDIE_VERSION").split(".")[0] >= "3":
        # since Motor v3.0.0.beta.2: <predict_ip> <manage_ip>, ports from ms_coordinator.json
        # (coordinator/main.cpp L22-45 at 5dfb024; boot.sh L225 `mindie_motor_coordinator "$POD_IP" "$POD_IP"`)
        if len(argv) != 2 or not all(argv):
            fail("Incorrect usage. The expected format is: %s <predict_ip> <manage_ip>" % (
                env("FAKECLUSTER_ARGV0") or "ms_coordinator"), comp="ms_coordinator", code="MIE03E000001")
        http = (read_json_file(env("MINDIE_MS_COORDINATOR_CONFIG_FILE_PATH"), 0o640, "ms_coordinator.json")
                .get("http_config") or {}) if env("MINDIE_MS_COORDINATOR_CONFIG_FILE_PATH") else {}
        argv = [argv[0], str(http.get("predict_port", "")), argv[1], str(http.get("manage_port", ""))]
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
    cfg = ms_start_checks("ms_coordinator", "MINDIE_MS_COORDINATOR_CONFIG_FILE_PATH", "ms_coordinator.json")
    if "http_config" not in cfg:
        fail("ms_coordinator.json lacks http_config.", comp="ms_coordinator", code="MIE03E000001")
    global_table()                       # the stand-in checks the table here too; roles come from the controller
    MsHandler.ctx = {"instances": []}
    for ip_, port, role in ((pip, int(pport), "predict"), (mip, int(mport), "manage")):
        bind_http(ip_, port, MsHandler, "coordinator %s server" % role, role)
    NOT_READY_REASON[0] = "waiting for the instances from the controller"
    ms_log("INFO", "MindIE-MS coordinator listening on %s:%s (predict) and %s:%s (manage); waiting for the "
                   "controller's instances" % (pip, pport, mip, mport), comp="ms_coordinator")
    # ready with at least one prefill and one decode instance (pd modes): coordinator
    # cluster_monitor/ClusterNodes.cpp L305-334 IsAvailable; log texts ControllerListener.cpp L136-139
    out("MindIE-MS coordinator is not ready...")
    announced = False
    while not STOP.wait(0.25):
        roles = {i.get("role") for i in MsHandler.ctx.get("instances") or []}
        missing = [r for r in (PREFILL, DECODE) if r not in roles]
        ok = not missing
        if ok and not announced:
            READY.set()
            out("MindIE-MS coordinator is ready!!!")
            announced = True
        elif not ok:
            NOT_READY_REASON[0] = "no available %s instance" % " or ".join(missing)
            if announced:
                READY.clear()
                out("MindIE-MS coordinator is not ready...")
                ms_log("WARN", "An instance is not ready any more; requests are refused.", comp="ms_coordinator")
                announced = False
    raise Fatal(0)


def main():
    signal.signal(signal.SIGTERM, lambda *_: STOP.set())
    signal.signal(signal.SIGINT, lambda *_: STOP.set())
    role = sys.argv[1] if len(sys.argv) > 1 else "daemon"
    try:
        if role == "daemon":
            daemon(sys.argv[2:])
        elif role == "ms_controller":
            ms_loader_check(role)
            ms_controller()
        elif role == "ms_coordinator":
            ms_loader_check(role)
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
