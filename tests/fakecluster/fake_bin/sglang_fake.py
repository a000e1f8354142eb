#!/usr/bin/python3
"""Stand-in for SGLang's `python3 -m sglang.launch_server` inside a fake container (tests/fakecluster). Standard
library only. The fake SGLang image (`lmsysorg/sglang:TAG`, `quay.io/ascend/sglang:TAG`; docker.py
make_sglang_layer) has a `sglang` package whose launch_server module calls main(). The router of those images is the
REAL sglang-router 0.3.2 (docker.py SGLANG_ROUTER_SITE), which talks to this server as to the real one.

Sources: sglang 0.5.18-0.5.23 wheels as summarised in research 38 (http_server.py, disaggregation/, metrics) and
deployctl/core/engines/sglang/processes.py. In SGLang's order, each failure logged as SGLang logs it:

1. argv through an argparse parser built from the release's own parser table (/.fakecluster/sglang-flags/
   sglang-<release>.json, the committed deployctl/core/engines/sglang/flags tables; the release is the image tag's
   `vX.Y.Z`, the newest older table when there is none for it): plain argparse with prog `sglang serve` (what
   prepare_server_args builds), so an unknown flag is `sglang serve: error: unrecognized arguments: ...` after the
   usage (exit 2), a unique prefix of a flag is that flag (allow_abbrev), a bad int/float/choice is argparse's error.
2. ServerArgs rules deployctl relies on: --node-rank within --nnodes; --nnodes > 1 needs --dist-init-addr
   (stand-in policy: upstream falls back to 127.0.0.1 and the other nodes then never join); the model a local
   directory with config.json; tp (x dp for a dense DP without DP attention) / nnodes devices per node, at most the
   container's /dev/davinci* (or ASCEND_RT_VISIBLE_DEVICES); a P/D server (--disaggregation-mode prefill|decode)
   with --disaggregation-transfer-backend ascend needs ASCEND_MF_STORE_URL=tcp://HOST:PORT (MemFabric's config
   store; message of the stand-in); GLOO_SOCKET_IFNAME / HCCL_SOCKET_IFNAME, when set, must name interfaces of the
   node (gloo's `Unable to find address for: X`).
3. Binds: node rank 0 binds --host:--port first (busy: uvicorn's `[Errno 98] error while attempting to bind`); a
   prefill server's rank 0 the bootstrap server on --host:--disaggregation-bootstrap-port (default 8998, from the
   table); the server on the node the MemFabric store URL names (the first prefill server's master) the store.
4. Multi-node (--nnodes N): node rank 0 listens on --dist-init-addr (must be its own address) and waits until every
   other rank connected and said hello (nnodes, tp, its rank: a mismatch aborts everyone), then says go; a node
   that does not come within engine_join_timeout (15 s) fails the rendezvous (torch.distributed's timeout text). A
   peer that goes away afterwards breaks the group: `Scheduler hit an exception` + `Received sigquit from a child
   process`, exit.
5. Per device of the node (local TP ranks): `[ts TPk] Load weight begin/end`, `KV Cache is allocated`,
   `Memory pool end. avail mem=...` (processes.RANK_READY, counted per device). Rank 0 then starts uvicorn
   (`Application startup complete.`), warms up and logs `The server is fired up and ready to roll!`; /health,
   /health_generate (and /ready from 0.5.20) answer 503 until then, 200 after.
6. Rank 0 serves GET /v1/models, /get_server_info + /server_info, /get_model_info + /model_info, /get_load (until
   0.5.20, removed in 0.5.22), /v1/loads, /metrics (only with --enable-metrics: sglang:* gauges, counters and
   histograms, else 404), POST /v1/chat/completions and /v1/completions (plain and stream, usage; openai_fake.answer;
   `max_completion_tokens` as `max_tokens`, which is what the router sends), POST /flush_cache.
7. P/D (SGLang's router-driven flow, sglang-router PD mode): the router sends the SAME request to a prefill and a
   decode server with bootstrap_host (the prefill URL's host), bootstrap_port and bootstrap_room added. A prefill
   server runs the prompt (the prefill delay of engine_timing), files the room's KV with its bootstrap server and
   answers with one token. A decode server asks the bootstrap server at bootstrap_host:bootstrap_port for the
   prefill's parallel info (GET /route, as upstream's KV receiver) and then for the room's KV (a long poll: the
   stand-in's transfer), and decodes without a prefill delay; an unreachable bootstrap or a room never filed is a
   failed transfer (`KVTransferError`, 500). Either side without the bootstrap fields: 400 (stand-in policy).

Faults (node state at `docker run`): engine_crash (a scheduler dies at init with NPU OOM: the fatal lines, SIGKILL of
the process tree as upstream's kill_process_tree), engine_never_ready (stops before `Memory pool end.`),
engine_slow_start, engine_join_timeout, engine_timing (openai_fake.Timing).

Guesses (not captured from a real SGLang): the texts of the stand-in policies above, the rendezvous and MemFabric
lines, the bootstrap server's /fakecluster/kv route (upstream moves the KV over MemFabric, not HTTP), metric labels
other than model_name.

Outside a container (unit tests) FAKE_SGLANG_SETTINGS names the settings file (`dev_dir`, `ip`, `image`,
`flags_dir`, `engine`).
"""

