#!/usr/bin/python3
"""Stand-in for vLLM-Ascend inside a fake container (tests/fakecluster). Standard library only.

The fake vLLM-Ascend image (`.../vllm-ascend:TAG`, see docker.py make_vllm_layer) runs it as:
  /usr/local/bin/vllm serve [model_tag] [options]          -> serve()
  python3 /vllm-workspace/vllm-ascend/examples/disaggregated_prefill_v1/load_balance_proxy_server_example.py
      --host H --port P --prefiller-hosts ... --prefiller-ports ... --decoder-hosts ... --decoder-ports ...
                                                            -> proxy_main()

`vllm serve`, in vLLM's order, each failure logged the way vLLM logs it, exit 1 (argv errors: exit 2):
1. argv through an argparse parser built from vLLM's own parser table (/.fakecluster/vllm-flags/vllm-<ver>.json,
   the committed deployctl/engines/vllm_ascend/flags tables; the version is the image tag's major.minor, the
   newest older table when there is none for it): unknown flags `vllm serve: error: unrecognized arguments: ...`
   (exit 2), `--foo_bar` read as `--foo-bar` and unique prefixes accepted (FlexibleArgumentParser, allow_abbrev),
   `--kv-transfer-config` / `--additional-config` must be JSON.
2. EngineArgs rules: `--data-parallel-start-rank` only with `--headless`; `--headless` needs
   `--data-parallel-address` and a start rank > 0 (stand-in policy: a headless node at rank 0 takes the DP
   master's ranks, gpustack#5318); start + local <= size; `--data-parallel-rank` < size (external DP: one rank per
   process, local size 1).
3. The model: a local directory with config.json (no hub is reachable: transformers' error otherwise).
4. Devices: ASCEND_RT_VISIBLE_DEVICES (logical ids into the container's /dev/davinciN) must name devices the
   container has; tp x data-parallel-size-local (internal DP) or tp (external DP) must fit them.
5. Multi-node / P-D processes: HCCL_IF_IP must be this node's IP and GLOO_SOCKET_IFNAME an interface carrying it
   (multi_node_config.py DistEnvBuilder; every multi-node tutorial), else HCCL's / gloo's failure lines.
6. `--kv-transfer-config`: kv_role kv_producer|kv_consumer|kv_both, a known connector (or a module path),
   engine_id (stand-in policy: the guides require a unique one), kv_connector_extra_config.prefill and .decode with
   dp_size and tp_size, this side's own matching its dp/tp.
7. The API socket (--host/--port) is bound first (vLLM binds it before starting the engines): busy -> uvicorn's
   `[Errno 98] error while attempting to bind`.
8. DP rendezvous over TCP (what the DP handshake at --data-parallel-address:--data-parallel-rpc-port amounts to):
   internal DP: the process without --headless listens and waits until every headless node connected with its
   start rank and local size (a mismatched --data-parallel-size or overlapping ranks abort everyone, a missing
   node times out after engine_join_timeout); external DP (--data-parallel-rank): rank 0 listens, the others join.
   After the start a peer that goes away ends the others (`EngineCore ... died unexpectedly`).
9. Mooncake's handshake ports: kv_port + dp_rank x tp + tp_rank for each DP rank of this process
   (vllm_ascend/distributed/mooncake_connector.py side_channel_port), on HCCL_IF_IP; busy ->
   `zmq.error.ZMQError: Address already in use`.
10. Per DP engine core `init engine (profile, create kv cache, warmup model) took 1.23 seconds`; an API process then
   logs uvicorn's `Application startup complete.` and serves GET /health, /v1/models, /version, POST
   /v1/chat/completions and /v1/completions (plain and stream, openai_fake.answer). A kv_producer answers a request
   carrying kv_transfer_params.do_remote_decode with kv_transfer_params for the decode side.

Faults (node state at `docker run`): engine_crash / engine_crash_on (an engine core dies at init with NPU OOM),
engine_never_ready (joins, never finishes warming up), engine_slow_start, engine_join_timeout, engine_mooncake_error
(a kv_consumer logs `Mooncake transfer failed ... 103902` for a long prompt and still answers). engine_timing
(settings `engine.timing`): tokens come out with a prefill delay and a decode step (openai_fake.Timing); a
kv_consumer answering a request the prefiller handed over (kv_transfer_params.do_remote_prefill) skips the prefill.

Outside a container (unit tests) FAKE_VLLM_SETTINGS names the settings file; its keys `dev_dir`, `ip`, `image`,
`flags_dir` stand in for /dev, the node's IP, the image and the tables.
"""

import argparse
import json
import os
import re
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from openai_fake import (JsonHandler, ThreadingHTTPServer, Timing, answer, interface_addresses,  # noqa: E402
                         passthrough, prompt_tokens, read_settings, relay_stream)

SETTINGS_PATH = os.environ.get("FAKE_VLLM_SETTINGS", "/.fakecluster/settings.json")
STOP = threading.Event()
PID = os.getpid()
_out_lock = threading.Lock()
LONG_PROMPT = 1000      # tokens from which a KV transfer spans enough blocks to hit the Mooncake fault
KV_ROLES = ("kv_producer", "kv_consumer", "kv_both")
# vllm-ascend's registry (vllm_ascend/distributed/__init__.py@v0.11.0, kv_transfer/__init__.py@HEAD) + vLLM's own
CONNECTORS = {"MooncakeConnectorV1", "MooncakeLayerwiseConnector", "MooncakeHybridConnector", "LLMDataDistCMgrConnector",
              "MooncakeConnector", "NixlConnector", "SharedStorageConnector", "P2pNcclConnector", "LMCacheConnectorV1",
              "MultiConnector", "OffloadingConnector", "ExampleConnector", "MooncakeConnectorStoreV1",
              "AscendStoreConnector"}


