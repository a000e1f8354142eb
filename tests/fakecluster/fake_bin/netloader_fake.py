#!/usr/bin/python3
"""The stand-in vLLM-Ascend's NetLoader (`vllm serve ... --load-format netloader`): loading weights from a running
peer over the network, and serving them once loaded. Standard library only; vllm.py imports it (the fake docker
copies it into /.fakecluster/ beside vllm.py).

As upstream (VA = vllm-project/vllm-ascend@182b75ea; NL = vllm_ascend/model_loader/netloader/netloader.py,
EL = .../interaction/elastic.py, LD = .../load.py there; the log lines are theirs, with their line numbers):
* `--model-loader-extra-config`: vLLM parses a value that looks like a JSON object with json.loads (an argparse
  error, exit 2, when it is not JSON: vllm/engine/arg_utils.py union_dict_and_str / parse_type), keeps any other
  value as a string, which NetLoader refuses ("requires ... a JSON object", NL L110-113). Keys read: SOURCE,
  MODEL, LISTEN_PORT, INT8_CACHE, OUTPUT_PREFIX (NL L132-163; CONFIG_FILE: not modelled).
* each rank r (vLLM's global rank: DP rank x tp x pp + local rank) with an entry in SOURCE tries that entry's
  sources in order (EL L123-152): connect, send {"label": "JOIN", "content": {device_id, model_path, tp, pp,
  port, group_name, int8_cache}} (EL L227-241), read {"label": "JOIN_ACK"|"JOIN_NACK", "content": ...}; the first
  ACK wins. The model path sent is --model from v0.23 (NL@v0.23.0 L278), else MODEL or --model (NL@v0.18.0 L176).
* a rank without an entry, or whose sources all fail, loads from disk (NL L306-310, L388-413): the disk time is the
  node's `engine.slow_start`, a peer load `engine.load_from_peer_s` (node state, both seconds). The ranks of one
  process load side by side, so it is ready after the slowest.
* once loaded (from disk or a peer) every rank serves its weights on get_ip():LISTEN_PORT + r (NL L428-512;
  get_ip: VLLM_HOST_IP, else the node's IP, standing in for the route to 8.8.8.8), one client at a time (EL
  L396-403: the transfer runs in the accepting thread): a JOIN whose rank, model path, TP or PP differ (or
  int8_cache) is answered JOIN_NACK (EL L459-495), a matching one JOIN_ACK, and the connection is held until the
  client closes it (the transfer). A port it cannot bind: "Failed to start Netloader server" (NL L518), and the
  instance serves requests all the same.
Not modelled (stand-in policy): the HCCL transfer itself, draft/MTP models (+10000 ports), CONFIG_FILE,
INT8_CACHE_NAME, pipeline parallel across nodes (the stand-in has none).
"""

import json
import os
import re
import socket
import threading
import time

from standin_common import STOP, sleep_or_stop

CONNECT_TIMEOUT = 5.0      # stand-in policy: upstream connects without a timeout, then waits 60 s for the ACK
ACK_TIMEOUT = 60.0         # EL L139
GROUP = "netloader"


def parse(parser, ns):
    """The NetLoader config of a `vllm serve` (None unless --load-format netloader); argparse's error for a value
    that looks like a JSON object and is not one."""
    raw = ns.get("model_loader_extra_config")
    value = raw
    if isinstance(raw, str) and re.match(r"(?s)^\s*{.*}\s*$", raw):
        try:
            value = json.loads(raw)
        except ValueError:
            parser.error("argument --model-loader-extra-config: Value %s cannot be converted to <function loads "
                         "at 0x7f3a5c1e0ea0>." % raw)
    if ns.get("load_format") != "netloader":
        return None
    return {"raw": value}


class Ctx:
    """What the loader knows of its process: ranks, shape, model, where it logs."""

    def __init__(self, cfg, model, tp, pp, dp_ranks, ip, version, faults, log, fail):
        self.cfg, self.model, self.tp, self.pp = cfg, model, tp, pp
        self.ranks = [r * tp * pp + i for r in dp_ranks for i in range(tp * pp)]
        self.dp_of = {r * tp * pp + i: r for r in dp_ranks for i in range(tp * pp)}
        self.ip, self.version, self.log, self.fail = ip, version, log, fail
        self.disk_s = float(faults.get("slow_start") or 0)
        self.peer_s = float(faults.get("load_from_peer_s") or 0)

    def say(self, level, rank, msg, src):
        self.log(level, msg, src, "EngineCore_DP%d" % self.dp_of[rank])