import json
import os
import re
import signal
import socket
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from openai_fake import (JsonHandler, Timing, answer, interface_addresses, prom_histogram,  # noqa: E402
                         prompt_tokens, read_settings)
from standin_common import (NO_LOCAL_MODEL, NPU_OOM, STOP, Fatal, Lines, ServeParser,  # noqa: E402
                            container_devices, exit_now, http_server, image_tag, join_master, next_hello,
                            node_ip, out, prom_label, read_table, send, sleep_or_stop, start_group,
                            stop_on_signals, tcp_listener, tell_all, uvicorn_bind_error, uvicorn_started,
                            wait_stop, watch_peer)

SETTINGS_PATH = os.environ.get("FAKE_SGLANG_SETTINGS", "/.fakecluster/settings.json")
SERVER_READY = "The server is fired up and ready to roll!"
RANK_READY = "Memory pool end."
KV_WAIT_S = 60.0          # how long a decode server waits for the prefill's KV of a room
ROOM_TTL_S = 300.0


# ---- logging (SGLang's: "[2026-11-29 04:29:39 TP0] message", the rank prefix on scheduler lines) ---------------

def log(msg, rank=None):
    out("[%s%s] %s" % (time.strftime("%Y-%m-%d %H:%M:%S"), "" if rank is None else " TP%d" % rank, msg))


def fail(lines, rank=None):
    """An exception as SGLang's launcher prints it (the traceback's last line is the exception), exit 1."""
    if isinstance(lines, str):
        lines = [lines]
    out("[%s%s] Traceback (most recent call last):" % (time.strftime("%Y-%m-%d %H:%M:%S"),
                                                        "" if rank is None else " TP%d" % rank))
    out('  File "/usr/local/lib/python3.11/dist-packages/sglang/launch_server.py", line 81, in <module>')
    for line in lines:
        out(line)
    raise Fatal(1)


def scheduler_died(rank, lines):
    """A scheduler's exception after the start: its traceback, the parent's note, then the process tree is killed
    (entrypoints/engine.py: sigquit handler -> kill_process_tree(include_parent=True): SIGKILL, exit 137)."""
    log("Scheduler hit an exception: Traceback (most recent call last):", rank)
    for line in lines:
        out(line)
    log("Received sigquit from a child process. It usually means the child failed.")
    sys.stdout.flush()
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)


# ---- the parser, from SGLang's own table ----------------------------------------------------------------

def release_of(image):
    """The release an image tag names: `lmsysorg/sglang:v0.5.18-cann9.0.0-a3` -> (0, 5, 18); quay.io's
    `cann9.0.0-a3-v0.5.16` -> (0, 5, 16); None when there is none."""
    m = re.search(r"(?:^|-)v(\d+)\.(\d+)\.(\d+)", image_tag(image))
    return tuple(int(x) for x in m.groups()) if m else None


def table_for(settings):
    """SGLang's parser table for the image's release: that release, else the newest older one, else the oldest."""
    return read_table(settings, "sglang", "sglang", 3, release_of(settings.get("image")),
                      "fake SGLang: no parser table (sglang-<release>.json) found")


TYPES = {"int": int, "float": float, "json.loads": json.loads}