# ---- logging (vLLM's: "(APIServer pid=N) INFO 11-24 04:29:01 [file.py:L] message") ------------------------

def out(text):
    with _out_lock:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()


def log(level, msg, src="api_server.py:0", proc="APIServer"):
    prefix = "(%s pid=%d) " % (proc, PID) if proc else ""
    out("%s%s %s [%s] %s" % (prefix, level, time.strftime("%m-%d %H:%M:%S"), src, msg))


class Fatal(Exception):
    def __init__(self, code=1):
        super().__init__(code)
        self.code = code


def fail(lines, proc="APIServer", src="core.py:0"):
    """An exception as vLLM prints it (the last line is the exception), exit 1."""
    if isinstance(lines, str):
        lines = [lines]
    for line in lines:
        out("(%s pid=%d) ERROR %s [%s] %s" % (proc, PID, time.strftime("%m-%d %H:%M:%S"), src, line))
    raise Fatal(1)


# ---- the parser, from vLLM's own table ---------------------------------------------------------------

def tag_version(image):
    """major.minor of an image tag (`quay.io/ascend/vllm-ascend:v0.13.0-a3` -> (0, 13)), or None."""
    last = (image or "").split("@", 1)[0].rsplit("/", 1)[-1]
    tag = last.rsplit(":", 1)[1] if ":" in last else ""
    m = re.match(r"v?(\d+)\.(\d+)", tag)
    return (int(m.group(1)), int(m.group(2))) if m else None


def flags_dir(settings):
    for d in (settings.get("flags_dir"), os.path.join(HERE, "vllm-flags"),
              os.path.join(HERE, "..", "..", "..", "deployctl", "engines", "vllm_ascend", "flags")):
        if d and os.path.isdir(d):
            return d
    return None


def table_for(settings):
    """vLLM's parser table for the image's version: same major.minor, else the newest older one, else the oldest."""
    d = flags_dir(settings)
    tables = {}
    for name in os.listdir(d) if d else []:
        m = re.fullmatch(r"vllm-(\d+)\.(\d+)\.(\d+)\.json", name)
        if m:
            tables[(int(m.group(1)), int(m.group(2)))] = os.path.join(d, name)
    if not tables:
        out("fake vLLM: no parser table (vllm-<version>.json) found")
        raise Fatal(1)
    want = tag_version(settings.get("image")) or max(tables)
    older = [k for k in tables if k <= want]
    key = want if want in tables else (max(older) if older else min(tables))
    with open(tables[key]) as f:
        return json.load(f)


class ServeParser(argparse.ArgumentParser):
    def error(self, message):
        self.print_usage(sys.stderr)
        sys.stderr.write("%s: error: %s\n" % (self.prog, message))
        sys.stderr.flush()
        raise SystemExit(2)


def build_parser(table):
    p = ServeParser(prog="vllm serve", usage="vllm serve [model_tag] [options]", allow_abbrev=True)
    p.add_argument("model_tag", nargs="?", default=None)
    json_opts = {"kv_transfer_config", "additional_config"}
    for name, o in sorted(table["options"].items()):
        action, dest = o["action"], o["dest"]
        names = [name] + [a for a in o.get("aliases") or [] if a != name]
        if action == "help" or name in ("-h", "--help"):
            continue
        if action == "boolean_optional":
            p.add_argument(*names, dest=dest, action="store_true", default=None)
            for neg in o.get("negations") or []:
                p.add_argument(neg, dest=dest, action="store_false", default=None)
        elif action == "store_true" or (o.get("boolean") and not o.get("takes_value")):
            p.add_argument(*names, dest=dest, action="store_true", default=None)
        elif action == "append":
            p.add_argument(*names, dest=dest, action="append")
        else:
            nargs = o.get("nargs")
            kw = {"dest": dest}
            if nargs in ("+", "?", "*"):
                kw["nargs"] = nargs
            if o.get("choices"):
                kw["choices"] = [str(c) for c in o["choices"]]
            if dest in json_opts:
                kw["type"] = json.loads
            p.add_argument(*names, **kw)
    return p


def flexible(argv):
    """FlexibleArgumentParser: `--foo_bar[=v]` is `--foo-bar[=v]`."""
    outv = []
    for a in argv:
        if a.startswith("--") and len(a) > 2:
            key, eq, val = a.partition("=")
            a = "--" + key[2:].replace("_", "-") + eq + val
        outv.append(a)
    return outv


def int_opt(parser, ns, dest, flag, default=None):
    v = ns.get(dest)
    if v is None:
        return default
    try:
        return int(v)
    except (TypeError, ValueError):
        parser.error("argument %s: invalid int value: %r" % (flag, v))


# ---- the host: devices, interfaces --------------------------------------------------------------------

def container_devices(settings):
    d = settings.get("dev_dir") or "/dev"
    try:
        names = os.listdir(d)
    except OSError:
        return []
    return sorted(int(m.group(1)) for m in (re.fullmatch(r"davinci(\d+)", n) for n in names) if m)