def _setting(cfg, key, check, cast, default):
    v = cfg.get(key, default)
    return cast(v) if check(v) else default


def settings(ctx):
    """NL L132-176: each key checked, a bad value replaced by its default."""
    raw = ctx.cfg["raw"]
    if raw is not None and not isinstance(raw, dict):
        ctx.fail(["RuntimeError: NetLoader requires --model-loader-extra-config to be a JSON object."], "APIServer",
                 "netloader.py:113")
    cfg = raw or {}
    s = {"source": _setting(cfg, "SOURCE", lambda v: isinstance(v, list), lambda v: v, None),
         "model": _setting(cfg, "MODEL", lambda v: isinstance(v, str), lambda v: v, None),
         "listen_port": _setting(cfg, "LISTEN_PORT", lambda v: isinstance(v, int) and not isinstance(v, bool) or (
             isinstance(v, str) and v.isdigit()), int, None),
         "int8_cache": _setting(cfg, "INT8_CACHE", lambda v: isinstance(v, str) and v.lower() in ("hbm", "dram", "no"),
                                lambda v: v.lower(), "no"),
         "output_prefix": _setting(cfg, "OUTPUT_PREFIX", lambda v: isinstance(v, str) and v != "", lambda v: v, None)}
    return s


def _recv_json(sock):
    buf = b""
    while not buf.rstrip().endswith(b"}"):
        chunk = sock.recv(65536)
        if not chunk:
            raise RuntimeError("Incomplete JSON message received from server")
        buf += chunk
    return json.loads(buf.decode())


def join(ctx, s, rank, match_path):
    """EL L123-163: this rank's sources in order; the socket of the first JOIN_ACK, or None."""
    sources = [x for e in s["source"] if isinstance(e, dict) and e.get("device_id") == rank
               and isinstance(e.get("sources"), list) for x in e["sources"]]
    for src in sources:
        try:
            ip, port = src.split(":")
            port = int(port)
        except Exception as e:
            ctx.say("INFO", rank, "IP format error: %s, detail: %s" % (src, e), "elastic.py:128")
            continue
        sock = None
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.settimeout(CONNECT_TIMEOUT)
            ctx.say("INFO", rank, "Start connection to server: %s:%s" % (ip, port), "elastic.py:136")
            sock.connect((ip, port))
            ctx.say("INFO", rank, "Finish connection to server: %s:%s" % (ip, port), "elastic.py:138")
            sock.settimeout(ACK_TIMEOUT)
            sock.sendall(json.dumps({"label": "JOIN", "content": {
                "device_id": rank, "model_path": match_path, "tp": ctx.tp, "pp": ctx.pp,
                "port": sock.getsockname()[1], "group_name": GROUP, "int8_cache": s["int8_cache"]}}).encode())
            ack = _recv_json(sock)
            content = ack.get("content")
            ctx.say("INFO", rank, "Receive ack: label=%s name=%s transfer_shape_count=0" % (
                ack.get("label"), content.get("name") if isinstance(content, dict) else None), "elastic.py:252")
            if ack.get("label") == "JOIN_ACK" and isinstance(content, dict) and "name" in content:
                return sock
            if ack.get("label") == "JOIN_NACK":
                raise RuntimeError("Receive nack from server, reason: %s" % content)
            raise RuntimeError("Receive ack %s from server does not contain required fields" % ack)
        except Exception as e:
            ctx.say("ERROR", rank, "Connect to %s fails, detail: %s" % (src, e), "elastic.py:145")
            if sock is not None:
                sock.close()
    shown = ", ".join(sources[:2]) + (", ... (total %d)" % len(sources) if len(sources) > 2 else "")
    ctx.say("ERROR", rank, "All sources exhausted, no connection established for device_id=%s, model_path=%s, "
            "sources=[%s]" % (rank, match_path, shown), "elastic.py:158")
    return None