def build_parser(table):
    """argparse.ArgumentParser(prog="sglang serve") with every option of the table, as ServerArgs.add_cli_args
    registers it (types int/float/json, choices, nargs); every default None (the table's defaults: default())."""
    p = ServeParser(prog="sglang serve")
    for name, o in sorted(table["options"].items()):
        if o["action"] == "help" or name in ("-h", "--help"):
            continue
        names = [name] + [a for a in o.get("aliases") or [] if a != name]
        dest = o["dest"]
        if not o.get("takes_value"):
            p.add_argument(*names, dest=dest, action="store_true", default=None)
            for neg in o.get("negations") or []:
                p.add_argument(neg, dest=dest, action="store_false", default=None)
            continue
        kw = {"dest": dest, "default": None}
        if o.get("nargs") in ("+", "*", "?"):
            kw["nargs"] = o["nargs"]
        if o.get("choices"):
            kw["choices"] = [c if not isinstance(c, (int, float)) or o.get("type") in TYPES else str(c)
                             for c in o["choices"]]
        if o.get("type") in TYPES:
            kw["type"] = TYPES[o["type"]]
        p.add_argument(*names, **kw)
    return p


def defaults(table):
    return {o["dest"]: o.get("default") for o in table["options"].values() if o.get("dest")}


# ---- the host ------------------------------------------------------------------------------------------

def split_hostport(text, flag):
    host, _, port = (text or "").rpartition(":")
    if not host or not port.isdigit():
        fail("ValueError: %s %r is not HOST:PORT" % (flag, text))
    return host, int(port)


# ---- the rendezvous (standin_common) and the MemFabric store --------------------------------------------

def node_gone(who, rank):
    """After the start: a peer that goes away breaks the process group (HCCL fails at the next collective)."""
    return lambda: scheduler_died(rank, ["RuntimeError: HCCL function error: the connection to %s was closed by the "
                                         "peer (node gone), error code is 6" % who])


def rendezvous_master(lsock, me, timeout):
    nnodes = me["nnodes"]
    log("Init torch distributed begin: waiting for %d other node(s) at tcp://%s:%d (timeout %g s)."
        % (nnodes - 1, lsock.getsockname()[0], lsock.getsockname()[1], timeout), 0)
    joined, ranks = [], {0: me["who"]}
    deadline = time.time() + timeout

    def abort(reason):
        tell_all(joined, {"abort": reason})
        fail(["RuntimeError: " + reason], 0)

    while len(ranks) < nnodes:
        got = next_hello(lsock, deadline)
        if got is None:
            missing = [r for r in range(nnodes) if r not in ranks]
            abort("The client socket has timed out after %gs while trying to connect to (%s, %d): node rank(s) %s "
                  "of %d never joined (is launch_server running there with the same --dist-init-addr?)"
                  % (timeout, lsock.getsockname()[0], lsock.getsockname()[1], ",".join(map(str, missing)), nnodes))
        conn, peer, hello = got
        who = "%s (%s)" % (hello.get("who"), peer[0])
        joined.append((conn, who))
        if hello.get("nnodes") != nnodes or hello.get("tp") != me["tp"]:
            abort("Mismatched configuration between node rank 0 and %s: --nnodes %s --tp-size %s there, --nnodes %d "
                  "--tp-size %d here" % (who, hello.get("nnodes"), hello.get("tp"), nnodes, me["tp"]))
        r = hello.get("rank")
        if not isinstance(r, int) or r in ranks or not 0 < r < nnodes:
            abort("%s says --node-rank %s, %s" % (who, r, "already taken by %s" % ranks[r] if r in ranks
                                                  else "outside 1..%d" % (nnodes - 1)))
        ranks[r] = who
        send(conn, {"ack": True})
        log("Node rank %d joined from %s (%d/%d)" % (r, who, len(ranks), nnodes), 0)
    start_group(joined, lambda who: node_gone(who, 0))
    log("Init torch distributed ends. %d node(s) in the group." % nnodes, 0)


def rendezvous_worker(addr, port, me, timeout, rank):
    deadline = time.time() + timeout
    log("Init torch distributed begin: connecting to node rank 0 at tcp://%s:%d (timeout %g s)."
        % (addr, port, timeout), rank)

    def failure(what, reason):
        fail([{"connect": "torch.distributed.DistNetworkError: The client socket has timed out after %gs while trying "
                          "to connect to (%s, %d)." % (timeout, addr, port),
               "timeout": "torch.distributed.DistStoreError: Timed out after %g seconds waiting for clients. %d/%d "
                          "clients joined." % (timeout, 1, me["nnodes"]),
               "closed": "RuntimeError: node rank 0 at tcp://%s:%d closed the connection during the rendezvous"
                         % (addr, port),
               "abort": "RuntimeError: node rank 0 at tcp://%s:%d aborted the rendezvous: %s" % (addr, port, reason)}
              [what]], rank)

    conn = join_master(addr, port, me, deadline, failure)
    watch_peer(conn, node_gone("node rank 0 at %s:%d" % (addr, port), rank))
    log("Init torch distributed ends.", rank)