def node_ip(settings, ifaces):
    if settings.get("ip"):
        return settings["ip"]
    return next((a for n, a in sorted(ifaces.items()) if a and n != "lo"), "127.0.0.1")


def env_problem(environ, ip, ifaces, rank=0, size=2, master="", port=0):
    """HCCL_IF_IP / GLOO_SOCKET_IFNAME of a multi-node or P/D process: the failure lines, or None."""
    hccl_ip = environ.get("HCCL_IF_IP", "")
    if hccl_ip != ip:
        why = "is not set" if not hccl_ip else "is %s, not this node's IP %s" % (hccl_ip, ip)
        if hccl_ip and hccl_ip not in [a for a in ifaces.values() if a]:
            why = "is %s, which no interface of this host carries (this node: %s)" % (hccl_ip, ip)
        return ["[ERROR] HCCL(%d): [EI0001] HCCL_IF_IP %s: HCCL binds its host socket to the wrong NIC and the "
                "other nodes cannot reach it" % (PID, why),
                "RuntimeError: HCCL function error: HcclGetRootInfo(&rootInfo), error code is 7 (HCCL_IF_IP %s)"
                % why]
    name = environ.get("GLOO_SOCKET_IFNAME", "")
    names = [n.strip() for n in name.split(",") if n.strip()]
    for n in names:
        if n not in ifaces:
            return ["RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != "
                    "nullptr. Unable to find address for: %s" % n]
    if names and ip in [ifaces.get(n) for n in names]:
        return None
    local = next((ifaces[n] for n in names if ifaces.get(n)), None) or "127.0.0.1"
    why = ("GLOO_SOCKET_IFNAME is not set" if not names else
           "GLOO_SOCKET_IFNAME=%s carries %s, not HCCL_IF_IP %s" % (name, local, ip))
    return ["[E ProcessGroupGloo.cpp] ERROR failed to connect, willRetry=1, retry=3, retryLimit=3, rank=%d, size=%d, "
            "local=[%s]:%d, remote=[%s]:%d, error=SO_ERROR: Connection refused (%s)"
            % (rank, size, local, 29500 + rank, master or "?", port or 29500, why),
            "RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] "
            "no error"]


# ---- kv_transfer_config -------------------------------------------------------------------------------

def kv_problems(kv, dp, tp):
    """What vLLM (KVTransferConfig) and vllm-ascend's Mooncake connector refuse in --kv-transfer-config."""
    if not isinstance(kv, dict):
        return ["ValueError: --kv-transfer-config must be a JSON object, got %s" % type(kv).__name__]
    probs = []
    conn, role = kv.get("kv_connector"), kv.get("kv_role")
    if conn is not None and role is None:
        probs.append("ValueError: Please specify kv_role when kv_connector is set, supported roles are %s" % (KV_ROLES,))
    elif role is not None and role not in KV_ROLES:
        probs.append("ValueError: Unsupported kv_role: %s. Supported roles are %s" % (role, KV_ROLES))
    if conn is not None and conn not in CONNECTORS and not kv.get("kv_connector_module_path"):
        probs.append("ValueError: Unsupported connector type: %s" % conn)
    if "engine_id" not in kv or kv.get("engine_id") in (None, ""):
        probs.append("ValueError: kv_transfer_config.engine_id is missing: every P and D instance needs its own "
                     "engine_id (pd_disaggregation_mooncake_multi_node.md) [fake vLLM: stand-in policy]")
    try:
        int(kv.get("kv_port", 14579))
    except (TypeError, ValueError):
        probs.append("ValueError: kv_port %r is not a port" % kv.get("kv_port"))
    extra = kv.get("kv_connector_extra_config") or {}
    for side in ("prefill", "decode"):
        d = extra.get(side) if isinstance(extra, dict) else None
        if not isinstance(d, dict) or not all(isinstance(d.get(k), int) for k in ("dp_size", "tp_size")):
            probs.append("KeyError: kv_connector_extra_config.%s needs dp_size and tp_size (integers): the Mooncake "
                         "connector maps the other side's ranks from both sides' sizes, got %s"
                         % (side, json.dumps(d)))
    own = {"kv_producer": "prefill", "kv_consumer": "decode"}.get(role)
    d = (extra or {}).get(own) if own and isinstance(extra, dict) else None
    if isinstance(d, dict) and isinstance(d.get("dp_size"), int) and isinstance(d.get("tp_size"), int) \
            and (d["dp_size"], d["tp_size"]) != (dp, tp):
        probs.append("ValueError: kv_connector_extra_config.%s says dp_size %d, tp_size %d but this %s runs "
                     "data_parallel_size %d, tensor_parallel_size %d" % (own, d["dp_size"], d["tp_size"], role, dp, tp))
    return probs


# ---- the DP rendezvous ---------------------------------------------------------------------------------

def send(conn, obj):
    conn.sendall((json.dumps(obj) + "\n").encode())