def load(ctx):
    """Every rank's weights, from its peers or from disk; then every rank's weight server. Returns the servers'
    listening sockets (kept open while the process runs)."""
    s = settings(ctx)
    match_path = ctx.model if ctx.version >= (0, 23) else (s["model"] or ctx.model)
    held, slowest = [], 0.0
    for rank in ctx.ranks:
        ctx.say("INFO", rank, "Initializing elastic Netloader with config: MODEL=%s, LISTEN_PORT=%s,SOURCE=%s, "
                "INT8_CACHE=%s, INT8_CACHE_NAME=None,OUTPUT_PREFIX=%s)" % (
                    s["model"], s["listen_port"], s["source"], s["int8_cache"], s["output_prefix"]), "netloader.py:165")
        listed = isinstance(s["source"], list) and rank in [
            e["device_id"] for e in s["source"] if isinstance(e, dict) and "device_id" in e]
        if not listed:
            ctx.say("WARNING", rank, "Did not get valid source info, use DefaultModelLoader", "netloader.py:307")
            slowest = max(slowest, ctx.disk_s)
            continue
        started = time.time()
        sock = join(ctx, s, rank, match_path)
        ctx.say("INFO", rank, "Netloader elastic client join time: %.3f, device_id: %s, group: %s"
                % (time.time() - started, rank, GROUP), "load.py:74")
        if sock is None:
            ctx.say("INFO", rank, "elastic_load error: Failed to initialize ElasticClient: socket or server_addr is "
                    "None", "load.py:106")
            ctx.say("INFO", rank, "Elastic load time: %.3f, rank: %s" % (time.time() - started, rank),
                    "netloader.py:382")
            ctx.say("WARNING", rank, "Netloader elastic loading fails, use load format DefaultModelLoader",
                    "netloader.py:389")
            slowest = max(slowest, ctx.disk_s)
            continue
        held.append((rank, sock))
        slowest = max(slowest, ctx.peer_s)
    if len(held) < len(ctx.ranks) and ctx.disk_s > 0:
        ctx.log("INFO", "Loading weights from %s ..." % ctx.model, "model_runner.py:0",
                "EngineCore_DP%d" % ctx.dp_of[ctx.ranks[0]])
    try:
        sleep_or_stop(slowest)          # the ranks load side by side: ready after the slowest
    finally:
        for _, sock in held:
            sock.close()                # the transfer is over: the peer's server takes its next client
    for rank, _ in held:
        ctx.say("INFO", rank, "Netloader P2P load time: %.3f, device_id: %s, group: %s" % (ctx.peer_s, rank, GROUP),
                "load.py:99")
        ctx.say("INFO", rank, "Elastic load time: %.3f, rank: %s" % (ctx.peer_s, rank), "netloader.py:382")
    return [srv for srv in (serve(ctx, s, rank, match_path) for rank in ctx.ranks) if srv is not None]