def listen(host, port, what, rank=None):
    try:
        return tcp_listener(host, port)
    except OSError as e:
        fail(["OSError: [Errno %d] %s: %s on %s:%d" % (e.errno or 0, e.strerror or e, what, host, port)], rank)


def serve_store(lsock):
    """MemFabric's config store (stand-in): answers each client one line."""
    def run():
        lsock.settimeout(0.5)
        while not STOP.is_set():
            try:
                conn, _ = lsock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            try:
                send(conn, {"store": "ok"})
            except OSError:
                pass
            finally:
                conn.close()
    threading.Thread(target=run, daemon=True).start()


def connect_store(url, timeout, rank):
    m = re.fullmatch(r"tcp://([^:/]+):(\d+)", url or "")
    if not m:
        fail(["RuntimeError: [MemFabric] ASCEND_MF_STORE_URL=%r is not tcp://HOST:PORT" % url], rank)
    host, port = m.group(1), int(m.group(2))
    deadline = time.time() + timeout
    while True:
        if STOP.is_set():
            raise Fatal(0)
        try:
            with socket.create_connection((host, port), timeout=1) as c:
                if Lines(c).next(time.time() + 2).get("store") == "ok":
                    log("[MemFabric] connected to the config store %s" % url, rank)
                    return
        except (OSError, TimeoutError, ConnectionError, ValueError):
            pass
        if time.time() > deadline:
            fail(["RuntimeError: [MemFabric] connect to the config store %s failed after %g s (is the first "
                  "prefill server running?)" % (url, timeout)], rank)
        time.sleep(0.3)


# ---- the bootstrap server of a prefill server (disaggregation/common/conn.py CommonKVBootstrapServer) ---------

class Rooms:
    """The KV of each bootstrap_room a prefill server ran (filed once its prefill ends)."""

    def __init__(self):
        self.cond = threading.Condition()
        self.done = {}

    def file(self, room, info):
        with self.cond:
            now = time.time()
            for k in [k for k, v in self.done.items() if now - v["at"] > ROOM_TTL_S]:
                del self.done[k]
            self.done[room] = dict(info, at=now)
            self.cond.notify_all()

    def wait(self, room, timeout):
        deadline = time.time() + timeout
        with self.cond:
            while room not in self.done:
                left = deadline - time.time()
                if left <= 0 or STOP.is_set():
                    return None
                self.cond.wait(min(left, 0.5))
            return self.done[room]


class BootstrapHandler(JsonHandler):
    server_version = "Python/aiohttp"
    ctx = {}

    def do_GET(self):
        url = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(url.query)
        if url.path == "/health":
            body = b"OK"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            return self.wfile.write(body)
        if url.path == "/route":
            c = self.ctx
            return self._json(200, {"prefill_attn_tp_size": c["attn_tp"], "prefill_dp_size": c["dp"],
                                    "prefill_pp_size": 1, "prefill_page_size": 128,
                                    "rank_ip": c["ip"], "rank_port": c["bootstrap_port"]})
        if url.path == "/fakecluster/kv":
            try:
                room = int((q.get("room") or [""])[0])
                timeout = float((q.get("timeout") or [KV_WAIT_S])[0])
            except ValueError:
                return self._json(400, {"error": "room must be an integer"})
            got = self.ctx["rooms"].wait(room, timeout)
            if got is None:
                return self._json(404, {"error": "bootstrap_room %d: no KV filed within %g s" % (room, timeout)})
            return self._json(200, {k: v for k, v in got.items() if k != "at"})
        return self._json(404, {"error": "not found"})

    def do_PUT(self):
        if urllib.parse.urlparse(self.path).path == "/route":
            self._body()
            body = b"OK"
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            return self.wfile.write(body)
        return self._json(404, {"error": "not found"})