class Lines:
    """JSON lines from a socket."""

    def __init__(self, conn):
        self.conn, self.buf = conn, b""

    def next(self, deadline):
        while b"\n" not in self.buf:
            remaining = deadline - time.time()
            if remaining <= 0 or STOP.is_set():
                raise TimeoutError()
            self.conn.settimeout(min(remaining, 0.2))
            try:
                chunk = self.conn.recv(4096)
            except socket.timeout:
                continue
            if not chunk:
                raise ConnectionError("connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line.decode())


def watch_peer(conn, who, proc):
    def run():
        conn.settimeout(None)
        try:
            while conn.recv(4096):
                pass
        except OSError:
            pass
        if STOP.is_set():
            return
        log("ERROR", "%s died unexpectedly, shutting down: the data parallel group is broken" % who,
            "core_client.py:0", proc)
        out("RuntimeError: Engine core proc %s died unexpectedly, shutting down client." % who)
        sys.stdout.flush()
        os._exit(1)
    threading.Thread(target=run, daemon=True).start()


def rank_text(start, n):
    return str(start) if n == 1 else "%d-%d" % (start, start + n - 1)


def rendezvous_master(lsock, me, timeout, proc):
    """The DP master: `me` = {kind, dp, start, local}; waits for every other DP rank of the group."""
    dp = me["dp"]
    owner = {r: "this node (%s)" % me["who"] for r in range(me["start"], me["start"] + me["local"])}
    log("INFO", "Waiting for %d local, %d remote core engine proc(s) to start on %s:%d (timeout %g s)."
        % (me["local"], dp - me["local"], lsock.getsockname()[0], lsock.getsockname()[1], timeout),
        "utils.py:0", proc)
    joined = []
    deadline = time.time() + timeout
    lsock.settimeout(0.2)

    def abort(reason):
        for c, _ in joined:
            try:
                send(c, {"abort": reason})
            except OSError:
                pass
        fail(["RuntimeError: " + reason], proc, "utils.py:0")

    while len(owner) < dp:
        if STOP.is_set():
            raise Fatal(0)
        if time.time() > deadline:
            missing = [r for r in range(dp) if r not in owner]
            abort("Timed out waiting for engines to send initial message on input socket: DP rank(s) %s of %d "
                  "never connected to %s:%d within %g s (is the %s running there?)"
                  % (",".join(map(str, missing)), dp, lsock.getsockname()[0], lsock.getsockname()[1], timeout,
                     "headless node" if me["kind"] == "internal" else "vllm serve of that rank"))
        try:
            conn, peer = lsock.accept()
        except socket.timeout:
            continue
        try:
            hello = Lines(conn).next(time.time() + 5)
        except (TimeoutError, ConnectionError, ValueError):
            conn.close()
            continue
        who = "%s (%s)" % (hello.get("who"), peer[0])
        if hello.get("dp") != dp or hello.get("kind") != me["kind"]:
            send(conn, {"abort": "mismatched parallel config"})
            joined.append((conn, who))
            abort("Mismatched parallel config between the DP master and %s: data_parallel_size %s (%s DP) there, "
                  "%d (%s DP) here" % (who, hello.get("dp"), hello.get("kind"), dp, me["kind"]))
        ranks = range(int(hello.get("start", 0)), int(hello.get("start", 0)) + int(hello.get("local", 1)))
        clash = [r for r in ranks if r in owner]
        if clash or ranks.stop > dp or ranks.start < 0:
            joined.append((conn, who))
            if clash:
                abort("Unexpected HELLO message for remote engine %d: %s claims DP rank(s) %s, already held by %s "
                      "(overlapping --data-parallel-start-rank / --data-parallel-rank)"
                      % (clash[0], who, rank_text(ranks.start, len(ranks)), owner[clash[0]]))
            abort("%s claims DP rank(s) %s outside 0..%d (data_parallel_size %d)"
                  % (who, rank_text(ranks.start, len(ranks)), dp - 1, dp))
        for r in ranks:
            owner[r] = who
        joined.append((conn, who))
        send(conn, {"ack": True})
        log("INFO", "DP rank(s) %s of %s joined (%d/%d)" % (rank_text(ranks.start, len(ranks)), who, len(owner), dp),
            "utils.py:0", proc)
    for c, who in joined:
        try:
            send(c, {"go": True})
        except OSError:
            pass
        watch_peer(c, "EngineCore of %s" % who, proc)
    log("INFO", "All %d DP ranks joined the data parallel group." % dp, "utils.py:0", proc)


def rendezvous_worker(addr, port, me, timeout, proc):
    deadline = time.time() + timeout
    log("INFO", "Connecting to the DP master at tcp://%s:%d (timeout %g s)" % (addr, port, timeout), "core.py:0", proc)
    conn = None
    while conn is None:
        if STOP.is_set():
            raise Fatal(0)
        if time.time() > deadline:
            fail(["TimeoutError: Timed out waiting for the DP master at tcp://%s:%d: nothing accepted within %g s "
                  "(is the vllm serve without --headless running there?)" % (addr, port, timeout)], proc, "core.py:0")
        try:
            conn = socket.create_connection((addr, port), timeout=1)
        except OSError:
            time.sleep(0.2)
    send(conn, me)
    lines = Lines(conn)
    while True:
        try:
            msg = lines.next(deadline)
        except TimeoutError:
            if STOP.is_set():
                raise Fatal(0)
            fail(["TimeoutError: the DP master at tcp://%s:%d did not start the data parallel group within %g s "
                  "(some DP ranks did not join)" % (addr, port, timeout)], proc, "core.py:0")
        except (ConnectionError, OSError, ValueError):
            fail(["RuntimeError: the DP master at tcp://%s:%d closed the connection during the handshake"
                  % (addr, port)], proc, "core.py:0")
        if msg.get("abort"):
            fail(["RuntimeError: the DP master at tcp://%s:%d aborted the handshake: %s" % (addr, port, msg["abort"])],
                 proc, "core.py:0")
        if msg.get("go"):
            watch_peer(conn, "the DP master at %s:%d" % (addr, port), proc)
            return


# ---- HTTP ----------------------------------------------------------------------------------------------

class ApiHandler(JsonHandler):
    server_version = "uvicorn"
    ctx = {}

    def do_GET(self):
        path = self.path.split("?")[0]
        if path in ("/health", "/ping"):
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return None
        if path == "/version":
            return self._json(200, {"version": self.ctx["version"]})
        if path == "/v1/models":
            return self._json(200, {"object": "list", "data": [
                {"id": n, "object": "model", "created": int(self.ctx["started"]), "owned_by": "vllm",
                 "root": self.ctx["root"], "parent": None, "max_model_len": self.ctx["max_seq"]}
                for n in self.ctx["model"]]})
        return self._json(404, {"detail": "Not Found"})

    def do_POST(self):
        path = self.path.split("?")[0]
        if path not in ("/v1/chat/completions", "/v1/completions"):
            return self._json(404, {"detail": "Not Found"})
        req = self._body()
        if req is None:
            return None
        ctx = self.ctx
        chat = path.endswith("/chat/completions")
        extra = None
        kvp = req.get("kv_transfer_params") if isinstance(req.get("kv_transfer_params"), dict) else None
        kv = ctx.get("kv") or {}
        if kv.get("kv_role") == "kv_producer" and kvp and kvp.get("do_remote_decode"):
            extra = {"kv_transfer_params": {
                "do_remote_prefill": True, "do_remote_decode": False, "remote_block_ids": list(range(4)),
                "remote_engine_id": str(kv.get("engine_id")), "remote_host": ctx["ip"],
                "remote_port": ctx["kv_port"] + ctx["ranks"][0] * ctx["tp"], "remote_tp_size": ctx["tp"]}}
        fault = ctx.get("mooncake_error")
        if kv.get("kv_role") == "kv_consumer" and fault and prompt_tokens(req, chat) >= LONG_PROMPT:
            src = (kvp or {})
            text = fault if isinstance(fault, str) else (
                "Mooncake transfer failed for a request from engine %s at %s:%s: batch_transfer_sync_read returned "
                "-1, error code 103902 (transfer timeout); the decode side recomputes the prompt"
                % (src.get("remote_engine_id", "?"), src.get("remote_host", "?"), src.get("remote_port", "?")))
            log("ERROR", text, "mooncake_connector.py:0", "EngineCore_DP%d" % ctx["ranks"][0])
        # the decode side of a P/D split got the prompt's KV from the prefiller (Mooncake): no prefill delay
        prefilled = kv.get("kv_role") == "kv_consumer" and bool((kvp or {}).get("do_remote_prefill"))
        return answer(self, req, path, ctx, extra=extra, prefilled=prefilled)


def bind_api(host, port, proc):
    try:
        srv = ThreadingHTTPServer((host, port), ApiHandler, bind_and_activate=False)
        srv.allow_reuse_address = True
        srv.server_bind()
        srv.server_activate()
        return srv
    except OSError as e:
        out("(%s pid=%d) ERROR:    [Errno %d] error while attempting to bind on address ('%s', %d): %s"
            % (proc, PID, e.errno or 0, host, port, (e.strerror or str(e)).lower()))
        raise Fatal(1)


def bind_kv_ports(ip, ports, proc):
    socks = []
    for p in ports:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # as libzmq's TCP listener (tcp_listener.cpp sets SO_REUSEADDR): a restart may rebind over TIME_WAIT
        # connections of the previous engine; a port another process listens on still fails (Linux)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((ip, p))
            s.listen(16)
        except OSError as e:
            s.close()
            for x in socks:
                x.close()
            fail(["Exception in thread KVCacheSendingThread:", "Traceback (most recent call last):",
                  "  File \"vllm_ascend/distributed/mooncake_connector.py\", in run",
                  "    sock.bind(path)",
                  "zmq.error.ZMQError: Address already in use (addr='tcp://%s:%d')%s"
                  % (ip, p, "" if e.errno == 98 else " [errno %s]" % e.errno)], proc, "mooncake_connector.py:0")
        socks.append(s)
    return socks


# ---- vllm serve ----------------------------------------------------------------------------------------

def wait_stop():
    while not STOP.wait(1):
        pass
    raise Fatal(0)


def sleep_or_stop(seconds):
    if STOP.wait(seconds):
        raise Fatal(0)


def serve(argv, settings):
    faults = settings.get("engine") or {}
    table = table_for(settings)
    version = table.get("vllm_version", "0.0.0")
    parser = build_parser(table)
    args = parser.parse_args(flexible(argv))
    ns = vars(args)
    model = ns.get("model_tag") or ns.get("model") or "Qwen/Qwen3-0.6B"
    names = list(ns.get("served_model_name") or [model])
    tp = int_opt(parser, ns, "tensor_parallel_size", "--tensor-parallel-size/-tp", 1)
    dp = int_opt(parser, ns, "data_parallel_size", "--data-parallel-size/-dp", 1)
    dp_local = int_opt(parser, ns, "data_parallel_size_local", "--data-parallel-size-local/-dpl")
    start = int_opt(parser, ns, "data_parallel_start_rank", "--data-parallel-start-rank/-dpr")
    dp_rank = int_opt(parser, ns, "data_parallel_rank", "--data-parallel-rank/-dpn")
    rpc_port = int_opt(parser, ns, "data_parallel_rpc_port", "--data-parallel-rpc-port/-dpp", 29550)
    address = ns.get("data_parallel_address")
    headless = bool(ns.get("headless"))
    host = ns.get("host") or "0.0.0.0"
    port = int_opt(parser, ns, "port", "--port", 8000)
    max_len = int_opt(parser, ns, "max_model_len", "--max-model-len")
    kv = ns.get("kv_transfer_config")
    external = dp_rank is not None
    proc = "APIServer" if not headless else "EngineCore_DP%d" % (start or 0)
    if headless:
        log("INFO", "Launching %s data parallel engine(s) in headless mode, with head node address tcp://%s:%d."
            % (dp_local if dp_local is not None else dp, address, rpc_port), "serve.py:0", None)
    else:
        log("INFO", "vLLM API server version %s" % version, "api_server.py:0", proc)
        log("INFO", "args: %s" % " ".join(argv), "utils.py:0", proc)
    # EngineArgs (vllm/engine/arg_utils.py create_engine_config) and the stand-in's DP rules
    if start and not headless:
        fail("ValueError: data_parallel_start_rank is only applicable in headless mode. Add --headless flag to "
             "enable headless mode.", proc, "arg_utils.py:0")
    if headless and not address:
        fail("ValueError: --headless needs --data-parallel-address: the address of the DP master (the node that "
             "runs vllm serve without --headless) [fake vLLM: stand-in policy]", proc, "serve.py:0")
    if headless and not external and not start:
        fail("ValueError: --headless with --data-parallel-start-rank %s: rank 0 belongs to the DP master; a headless "
             "node starts at the first DP rank it owns (node i: i x data_parallel_size_local) [fake vLLM: stand-in "
             "policy, gpustack#5318]" % (start if start is not None else "unset (0)"), proc, "serve.py:0")
    if external:
        if not 0 <= dp_rank < dp:
            fail("ValueError: data_parallel_rank %d must be in [0, data_parallel_size %d)" % (dp_rank, dp), proc,
                 "arg_utils.py:0")
        ranks = [dp_rank]
    else:
        local = dp_local if dp_local is not None else dp
        first = start or 0
        if local < 1 or first + local > dp:
            fail("ValueError: data_parallel_start_rank (%d) + data_parallel_size_local (%d) exceeds "
                 "data_parallel_size (%d)" % (first, local, dp), proc, "arg_utils.py:0")
        ranks = list(range(first, first + local))
    # the model (no hub is reachable from a fake node)
    if not os.path.isfile(os.path.join(model, "config.json")):
        fail("OSError: %s is not a local folder and is not a valid model identifier listed on "
             "'https://huggingface.co/models' (no local config.json; the hub is not reachable)" % model, proc,
             "config.py:0")
    # devices
    visible_dev = container_devices(settings)
    env_dev = os.environ.get("ASCEND_RT_VISIBLE_DEVICES")
    if env_dev is not None:
        try:
            ids = [int(x) for x in env_dev.split(",") if x.strip() != ""]
        except ValueError:
            fail("RuntimeError: ASCEND_RT_VISIBLE_DEVICES=%r is not a list of device ids" % env_dev, proc,
                 "platform.py:0")
        bad = [i for i in ids if not 0 <= i < len(visible_dev)]
        if bad or len(set(ids)) != len(ids):
            fail("RuntimeError: ASCEND_RT_VISIBLE_DEVICES=%s: device(s) %s do not exist: the container has %d NPU(s) "
                 "(%s), logical ids 0..%d" % (env_dev, ",".join(map(str, bad or ids)), len(visible_dev),
                                               " ".join("/dev/davinci%d" % d for d in visible_dev) or "none",
                                               len(visible_dev) - 1), proc, "platform.py:0")
        count = len(ids)
    else:
        count = len(visible_dev)
    need = tp * len(ranks)
    if need > count:
        fail("RuntimeError: tensor_parallel_size %d x %d DP rank(s) in this process = %d NPUs, but %d are visible "
             "(%s)" % (tp, len(ranks), need, count, "ASCEND_RT_VISIBLE_DEVICES=%s" % env_dev if env_dev is not None
                       else "the container's /dev/davinci*"), proc, "platform.py:0")
    # HCCL / gloo on multi-node and P/D processes
    ifaces = interface_addresses()
    ip = node_ip(settings, ifaces)
    grouped = dp > len(ranks) or kv is not None
    if grouped:
        problem = env_problem(os.environ, ip, ifaces, rank=ranks[0] * tp, size=dp * tp, master=address or "",
                              port=rpc_port)
        if problem:
            fail(problem, "EngineCore_DP%d" % ranks[0], "parallel_state.py:0")
    kv_port = 14579
    if kv is not None:
        probs = kv_problems(kv, dp, tp)
        if probs:
            fail(probs, proc, "kv_transfer.py:0")
        kv_port = int(kv.get("kv_port", 14579))
    max_seq = max_len or 8192
    ApiHandler.ctx = {
        "model": names, "root": model, "started": time.time(), "version": version, "max_seq": max_seq,
        "max_input": max_seq, "ip": ip, "kv": kv, "kv_port": kv_port, "tp": tp, "ranks": ranks,
        "mooncake_error": faults.get("mooncake_error"), "timing": Timing(faults.get("timing")),
        "too_long": "This model's maximum context length is %(limit)d tokens. However, your request has "
                    "%(tokens)d input tokens. Please reduce the length of the input messages.",
        "describe": lambda source: "This is %s answering from %s (fake vLLM-Ascend %s, DP rank %s of %d, TP%d%s)."
        % (names[0], settings.get("node") or socket.gethostname(), version, rank_text(ranks[0], len(ranks)), dp,
           tp, ", %s" % kv.get("kv_role") if kv else "")}
    srv = None if headless else bind_api(host, port, proc)
    slow = float(faults.get("slow_start") or 0)
    if slow > 0:
        log("INFO", "Loading weights from %s ..." % model, "model_runner.py:0", "EngineCore_DP%d" % ranks[0])
        sleep_or_stop(slow)
    crash_on = faults.get("crash_on") or ""
    if crash_on and "=" in crash_on and os.environ.get(crash_on.split("=", 1)[0]) == crash_on.split("=", 1)[1]:
        faults = dict(faults, crash="HBM ECC error while loading weights (%s)" % crash_on)
    if faults.get("crash"):
        sleep_or_stop(0.3)
        msg = faults["crash"] if isinstance(faults["crash"], str) else (
            "NPU out of memory. Tried to allocate 450.00 MiB (NPU 0; 60.97 GiB total capacity; 14.67 GiB already "
            "allocated; 14.67 GiB current active; 22.66 MiB free; 14.71 GiB reserved in total by PyTorch)")
        core = "EngineCore_DP%d" % ranks[0]
        out("(%s pid=%d) ERROR %s [core.py:0] EngineCore failed to start." % (core, PID, time.strftime("%m-%d %H:%M:%S")))
        out("(%s pid=%d) RuntimeError: %s" % (core, PID, msg))
        fail("RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {'%s': 1}"
             % core, proc, "core_client.py:0")
    # the DP group
    timeout = float(faults.get("join_timeout") or 15)
    me = {"kind": "external" if external else "internal", "dp": dp, "start": ranks[0], "local": len(ranks),
          "who": "%s %s" % (settings.get("node") or socket.gethostname(), os.environ.get("HCCL_IF_IP") or ip)}
    if dp > len(ranks):
        master = (external and dp_rank == 0) or (not external and not headless)
        if master:
            bind_ip = address or "127.0.0.1"
            lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                lsock.bind((bind_ip, rpc_port))
                lsock.listen(64)
            except OSError as e:
                fail("zmq.error.ZMQError: %s (addr='tcp://%s:%d'): the DP master binds --data-parallel-address, "
                     "which must be this node's" % (e.strerror or e, bind_ip, rpc_port), proc, "utils.py:0")
            rendezvous_master(lsock, me, timeout, proc)
        else:
            rendezvous_worker(address or "127.0.0.1", rpc_port, me, timeout, "EngineCore_DP%d" % ranks[0])
    kv_socks = []
    if kv is not None:
        ports = [kv_port + r * tp + t for r in ranks for t in range(tp)]
        kv_socks = bind_kv_ports(os.environ.get("HCCL_IF_IP") or ip, ports, "EngineCore_DP%d" % ranks[0])
        log("INFO", "Mooncake handshake ports %d-%d on %s (%s, engine_id %s)" % (
            ports[0], ports[-1], os.environ.get("HCCL_IF_IP") or ip, kv.get("kv_role"), kv.get("engine_id")),
            "mooncake_connector.py:0", "EngineCore_DP%d" % ranks[0])
    if faults.get("never_ready"):
        for r in ranks:
            log("INFO", "Capturing ACL graphs (warming up the model) ...", "model_runner.py:0", "EngineCore_DP%d" % r)
        wait_stop()
    for r in ranks:
        log("INFO", "init engine (profile, create kv cache, warmup model) took 1.23 seconds", "core.py:0",
            "EngineCore_DP%d" % r)
    if srv is not None:
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
        log("INFO", "Starting vLLM API server 0 on http://%s:%d" % (host, port), "launcher.py:0", proc)
        out("(%s pid=%d) INFO:     Started server process [%d]" % (proc, PID, PID))
        out("(%s pid=%d) INFO:     Waiting for application startup." % (proc, PID))
        out("(%s pid=%d) INFO:     Application startup complete." % (proc, PID))
    else:
        log("INFO", "Headless engine(s) for DP rank(s) %s running; no API server in headless mode"
            % rank_text(ranks[0], len(ranks)), "serve.py:0", None)
    del kv_socks
    wait_stop()


# ---- the P/D proxy (examples/disaggregated_prefill_v1/load_balance_proxy_server_example.py) --------------

class ProxyHandler(JsonHandler):
    server_version = "uvicorn"
    ctx = {}
    lock = threading.Lock()

    def do_GET(self):
        path = self.path.split("?")[0]
        if path == "/healthcheck":
            return self._json(200, {"status": "ok", "prefill_instances": len(self.ctx["p"]),
                                    "decode_instances": len(self.ctx["d"])})
        return self._json(404, {"detail": "Not Found"})

    def _pick(self, key):
        with self.lock:
            i = self.ctx["next_" + key]
            self.ctx["next_" + key] = (i + 1) % len(self.ctx[key])
        return self.ctx[key][i]

    def do_POST(self):
        path = self.path.split("?")[0]
        if path not in ("/v1/chat/completions", "/v1/completions"):
            return self._json(404, {"detail": "Not Found"})
        req = self._body()
        if req is None:
            return None
        p, d = self._pick("p"), self._pick("d")
        pre = dict(req, stream=False, max_tokens=1, kv_transfer_params={
            "do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
            "remote_block_ids": None, "remote_host": None, "remote_port": None})
        for k in ("max_completion_tokens", "stream_options"):
            pre.pop(k, None)
        try:
            r = urllib.request.urlopen(urllib.request.Request(
                "http://%s:%d%s" % (p[0], p[1], path), data=json.dumps(pre).encode(), method="POST",
                headers={"Content-Type": "application/json"}), timeout=60)
            got = json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            return passthrough(self, e.code, e.headers, e.read())
        except (OSError, ValueError) as e:
            return self._json(502, {"error": {"message": "prefiller %s:%d failed: %s" % (p[0], p[1], e),
                                              "type": "bad_gateway", "param": None, "code": 502}})
        dreq = dict(req)
        if isinstance(got, dict) and got.get("kv_transfer_params"):
            dreq["kv_transfer_params"] = got["kv_transfer_params"]
        try:
            resp = urllib.request.urlopen(urllib.request.Request(
                "http://%s:%d%s" % (d[0], d[1], path), data=json.dumps(dreq).encode(), method="POST",
                headers={"Content-Type": "application/json"}), timeout=120)
        except urllib.error.HTTPError as e:
            return passthrough(self, e.code, e.headers, e.read())
        except OSError as e:
            return self._json(502, {"error": {"message": "decoder %s:%d failed: %s" % (d[0], d[1], e),
                                              "type": "bad_gateway", "param": None, "code": 502}})
        return relay_stream(self, resp)


def proxy_main(argv):
    signal.signal(signal.SIGTERM, lambda *_: STOP.set())
    signal.signal(signal.SIGINT, lambda *_: STOP.set())
    p = argparse.ArgumentParser(prog="load_balance_proxy_server_example.py")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--host", type=str, default="localhost")
    p.add_argument("--prefiller-hosts", "--prefiller-host", type=str, nargs="+", default=["localhost"])
    p.add_argument("--prefiller-ports", "--prefiller-port", type=int, nargs="+", default=[8100])
    p.add_argument("--decoder-hosts", "--decoder-host", type=str, nargs="+", default=["localhost"])
    p.add_argument("--decoder-ports", "--decoder-port", type=int, nargs="+", default=[8200])
    p.add_argument("--max-retries", type=int, default=3)
    p.add_argument("--retry-delay", type=float, default=0.001)
    args = p.parse_args(argv)
    try:
        if len(args.prefiller_hosts) != len(args.prefiller_ports):
            raise ValueError("Number of prefiller hosts must match number of prefiller ports")
        if len(args.decoder_hosts) != len(args.decoder_ports):
            raise ValueError("Number of decoder hosts must match number of decoder ports")
    except ValueError as e:
        out("Traceback (most recent call last):")
        out("ValueError: %s" % e)
        return 1
    ProxyHandler.ctx = {"p": list(zip(args.prefiller_hosts, args.prefiller_ports)),
                        "d": list(zip(args.decoder_hosts, args.decoder_ports)), "next_p": 0, "next_d": 0}
    out("Initialized %d prefill clients and %d decode clients." % (len(args.prefiller_hosts), len(args.decoder_hosts)))
    try:
        srv = ThreadingHTTPServer((args.host, args.port), ProxyHandler)
    except OSError as e:
        out("ERROR:    [Errno %d] error while attempting to bind on address ('%s', %d): %s"
            % (e.errno or 0, args.host, args.port, (e.strerror or str(e)).lower()))
        return 1
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
    out("INFO:     Started server process [%d]" % PID)
    out("INFO:     Waiting for application startup.")
    out("INFO:     Application startup complete.")
    out("INFO:     Uvicorn running on http://%s:%d (Press CTRL+C to quit)" % (args.host, args.port))
    while not STOP.wait(1):
        pass
    out("INFO:     Shutting down")
    return 0


# ---- main ----------------------------------------------------------------------------------------------

USAGE = "usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...\n"


def main(argv):
    signal.signal(signal.SIGTERM, lambda *_: STOP.set())
    signal.signal(signal.SIGINT, lambda *_: STOP.set())
    settings = read_settings(SETTINGS_PATH)
    if argv and argv[0] in ("-v", "--version"):
        out(table_for(settings).get("vllm_version", "0.0.0"))
        return 0
    if not argv or argv[0] != "serve":
        sys.stderr.write(USAGE + "vllm: error: argument subparser: invalid choice: %r (choose from 'chat', "
                         "'complete', 'serve', 'bench', 'collect-env', 'run-batch') [fake vLLM: only serve]\n"
                         % (argv[0] if argv else ""))
        return 2
    try:
        serve(argv[1:], settings)
    except Fatal as f:
        if f.code == 0:
            out("INFO:     Shutting down")
        return f.code
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 2
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