def serve(ctx, s, rank, model_path):
    """NL L428-520: this rank's weight server, or None when it does not start."""
    port = s["listen_port"]
    if port is not None and not 1024 <= port < 65535:
        ctx.say("INFO", rank, "Skip to start Netloader server", "netloader.py:520")
        return None
    ip = os.environ.get("VLLM_HOST_IP") or ctx.ip or "0.0.0.0"
    if ip == "0.0.0.0":
        ctx.say("ERROR", rank, "Driver IP is not set, skip to start Netloader server", "netloader.py:438")
        return None
    port = (port + rank) if port is not None else 0
    if port > 65535:
        ctx.say("WARNING", rank, "Skip target Netloader server due to invalid listen port: %s" % port,
                "netloader.py:458")
        return None
    try:
        lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        lsock.bind((ip, port))
        lsock.listen(256)
    except OSError as e:
        ctx.say("INFO", rank, "Start elastic Netloader server, rank: %s, listen port: %s:%s, group: %s"
                % (rank, ip, port, GROUP), "netloader.py:469")
        ctx.say("ERROR", rank, "Failed to start Netloader server for rank: %s, details: %s" % (rank, e),
                "netloader.py:518")
        return None
    port = lsock.getsockname()[1]
    ctx.say("INFO", rank, "Start elastic Netloader server, rank: %s, listen port: %s:%s, group: %s"
            % (rank, ip, port, GROUP), "netloader.py:469")
    if s["output_prefix"]:
        try:
            with open("%s%d.txt" % (s["output_prefix"], rank), "w") as f:
                f.write("%s:%d" % (ip, port))
        except OSError as e:
            ctx.say("ERROR", rank, "I/O error occurred while writing to file %s%d: %s" % (s["output_prefix"], rank, e),
                    "netloader.py:489")
    me = {"device_id": rank, "model_path": model_path, "tp": ctx.tp, "pp": ctx.pp, "int8_cache": s["int8_cache"]}
    ctx.say("INFO", rank, "Server %s:%s starts, device id: %s, model path: %s, tp: %s, pp: %s, int8 params [] are "
            "saved to %s" % (ip, port, rank, model_path, ctx.tp, ctx.pp, s["int8_cache"]), "elastic.py:352")
    threading.Thread(target=accept_loop, args=(ctx, lsock, me), daemon=True).start()
    ctx.say("INFO", rank, "Elastic server started, rank: %s, group: %s" % (rank, GROUP), "netloader.py:512")
    return lsock


def answer(me, data):
    """EL L424-495: the reply to one JOIN."""
    c = data.get("content") if isinstance(data, dict) else None
    valid = (isinstance(c, dict) and data.get("label") == "JOIN"
             and all(k in c for k in ("device_id", "model_path", "tp", "pp", "port"))
             and c.get("int8_cache") in (None, "hbm", "dram", "no"))
    if not valid:
        return {"label": "JOIN_NACK", "content": "Received data does not contain required fields: %s" % data}
    theirs = (int(c["device_id"]), c["model_path"], int(c["tp"]), int(c["pp"]))
    mine = (me["device_id"], me["model_path"], me["tp"], me["pp"])
    if theirs != mine:
        return {"label": "JOIN_NACK", "content": "Received data %s does not consist with this server %s"
                % (theirs, mine)}
    if c.get("int8_cache") is not None and c["int8_cache"] != me["int8_cache"]:
        return {"label": "JOIN_NACK", "content": "Received int8_cache %s does not consist with this server %s"
                % (c["int8_cache"], me["int8_cache"])}
    return {"label": "JOIN_ACK", "content": {"name": None}}


def accept_loop(ctx, lsock, me):
    rank = me["device_id"]
    while not STOP.is_set():
        try:
            conn, addr = lsock.accept()
        except OSError:
            return
        ctx.say("INFO", rank, "Accept new connection from %s:%s..." % addr, "elastic.py:402")
        try:
            conn.settimeout(ACK_TIMEOUT)
            raw = conn.recv(1024).decode("utf-8", "replace")
            if not raw:
                continue
            try:
                data = json.loads(raw)
            except ValueError:
                ctx.say("ERROR", rank, "Failed to load %s as JSON string from %s" % (raw, addr), "elastic.py:420")
                continue
            ack = answer(me, data)
            if ack["label"] == "JOIN_ACK":
                ack["content"]["name"] = "%s:%s" % addr
            else:
                ctx.say("WARNING", rank, ack["content"], "elastic.py:487")
            conn.sendall(json.dumps(ack).encode())
            if ack["label"] == "JOIN_ACK":
                conn.settimeout(None)
                while conn.recv(65536):       # the transfer: the client holds the connection while it loads
                    pass
        except OSError:
            pass
        finally:
            conn.close()


def run(cfg, model, tp, pp, dp_ranks, ip, version, faults, log, fail):
    """vllm.py's entry: load this process's weights (peer or disk) and start its weight servers; their sockets."""
    if version < (0, 12):
        fail(["ValueError: no model loader is registered for load format 'netloader' (vllm-ascend registers it "
              "from v0.12.0rc1) [fake vLLM: stand-in policy]"], "APIServer", "loader.py:0")
    return load(Ctx(cfg, model, tp, pp, dp_ranks, ip, version, faults, log, fail))