def fetch_kv(host, port, room, rank):
    """The decode side of a transfer: the prefill's parallel info from its bootstrap server, then the room's KV."""
    base = "http://%s:%s" % (host, port)
    try:
        with urllib.request.urlopen(base + "/route?engine_rank=-1&target_dp_group=-1", timeout=10) as r:
            json.loads(r.read() or b"{}")
        with urllib.request.urlopen("%s/fakecluster/kv?room=%d&timeout=%g" % (base, room, KV_WAIT_S),
                                    timeout=KV_WAIT_S + 10) as r:
            return json.loads(r.read()), None
    except urllib.error.HTTPError as e:
        why = "the prefill filed no KV for this room (%s)" % e.code
    except (OSError, ValueError) as e:
        why = "Failed to get prefill server info from bootstrap %s:%s: %s" % (host, port, e)
    log("Decode transfer failed for request rank=%d bootstrap_room=%d with exception KVTransferError(bootstrap_room="
        "%d): %s" % (rank, room, room, why), rank)
    return None, why


# ---- HTTP (srt/entrypoints/http_server.py) ------------------------------------------------------------------

def metrics_text(ctx):
    """GET /metrics (prometheus_client text) with --enable-metrics: the scheduler gauges (requests in flight =
    running, no queue), the tokenizer's counters and histograms from the answered requests (openai_fake.tally)."""
    timing = ctx.get("timing")
    active = timing.active if isinstance(timing, Timing) else 0
    model = prom_label(ctx["model"][0])
    sched = 'engine_type="%s",model_name="%s",pp_rank="0",tp_rank="0"' % (ctx["engine_type"], model)
    tok = 'model_name="%s"' % model
    t = dict(ctx.get("tally") or {"requests": 0, "prompt": 0, "generated": 0, "ttft_s": 0.0})
    tpot = (timing.cfg["tpot_ms"] / 1000.0) if isinstance(timing, Timing) else 0.0
    steps = max(0, t["generated"] - t["requests"])
    usage = min(1.0, active / float(ctx.get("max_batch") or 1)) if active else 0.0
    lines = []
    for name, doc, value in (("sglang:num_running_reqs", "The number of running requests.", active),
                             ("sglang:num_queue_reqs", "The number of requests in the waiting queue.", 0),
                             ("sglang:token_usage", "The token usage.", usage),
                             ("sglang:gen_throughput", "The generation throughput (token/s).", 0.0),
                             ("sglang:cache_hit_rate", "The prefix cache hit rate.", 0.0)):
        lines += ["# HELP %s %s" % (name, doc), "# TYPE %s gauge" % name, "%s{%s} %s" % (name, sched, float(value))]
    for name, doc, value in (("sglang:prompt_tokens", "Number of prefill tokens processed.", t["prompt"]),
                             ("sglang:generation_tokens", "Number of generation tokens processed.", t["generated"]),
                             ("sglang:num_requests", "Number of requests processed.", t["requests"])):
        lines += ["# HELP %s_total %s" % (name, doc), "# TYPE %s_total counter" % name,
                  "%s_total{%s} %.1f" % (name, tok, value)]
    lines += prom_histogram("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                            tok, t["requests"], t["ttft_s"])
    lines += prom_histogram("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
                            tok, steps, steps * tpot)
    return "\n".join(lines) + "\n"


def int_field(req, key):
    v = req.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


class ApiHandler(JsonHandler):
    server_version = "uvicorn"
    ctx = {}

    def _plain(self, code, body=b"", ctype="text/plain; charset=utf-8"):
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if body:
            self.wfile.write(body)

    def _not_found(self):
        return self._json(404, {"detail": "Not Found"})

    def do_GET(self):
        ctx = self.ctx
        path = self.path.split("?")[0]
        up = ctx["up"].is_set()
        rel = ctx["release"]
        if path in ("/health", "/health_generate") or (path == "/ready" and rel >= (0, 5, 20)):
            return self._plain(200 if up else 503)
        if path == "/metrics":
            if not ctx["enable_metrics"]:
                return self._not_found()
            return self._plain(200, metrics_text(ctx).encode(), "text/plain; version=0.0.4; charset=utf-8")
        if path == "/v1/models":
            return self._json(200, {"object": "list", "data": [
                {"id": n, "object": "model", "created": int(ctx["started"]), "owned_by": "sglang",
                 "root": n, "max_model_len": ctx["max_seq"]} for n in ctx["model"]]})
        if path in ("/get_server_info", "/server_info"):
            info = dict(ctx["server_args"], version=ctx["version"],
                        internal_states=[{"last_gen_throughput": 0.0, "memory_usage": {"kvcache": 10.0}}])
            return self._json(200, info)
        if path in ("/get_model_info", "/model_info"):
            cfg = ctx["model_config"]
            return self._json(200, {"model_path": ctx["root"], "tokenizer_path": ctx["root"], "is_generation": True,
                                    "preferred_sampling_params": None, "weight_version": "default",
                                    "has_image_understanding": False, "has_audio_understanding": False,
                                    "model_type": cfg.get("model_type"), "architectures": cfg.get("architectures")})
        if path == "/get_load" and rel < (0, 5, 22):
            timing = ctx["timing"]
            return self._json(200, [{"dp_rank": 0, "num_reqs": timing.active, "num_waiting_reqs": 0,
                                     "num_tokens": 0}])
        if path == "/v1/loads":
            timing = ctx["timing"]
            return self._json(200, {"timestamp": time.strftime("%Y-%m-%dT%H:%M:%S"), "version": ctx["version"],
                                    "dp_rank_count": 1, "loads": [{"dp_rank": 0, "num_running_reqs": timing.active,
                                                                   "num_waiting_reqs": 0, "num_total_tokens": 0}]})
        if path == "/flush_cache":
            return self._plain(200, b"Cache flushed.\nPlease check backend logs for more details. (When there are "
                                    b"running or waiting requests, the operation will not be performed.)\n")
        return self._not_found()

    def do_POST(self):
        ctx = self.ctx
        path = self.path.split("?")[0]
        if path == "/flush_cache":
            return self.do_GET()
        if path not in ("/v1/chat/completions", "/v1/completions"):
            return self._not_found()
        req = self._body()
        if req is None:
            return None
        if not ctx["up"].is_set():
            return self._error(503, "The server is not ready yet.", "ServiceUnavailable")
        if "max_tokens" not in req and int_field(req, "max_completion_tokens") is not None:
            req["max_tokens"] = req["max_completion_tokens"]     # the router sends max_completion_tokens
        mode = ctx["mode"]
        if mode == "null":
            return answer(self, req, path, ctx)
        room, host, port = int_field(req, "bootstrap_room"), req.get("bootstrap_host"), req.get("bootstrap_port")
        if room is None or not host or port is None:
            return self._error(400, "A %s server of a P/D split takes requests from the router: bootstrap_host, "
                                    "bootstrap_port and bootstrap_room are missing [fake SGLang: stand-in policy]"
                               % mode, "BadRequestError")
        chat = path.endswith("/chat/completions")
        if mode == "prefill":
            timing = ctx["timing"]
            n = prompt_tokens(req, chat)
            if timing.enabled:
                with timing:
                    time.sleep(timing.prefill_s(n))
            ctx["rooms"].file(room, {"room": room, "prompt_tokens": n, "pages": max(1, (n + 127) // 128),
                                     "prefill": "%s:%d" % (ctx["ip"], ctx["port"])})
            one = dict(req, max_tokens=1)
            one.pop("min_tokens", None)
            one.pop("ignore_eos", None)
            return answer(self, one, path, ctx, prefilled=True)
        got, why = fetch_kv(host, port, room, 0)
        if got is None:
            return self._json(500, {"object": "error", "message": "KVTransferError(bootstrap_room=%d): %s"
                                                                  % (room, why), "type": "InternalServerError",
                                    "param": None, "code": 500})
        return answer(self, req, path, ctx, prefilled=True)


def bind_http(host, port, handler, what):
    try:
        return http_server(host, port, handler)
    except OSError as e:
        if what == "api":
            out(uvicorn_bind_error(e, host, port))
            raise Fatal(1)
        fail(["OSError: [Errno %d] %s: the bootstrap server cannot bind %s:%d (--disaggregation-bootstrap-port)"
              % (e.errno or 0, e.strerror or e, host, port)], 0)


# ---- launch_server ------------------------------------------------------------------------------------------

def launch(argv, settings):
    faults = settings.get("engine") or {}
    table = table_for(settings)
    version = table.get("version", "0.0.0")
    release = tuple(int(x) for x in version.split(".")[:3])
    parser = build_parser(table)
    ns = vars(parser.parse_args(argv))
    dflt = defaults(table)

    def get(dest):
        v = ns.get(dest)
        return dflt.get(dest) if v is None else v

    model = get("model_path")
    if not model:
        parser.error("the following arguments are required: --model-path")
    names = [get("served_model_name") or model]
    tp, dp, nnodes, rank = int(get("tp_size") or 1), int(get("dp_size") or 1), int(get("nnodes") or 1), \
        int(get("node_rank") or 0)
    dp_attention = bool(get("enable_dp_attention")) or int(get("attn_dp_size") or 1) > 1
    mode = get("disaggregation_mode") or "null"
    host, port = get("host") or "127.0.0.1", int(get("port") or 30000)
    log("server_args=ServerArgs(model_path=%r, served_model_name=%r, tp_size=%d, dp_size=%d, nnodes=%d, node_rank=%d, "
        "dist_init_addr=%r, disaggregation_mode=%r, host=%r, port=%d, ...)"
        % (model, names[0], tp, dp, nnodes, rank, get("dist_init_addr"), mode, host, port))
    # ServerArgs checks
    if not 0 <= rank < nnodes:
        fail("AssertionError: node_rank %d must be in [0, nnodes %d)" % (rank, nnodes))
    if nnodes > 1 and not get("dist_init_addr"):
        fail("ValueError: --nnodes %d needs --dist-init-addr HOST:PORT (node rank 0's address): without it every node "
             "initialises torch.distributed on 127.0.0.1 and the other nodes never join [fake SGLang: stand-in "
             "policy]" % nnodes)
    world = tp * (dp if dp > 1 and not dp_attention else 1)
    if world % nnodes:
        fail("AssertionError: tp_size %d (x dp_size %d) is not divisible by nnodes %d" % (tp, dp, nnodes))
    local = world // nnodes
    first = rank * local
    # the model: a local folder (no hub is reachable from a fake node)
    cfg_path = os.path.join(model, "config.json")
    if not os.path.isfile(cfg_path):
        fail(NO_LOCAL_MODEL % model)
    try:
        with open(cfg_path) as f:
            model_config = json.load(f)
    except (OSError, ValueError) as e:
        fail("ValueError: %s is not a valid JSON config: %s" % (cfg_path, e))
    # devices
    visible = container_devices(settings)
    env_dev = os.environ.get("ASCEND_RT_VISIBLE_DEVICES")
    count = len(visible)
    if env_dev is not None:
        ids = [x for x in env_dev.split(",") if x.strip()]
        count = len([x for x in ids if x.strip().isdigit() and int(x) < len(visible)])
    if local > count:
        fail("RuntimeError: node rank %d runs TP ranks %d-%d (tp_size %d%s over %d node(s)) but the container has %d "
             "NPU(s) (%s): invalid device ordinal" % (rank, first, first + local - 1, tp,
                                                      " x dp_size %d" % dp if world != tp else "", nnodes, count,
                                                      " ".join("/dev/davinci%d" % d for d in visible) or "none"), 0)
    ifaces = interface_addresses()
    ip = node_ip(settings, ifaces)
    for var in ("GLOO_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME"):
        for n in [x.strip() for x in os.environ.get(var, "").split(",") if x.strip()]:
            if n not in ifaces:
                fail("RuntimeError: [enforce fail at ../third_party/gloo/gloo/transport/tcp/device.cc:83] ifa != "
                     "nullptr. Unable to find address for: %s (%s)" % (n, var), first)
    store_url = None
    if mode in ("prefill", "decode") and get("disaggregation_transfer_backend") == "ascend":
        store_url = os.environ.get("ASCEND_MF_STORE_URL")
        if not store_url:
            fail("RuntimeError: [MemFabric] ASCEND_MF_STORE_URL is not set: the ascend transfer backend needs the "
                 "config store every P and D server shares (tcp://HOST:PORT) [fake SGLang: message of the stand-in]",
                 first)
    bootstrap_port = int(get("disaggregation_bootstrap_port") or 8998)
    timing = Timing(faults.get("timing"))
    ctx = {"model": names, "root": model, "started": time.time(), "version": version, "release": release,
           "max_seq": int(get("context_length") or model_config.get("max_position_embeddings") or 8192),
           "ip": ip, "port": port, "mode": mode, "timing": timing, "up": threading.Event(),
           "enable_metrics": bool(get("enable_metrics")), "max_batch": int(get("max_running_requests") or 256),
           "engine_type": {"prefill": "prefill", "decode": "decode"}.get(mode, "unified"),
           "model_config": model_config, "rooms": Rooms(), "bootstrap_port": bootstrap_port,
           "attn_tp": tp // dp if dp_attention else tp, "dp": dp,
           "server_args": {"model_path": model, "tokenizer_path": model, "served_model_name": names[0],
                           "tp_size": tp, "dp_size": dp, "nnodes": nnodes, "node_rank": rank,
                           "enable_dp_attention": dp_attention, "disaggregation_mode": mode,
                           "disaggregation_bootstrap_port": bootstrap_port, "host": host, "port": port,
                           "context_length": get("context_length"), "enable_metrics": bool(get("enable_metrics")),
                           "max_running_requests": get("max_running_requests"), "device": get("device")},
           "too_long": "The input (%(tokens)d tokens) is longer than the model's context length (%(limit)d tokens).",
           "describe": lambda source: "This is %s answering from %s (fake SGLang %s, %s, TP%d%s)."
           % (names[0], settings.get("node") or socket.gethostname(), version,
              {"null": "mixed"}.get(mode, mode), tp, " x %d nodes" % nnodes if nnodes > 1 else "")}
    ctx["max_input"] = ctx["max_seq"]
    ApiHandler.ctx = ctx
    BootstrapHandler.ctx = ctx
    # binds: the HTTP server first, then the bootstrap server, the store, the rendezvous
    srv = bind_http(host, port, ApiHandler, "api") if rank == 0 else None
    boot = bind_http(host, bootstrap_port, BootstrapHandler, "bootstrap") if rank == 0 and mode == "prefill" else None
    timeout = float(faults.get("join_timeout") or 15)
    if store_url and rank == 0 and mode == "prefill":       # the first prefill server's master hosts the store
        m = re.fullmatch(r"tcp://([^:/]+):(\d+)", store_url)
        if m and m.group(1) == ip:
            serve_store(listen(ip, int(m.group(2)), "MemFabric config store (ASCEND_MF_STORE_URL)", first))
            log("[MemFabric] config store listening on %s" % store_url, first)
    if srv is not None:
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
    if boot is not None:
        threading.Thread(target=boot.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
        log("Bootstrap server started on %s:%d" % (host, bootstrap_port))
    slow = float(faults.get("slow_start") or 0)
    for k in range(first, first + local):
        log("Load weight begin. avail mem=60.97 GB", k)
    if slow > 0:
        sleep_or_stop(slow)
    if faults.get("crash"):
        sleep_or_stop(0.3)
        msg = faults["crash"] if isinstance(faults["crash"], str) else NPU_OOM
        scheduler_died(first, ['  File "/usr/local/lib/python3.11/dist-packages/sglang/srt/managers/scheduler.py", '
                               'in run_scheduler_process', "RuntimeError: %s" % msg])
    if nnodes > 1:
        addr, dport = split_hostport(get("dist_init_addr"), "--dist-init-addr")
        me = {"nnodes": nnodes, "tp": tp, "rank": rank,
              "who": "%s %s" % (settings.get("node") or socket.gethostname(), ip)}
        if rank == 0:
            rendezvous_master(listen(addr, dport, "--dist-init-addr (node rank 0 binds it: it must be this node's "
                                                  "address)", 0), me, timeout)
        else:
            rendezvous_worker(addr, dport, me, timeout, first)
    if store_url and rank == 0:
        connect_store(store_url, timeout, first)
    arch = (model_config.get("architectures") or ["LlamaForCausalLM"])[0]
    for k in range(first, first + local):
        log("Load weight end. type=%s, dtype=torch.bfloat16, avail mem=45.20 GB, mem usage=15.77 GB." % arch, k)
    if faults.get("never_ready"):
        wait_stop()
    for k in range(first, first + local):
        log("KV Cache is allocated. #tokens: 806120, K size: 18.45 GB, V size: 18.45 GB", k)
        log("%s avail mem=6.31 GB, mem usage=36.90 GB." % RANK_READY, k)
    if srv is None:
        wait_stop()
    log("max_total_num_tokens=806120, chunked_prefill_size=%s, max_prefill_tokens=%s, max_running_requests=%d, "
        "context_len=%d" % (get("chunked_prefill_size"), get("max_prefill_tokens"), ctx["max_batch"], ctx["max_seq"]),
        0)
    uvicorn_started(host, port)
    ctx["up"].set()
    log(SERVER_READY)
    wait_stop()


def main(argv):
    stop_on_signals()
    settings = read_settings(SETTINGS_PATH)
    try:
        launch(argv, settings)
    except Fatal as f:
        return f.code
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 2
    return 0


if __name__ == "__main__":
    exit_now(main(sys.argv[1:]))
