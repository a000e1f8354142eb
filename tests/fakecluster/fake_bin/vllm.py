#!/usr/bin/python3
"""Stand-in for vLLM-Ascend inside a fake container (tests/fakecluster). Standard library only.

The fake vLLM-Ascend image (`.../vllm-ascend:TAG`, see docker.py make_vllm_layer) runs it as:
  /usr/local/bin/vllm serve [model_tag] [options]          -> serve()
  python3 /vllm-workspace/vllm-ascend/examples/disaggregated_prefill_v1/load_balance_proxy_server_example.py
      --host H --port P --prefiller-hosts ... --prefiller-ports ... --decoder-hosts ... --decoder-ports ...
                                                            -> proxy_main()

`vllm serve`, in vLLM's order, each failure logged the way vLLM logs it, exit 1 (argv errors: exit 2):
1. argv through an argparse parser built from vLLM's own parser table (/.fakecluster/vllm-flags/vllm-<ver>.json,
   the committed deployctl/core/engines/vllm_ascend/flags tables; the version is the image tag's major.minor, the
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
   logs uvicorn's `Application startup complete.` and serves GET /health, /v1/models, /version, /metrics
   (vllm:num_requests_running / vllm:num_requests_waiting from the requests in flight, see VLLM_GAUGES), POST
   /v1/chat/completions and /v1/completions (plain and stream, openai_fake.answer). A kv_producer answers a request
   carrying kv_transfer_params.do_remote_decode with kv_transfer_params for the decode side.

The proxy follows load_balance_proxy_server_example.py of the image's tag (see the comments above ProxyState):
/healthcheck, /v1/(chat/)completions via P then D, and from v0.13 POST /instances/add|remove, with upstream's
index-based bookkeeping (v0.13/v0.14: a request on a decoder past the end of a shortened list ends without the
chunked terminator; v0.15+: bounds checks, taint while dispatching) and media types.

Faults (node state at `docker run`): engine_crash / engine_crash_on (an engine core dies at init with NPU OOM),
engine_never_ready (joins, never finishes warming up), engine_slow_start, engine_join_timeout, engine_mooncake_error
(a kv_consumer logs `Mooncake transfer failed ... 103902` for a long prompt and still answers). At run time, while
the file /.fakecluster/hang exists in the container (HANG_FLAG; a test writes it on the node, under
/var/lib/fakedocker/<container>/rootfs), an API server holds every completion unanswered while /health, /metrics and
/v1/models still answer 200: an engine that answers its health check but cannot infer; a (re)start removes the file.
engine_timing
(settings `engine.timing`): tokens come out with a prefill delay and a decode step (openai_fake.Timing); a
kv_consumer answering a request the prefiller handed over (kv_transfer_params.do_remote_prefill) skips the prefill.
Prefix caching is on unless `--no-enable-prefix-caching` (openai_fake.PrefixCache): a prompt pays the per-token
prefill only after its longest cached chain of 16-token blocks; /metrics counts vllm:prefix_cache_queries/_hits.

Outside a container (unit tests) FAKE_VLLM_SETTINGS names the settings file; its keys `dev_dir`, `ip`, `image`,
`flags_dir` stand in for /dev, the node's IP, the image and the tables.
"""

import argparse
import http.client
import json
import os
import re
import socket
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import netloader_fake  # noqa: E402
from openai_fake import (JsonHandler, PrefixCache, ThreadingHTTPServer, Timing, answer, interface_addresses,  # noqa: E402
                         prom_histogram, prompt_tokens, read_settings)
from standin_common import (NO_LOCAL_MODEL, NPU_OOM, PID, STOP, Fatal, ServeParser,  # noqa: E402
                            container_devices, exit_now, http_server, image_tag, join_master, next_hello, node_ip,
                            out, prom_label, read_table, send, sleep_or_stop, start_group, stop_on_signals,
                            tcp_listener, tell_all, uvicorn_bind_error, uvicorn_started, wait_stop, watch_peer)

SETTINGS_PATH = os.environ.get("FAKE_VLLM_SETTINGS", "/.fakecluster/settings.json")
HANG_FLAG = os.path.join(os.path.dirname(SETTINGS_PATH), "hang")     # the run-time hang fault (module doc)
LONG_PROMPT = 1000      # tokens from which a KV transfer spans enough blocks to hit the Mooncake fault
KV_ROLES = ("kv_producer", "kv_consumer", "kv_both")
# vllm-ascend's registry (vllm_ascend/distributed/__init__.py@v0.11.0, kv_transfer/__init__.py@HEAD) + vLLM's own
CONNECTORS = {"MooncakeConnectorV1", "MooncakeLayerwiseConnector", "MooncakeHybridConnector", "LLMDataDistCMgrConnector",
              "MooncakeConnector", "NixlConnector", "SharedStorageConnector", "P2pNcclConnector", "LMCacheConnectorV1",
              "MultiConnector", "OffloadingConnector", "ExampleConnector", "MooncakeConnectorStoreV1",
              "AscendStoreConnector"}


# ---- logging (vLLM's: "(APIServer pid=N) INFO 11-24 04:29:01 [file.py:L] message") ------------------------

def log(level, msg, src="api_server.py:0", proc="APIServer"):
    prefix = "(%s pid=%d) " % (proc, PID) if proc else ""
    out("%s%s %s [%s] %s" % (prefix, level, time.strftime("%m-%d %H:%M:%S"), src, msg))


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
    m = re.match(r"v?(\d+)\.(\d+)", image_tag(image))
    return (int(m.group(1)), int(m.group(2))) if m else None


def table_for(settings):
    """vLLM's parser table for the image's version: same major.minor, else the newest older one, else the oldest."""
    return read_table(settings, "vllm", "vllm_ascend", 2, tag_version(settings.get("image")),
                      "fake vLLM: no parser table (vllm-<version>.json) found")


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


# ---- the host: interfaces ----------------------------------------------------------------------------

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


# ---- the DP rendezvous (standin_common) --------------------------------------------------------------------

def engine_died(who, proc):
    """After the start: a peer of the data parallel group that goes away ends this process."""
    def gone():
        log("ERROR", "%s died unexpectedly, shutting down: the data parallel group is broken" % who,
            "core_client.py:0", proc)
        out("RuntimeError: Engine core proc %s died unexpectedly, shutting down client." % who)
        sys.stdout.flush()
        os._exit(1)
    return gone


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

    def abort(reason):
        tell_all(joined, {"abort": reason})
        fail(["RuntimeError: " + reason], proc, "utils.py:0")

    while len(owner) < dp:
        got = next_hello(lsock, deadline)
        if got is None:
            missing = [r for r in range(dp) if r not in owner]
            abort("Timed out waiting for engines to send initial message on input socket: DP rank(s) %s of %d "
                  "never connected to %s:%d within %g s (is the %s running there?)"
                  % (",".join(map(str, missing)), dp, lsock.getsockname()[0], lsock.getsockname()[1], timeout,
                     "headless node" if me["kind"] == "internal" else "vllm serve of that rank"))
        conn, peer, hello = got
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
    start_group(joined, lambda who: engine_died("EngineCore of %s" % who, proc))
    log("INFO", "All %d DP ranks joined the data parallel group." % dp, "utils.py:0", proc)


def rendezvous_worker(addr, port, me, timeout, proc):
    deadline = time.time() + timeout
    log("INFO", "Connecting to the DP master at tcp://%s:%d (timeout %g s)" % (addr, port, timeout), "core.py:0", proc)

    def failure(what, reason):
        fail([{"connect": "TimeoutError: Timed out waiting for the DP master at tcp://%s:%d: nothing accepted within "
                          "%g s (is the vllm serve without --headless running there?)" % (addr, port, timeout),
               "timeout": "TimeoutError: the DP master at tcp://%s:%d did not start the data parallel group within "
                          "%g s (some DP ranks did not join)" % (addr, port, timeout),
               "closed": "RuntimeError: the DP master at tcp://%s:%d closed the connection during the handshake"
                         % (addr, port),
               "abort": "RuntimeError: the DP master at tcp://%s:%d aborted the handshake: %s" % (addr, port, reason)}
              [what]], proc, "core.py:0")

    conn = join_master(addr, port, me, deadline, failure)
    watch_peer(conn, engine_died("the DP master at %s:%d" % (addr, port), proc))


# ---- HTTP ----------------------------------------------------------------------------------------------

# vLLM's scheduler gauges (vllm/v1/metrics/loggers.py PrometheusStatLogger: "vllm:num_requests_running" / "Number of
# requests in model execution batches.", "vllm:num_requests_waiting" / "Number of requests waiting to be processed.",
# labelnames ["model_name", "engine"]: the served model name and the index of each engine core this API server
# manages). Registered only with log stats on (vllm/v1/engine/async_llm.py: `if self.log_stats:` StatLoggerManager;
# --disable-log-stats turns them off). Exposed by prometheus_client on GET /metrics of the API port.
VLLM_GAUGES = (("vllm:num_requests_running", "Number of requests in model execution batches."),
               ("vllm:num_requests_waiting", "Number of requests waiting to be processed."))


# More of vLLM 0.13's metrics (vllm 0.13.0 wheel, vllm/v1/metrics/loggers.py), those deployctl's dashboard reads:
# vllm:kv_cache_usage_perc (gauge, L461), vllm:prompt_tokens / vllm:generation_tokens (counters, L570/L579:
# prometheus_client adds _total), vllm:time_to_first_token_seconds (L671) and vllm:inter_token_latency_seconds (L741)
# histograms. The stand-in counts answered requests (openai_fake.tally); its KV cache use is the share of
# max_batch_size in flight; its inter-token latency is one observation per generated token after the first, at the
# configured TPOT (0 when no timing is set). Its buckets are a few of vLLM's
# (openai_fake.prom_histogram).
def metrics_text(ctx):
    """GET /metrics in prometheus_client's text format (labels sorted, float values). Every request in flight on
    this API process (openai_fake.Timing.active: from the request until its last token) counts as running on the
    first engine it reports on, the requests queued behind --max-num-seqs running ones as waiting."""
    if not ctx.get("log_stats", True):
        return ""
    timing = ctx.get("timing")
    active = timing.active if isinstance(timing, Timing) else 0
    queued = timing.waiting if isinstance(timing, Timing) else 0
    lines = []
    for i, (name, doc) in enumerate(VLLM_GAUGES):
        lines += ["# HELP %s %s" % (name, doc), "# TYPE %s gauge" % name]
        for k, rank in enumerate(ctx.get("engines") or [0]):
            value = (active if i == 0 else queued) if k == 0 else 0
            lines.append('%s{engine="%d",model_name="%s"} %.1f' % (name, rank, prom_label(ctx["model"][0]), value))
    first = 'engine="%d",model_name="%s"' % ((ctx.get("engines") or [0])[0], prom_label(ctx["model"][0]))
    t = dict(ctx.get("tally") or {"requests": 0, "prompt": 0, "generated": 0, "ttft_s": 0.0})
    kv = min(1.0, active / float(ctx.get("max_batch") or 1)) if active else 0.0
    tpot = (timing.cfg["tpot_ms"] / 1000.0) if isinstance(timing, Timing) else 0.0
    steps = max(0, t["generated"] - t["requests"])
    lines += ["# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.",
              "# TYPE vllm:kv_cache_usage_perc gauge", "vllm:kv_cache_usage_perc{%s} %s" % (first, repr(kv))]
    for name, doc, value in (("vllm:prompt_tokens", "Number of prefill tokens processed.", t["prompt"]),
                             ("vllm:generation_tokens", "Number of generation tokens processed.", t["generated"])):
        lines += ["# HELP %s_total %s" % (name, doc), "# TYPE %s_total counter" % name,
                  "%s_total{%s} %.1f" % (name, first, value)]
    cache = ctx.get("prefix_cache")
    if isinstance(cache, PrefixCache):
        # vLLM's prefix cache counters (vllm/v1/metrics/loggers.py, commit unpinned, unverified line), in tokens
        for name, doc, value in (
                ("vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens.",
                 cache.queries),
                ("vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", cache.hits)):
            lines += ["# HELP %s_total %s" % (name, doc), "# TYPE %s_total counter" % name,
                      "%s_total{%s} %.1f" % (name, first, value)]
    lines += prom_histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", first,
                       t["requests"], t["ttft_s"])
    lines += prom_histogram("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", first,
                       steps, steps * tpot)
    return "\n".join(lines) + "\n"


class ApiHandler(JsonHandler):
    server_version = "uvicorn"
    ctx = {}

    def do_GET(self):
        path = self.path.split("?")[0]
        if path == "/metrics":
            body = metrics_text(self.ctx).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            return self.wfile.write(body)
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
        while os.path.exists(HANG_FLAG):        # hung: the request is held, nothing is answered
            time.sleep(0.2)
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
        return http_server(host, port, ApiHandler)
    except OSError as e:
        out("(%s pid=%d) %s" % (proc, PID, uvicorn_bind_error(e, host, port)))
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

def serve(argv, settings):
    faults = settings.get("engine") or {}
    table = table_for(settings)
    version = table.get("vllm_version", "0.0.0")
    parser = build_parser(table)
    args = parser.parse_args(flexible(argv))
    ns = vars(args)
    netloader = netloader_fake.parse(parser, ns)     # --load-format netloader (netloader_fake.py)
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
        fail(NO_LOCAL_MODEL % model, proc, "config.py:0")
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
        "mooncake_error": faults.get("mooncake_error"),
        # vLLM's scheduler runs at most --max-num-seqs requests at once (SchedulerConfig.max_num_seqs, 256 by
        # default on the API server of 0.13); the others wait in its queue (vllm:num_requests_waiting)
        "timing": Timing(faults.get("timing"), limit=ns.get("max_num_seqs") or 256),
        # vLLM V1 caches prompt prefixes unless --no-enable-prefix-caching (CacheConfig.enable_prefix_caching)
        "prefix_cache": PrefixCache() if ns.get("enable_prefix_caching") is not False else None,
        "log_stats": not ns.get("disable_log_stats"), "max_batch": ns.get("max_num_seqs") or 256,
        # the engine cores the API server reports on (AsyncLLM engine_ranks_managed): its own rank with external DP
        # (--data-parallel-rank), every DP rank when it is the front end of internal DP
        "engines": list(ranks) if external else list(range(dp)),
        "too_long": "This model's maximum context length is %(limit)d tokens. However, your request has "
                    "%(tokens)d input tokens. Please reduce the length of the input messages.",
        "describe": lambda source: "This is %s answering from %s (fake vLLM-Ascend %s, DP rank %s of %d, TP%d%s)."
        % (names[0], settings.get("node") or socket.gethostname(), version, rank_text(ranks[0], len(ranks)), dp,
           tp, ", %s" % kv.get("kv_role") if kv else "")}
    srv = None if headless else bind_api(host, port, proc)
    slow = float(faults.get("slow_start") or 0)
    if netloader is not None:     # from a running peer, else from disk; then serving them (netloader_fake.py)
        netloader_fake.run(netloader, model, tp, int_opt(parser, ns, "pipeline_parallel_size", "-pp", 1), ranks, ip,
                           tag_version(settings.get("image")) or (0, 13), faults, log, fail)
    elif slow > 0:
        log("INFO", "Loading weights from %s ..." % model, "model_runner.py:0", "EngineCore_DP%d" % ranks[0])
        sleep_or_stop(slow)
    crash_on = faults.get("crash_on") or ""
    if crash_on and "=" in crash_on and os.environ.get(crash_on.split("=", 1)[0]) == crash_on.split("=", 1)[1]:
        faults = dict(faults, crash="HBM ECC error while loading weights (%s)" % crash_on)
    if faults.get("crash"):
        sleep_or_stop(0.3)
        msg = faults["crash"] if isinstance(faults["crash"], str) else NPU_OOM
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
            try:
                lsock = tcp_listener(bind_ip, rpc_port)
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
    if os.path.exists(HANG_FLAG):          # a hang of the engine before this start is gone with it
        os.remove(HANG_FLAG)
    if faults.get("never_ready"):
        for r in ranks:
            log("INFO", "Capturing ACL graphs (warming up the model) ...", "model_runner.py:0", "EngineCore_DP%d" % r)
        wait_stop()
    for r in ranks:
        log("INFO", "init engine (profile, create kv cache, warmup model) took 1.23 seconds", "core.py:0",
            "EngineCore_DP%d" % r)
    if srv is not None:     # the socket listens already: the lines are out before the first answer
        log("INFO", "Starting vLLM API server 0 on http://%s:%d" % (host, port), "launcher.py:0", proc)
        out("(%s pid=%d) INFO:     Started server process [%d]" % (proc, PID, PID))
        out("(%s pid=%d) INFO:     Waiting for application startup." % (proc, PID))
        out("(%s pid=%d) INFO:     Application startup complete." % (proc, PID))
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
    else:
        log("INFO", "Headless engine(s) for DP rank(s) %s running; no API server in headless mode"
            % rank_text(ranks[0], len(ranks)), "serve.py:0", None)
    del kv_socks
    wait_stop()


# ---- the P/D proxy (examples/disaggregated_prefill_v1/load_balance_proxy_server_example.py) --------------
#
# Line numbers are those of the file at vllm-ascend tag v0.13.0 (`L`), unless another tag is named.
# What the stand-in keeps from the real proxy:
# * the instance lists and how an in-flight request refers to its servers: by INDEX into the current list
#   (InstanceInfo L673-681), released after the prefill (release_prefiller L652), at the first decode chunk
#   (release_prefiller_kv L722-726) and after the last one (release_decoder L801). From v0.13.0 the lists change
#   (POST /instances/add|remove, PR #5063, first tagged v0.13.0rc1; v0.12.0rc1 and v0.11.0 have no such route),
#   and until v0.15.0rc1 those releases have no bounds check: a request still streaming from a decoder whose index
#   is now past the end of the shorter list raises IndexError in release_decoder after its last chunk; uvicorn
#   then closes the connection without the chunked terminator (the client got every byte, [DONE] included, then
#   an incomplete chunked read). With a smaller index the request ends normally (another server's counter is
#   decremented). v0.15.0rc1 adds the bounds checks, and taints servers removed while requests are being
#   dispatched (request_num: from the start of _handle_completions until its StreamingResponse is returned, i.e.
#   during the prefill) until the node listener removes them (every --waiting-retry-interval s).
# * add: each instance is checked with GET /v1/models (check_instance_status L424-435, httpx timeout None: a
#   server that accepts but does not answer yet holds the call); a failing one waits in the node listener, which
#   re-checks every --waiting-retry-interval (10) s, --max-waiting-retries (3) times (L398-422).
# * the answers: FastAPI's (compact JSON; 404 {"detail":"Not Found"}; 405 {"detail":"Method Not Allowed"}; any
#   exception before the response: 500 text/plain "Internal Server Error"), the streamed response chunked with
#   media type application/json (text/event-stream; charset=utf-8 for streams from v0.16.0rc1), 200 sent before
#   the decoder is asked: a decoder that fails all --max-retries attempts gives 200 with an empty body.
# * P is asked with stream false, max_tokens 1, min_tokens 1 and do_remote_decode kv_transfer_params, up to
#   --max-retries times on a connection error or an HTTP error status (send_request_to_service L530-577): a
#   request P refuses (unknown model...) ends as 500 after the retries, as upstream.
# Not kept (stand-in policy): the selection. Upstream picks the least loaded server from a heap (active tokens,
# ties to the lowest index: L258-306), so back-to-back requests all go to the first prefiller and decoder; the
# stand-in goes round robin over the servers (skipping tainted ones), which spreads sequential requests.

PROXY_INSTANCES_API = (0, 13)     # POST /instances/add|remove (v0.13.0rc1, PR #5063)
PROXY_BOUNDS_CHECKED = (0, 15)    # release_* check the index, removal while dispatching taints (v0.15.0rc1)
PROXY_SSE_MEDIA = (0, 16)         # streams as text/event-stream; charset=utf-8 (v0.16.0rc1)
PROXY_SRC = "load_balance_proxy_server_example.py"
TAINT_PRIORITY = 1e15


class ProxyError(Exception):
    """An exception the real proxy raises while handling a request (-> 500, or a dropped connection); `frame`: the
    traceback line of the upstream function that raised it."""

    def __init__(self, msg, frame=None):
        super().__init__(msg)
        self.frame = frame


class ClientGone(Exception):
    """The client closed the connection while its answer was streamed."""


def proxy_log(level, msg, line=0):
    log(level, msg, "%s:%d" % (PROXY_SRC, line), None)


def server_key(server):
    """ServerState.__eq__/__hash__ (L175-182): localhost and 127.0.0.1 read as 0.0.0.0 (str.replace), the port as
    a string."""
    host, port = server
    return host.replace("localhost", "0.0.0.0").replace("127.0.0.1", "0.0.0.0"), str(port)


def server_str(server):
    return "%s:%s" % server                         # ServerState.__repr__ (L184-185)


def servers_repr(servers):
    return "[%s]" % ", ".join(server_str(s) for s in servers)      # a list of ServerState printed


class ProxyState:
    """The instance lists of the proxy (ProxyState L188-392), the node listener (L398-436); one lock for all."""

    def __init__(self, prefillers, decoders, version, args):
        self.version, self.args = version, args
        self.lists = {"prefill": list(prefillers), "decode": list(decoders)}
        self.tainted = {"prefill": [], "decode": []}
        self.next = {"prefill": 0, "decode": 0}
        self.waiting = {}                      # node -> (type, server, check_times)
        self.request_num = 0
        self.lock = threading.RLock()
        threading.Thread(target=self._listener, daemon=True).start()

    def _has(self, kind, server, among=None):
        key = server_key(server)
        return any(server_key(s) == key for s in (self.lists[kind] if among is None else among))

    def pick(self, kind):
        """(index, server) for a new request; round robin over the servers that are not tainted (stand-in policy,
        see above); none: select_prefiller/select_decoder's RuntimeError (L260-261, L289-290)."""
        with self.lock:
            lst = self.lists[kind]
            if not lst:
                raise ProxyError("RuntimeError: No %s servers available" % ("prefiller" if kind == "prefill"
                                                                             else "decoder"))
            order = [(self.next[kind] + k) % len(lst) for k in range(len(lst))]
            idx = next((i for i in order if not self._has(kind, lst[i], self.tainted[kind])), order[0])
            self.next[kind] = (idx + 1) % len(lst)
            return idx, lst[idx]

    def release(self, kind, idx, func, line):
        """release_prefiller / release_prefiller_kv / release_decoder / abort_prefiller_request by index: before
        v0.15 an index past the end of the (shrunk) list raises IndexError (L276, L282, L304, L241)."""
        with self.lock:
            if self.version < PROXY_BOUNDS_CHECKED and idx >= len(self.lists[kind]):
                raise ProxyError("IndexError: list index out of range",
                                 '  File "%s", line %d, in %s' % (PROXY_SRC, line, func))

    def add(self, kind, server):
        """add_prefillers / add_decoders (L335-351; from v0.15 a tainted server is only untainted)."""
        with self.lock:
            if self._has(kind, server, self.tainted[kind]):
                self.tainted[kind] = [s for s in self.tainted[kind] if server_key(s) != server_key(server)]
            elif not self._has(kind, server):
                self.lists[kind].append(server)
            self.print_status("Add %s instances: %s." % ("prefiller" if kind == "prefill" else "decoder",
                                                         servers_repr([server])))

    def remove(self, kind, servers):
        """remove_prefillers / remove_decoders (L353-385); from v0.15: nothing to do for [], a taint while
        requests are being dispatched (True: "waiting to be removed")."""
        with self.lock:
            if self.version >= PROXY_BOUNDS_CHECKED:
                if not servers:
                    return False
                if self.request_num > 0:
                    proxy_log("WARNING", "Start to taint %s instances %s." % (kind, servers_repr(servers)), 0)
                    for s in servers:
                        if self._has(kind, s) and not self._has(kind, s, self.tainted[kind]):
                            self.tainted[kind].append(next(x for x in self.lists[kind]
                                                           if server_key(x) == server_key(s)))
                    return True
            keys = {server_key(s) for s in servers}
            self.lists[kind] = [s for s in self.lists[kind] if server_key(s) not in keys]
            self.next[kind] = self.next[kind] % max(1, len(self.lists[kind]))
            self.print_status("Remove %s instances: %s." % ("prefiller" if kind == "prefill" else "decoder",
                                                            servers_repr(servers)))
            return False

    def print_status(self, msg):
        out("%s Status: {'prefill_instances': %r, 'decode_instances': %r}" % (
            msg, [server_str(s) for s in self.lists["prefill"]], [server_str(s) for s in self.lists["decode"]]))

    def current(self):
        with self.lock:
            return {"current_prefill_instances": [server_str(s) for s in self.lists["prefill"]],
                    "current_decode_instances": [server_str(s) for s in self.lists["decode"]]}

    @staticmethod
    def check(server):
        """check_instance_status (L424-435): GET http://host:port/v1/models answers 2xx (no timeout)."""
        try:
            with urllib.request.urlopen(urllib.request.Request(
                    "http://%s:%s/v1/models" % server,
                    headers={"Authorization": "Bearer %s" % os.environ.get("OPENAI_API_KEY")})) as r:
                r.read()
                return 200 <= r.status < 300
        except (OSError, ValueError, http.client.HTTPException):
            return False

    def _listener(self):
        while True:
            for node, (kind, server, times) in list(self.waiting.items()):
                ok = self.check(server)
                out("Checking instance %s..." % node)
                times += 1
                if ok:
                    self.add(kind, server)
                    self.waiting.pop(node, None)
                elif times == self.args.max_waiting_retries:
                    out("Instance %s was not added to the proxy." % node)
                    self.waiting.pop(node, None)
                else:
                    self.waiting[node] = (kind, server, times)
            with self.lock:
                for kind in ("prefill", "decode"):
                    if self.tainted[kind] and not self.request_num:
                        if not self.remove(kind, list(self.tainted[kind])):
                            self.tainted[kind] = []
            time.sleep(self.args.waiting_retry_interval)


INTERNAL_ERROR = b"Internal Server Error"


class ProxyHandler(JsonHandler):
    server_version = "uvicorn"
    protocol_version = "HTTP/1.1"         # uvicorn: keep-alive, the streamed answer chunked
    state = None

    # -- FastAPI's answers --
    def _fjson(self, code, obj):
        body = json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()
        self.send_response(code)
        self.send_header("content-length", str(len(body)))
        self.send_header("content-type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def _internal_error(self, lines):
        """An exception out of the route before the response started: uvicorn logs it, Starlette answers 500."""
        out("ERROR:    Exception in ASGI application")
        out("Traceback (most recent call last):")
        for line in lines:
            out(line)
        self.send_response(500)
        self.send_header("content-length", str(len(INTERNAL_ERROR)))
        self.send_header("content-type", "text/plain; charset=utf-8")
        self.end_headers()
        self.wfile.write(INTERNAL_ERROR)

    def _routes(self):
        routes = {"/v1/completions": "POST", "/v1/chat/completions": "POST", "/healthcheck": "GET"}
        if self.state.version >= PROXY_INSTANCES_API:
            routes.update({"/instances/add": "POST", "/instances/remove": "POST"})
        return routes

    def _route(self, method):
        path = self.path.split("?")[0]
        want = self._routes().get(path)
        if want is None or want != method:           # keep-alive: the body of a refused request is read
            n = int(self.headers.get("Content-Length") or 0)
            if n:
                self.rfile.read(n)
        if want is None:
            self._fjson(404, {"detail": "Not Found"})
            return None
        if want != method:
            self._fjson(405, {"detail": "Method Not Allowed"})
            return None
        return path

    def _read_json(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        try:
            return json.loads(raw), raw
        except ValueError as e:
            raise ProxyError("json.decoder.JSONDecodeError: %s" % e)

    def do_GET(self):
        if self._route("GET") is None:
            return None
        with self.state.lock:
            doc = {"status": "ok", "prefill_instances": len(self.state.lists["prefill"]),
                   "decode_instances": len(self.state.lists["decode"])}
        return self._fjson(200, doc)

    def do_other(self):
        self._route(self.command)                 # 404, or 405 on a known path

    do_PUT = do_DELETE = do_PATCH = do_other

    def do_POST(self):
        path = self._route("POST")
        if path is None:
            return None
        if path.startswith("/instances/"):
            return self._adjust(path.rsplit("/", 1)[1])
        return self._completions(path)

    # -- POST /instances/add|remove (_handle_adjust_instances L816-858) --
    def _adjust(self, mode):
        st = self.state
        try:
            req, _ = self._read_json()
            if not isinstance(req, dict):
                raise ProxyError("AttributeError: '%s' object has no attribute 'get'" % type(req).__name__)
            kind = req.get("type", "")
            instances = req.get("instances", [])
            if isinstance(instances, str):
                instances = [instances]
            if not isinstance(instances, list):
                raise ProxyError("TypeError: '%s' object is not iterable" % type(instances).__name__)
            servers = []
            for inst in instances:                    # trans_instances L853-858
                parts = inst.split(":") if isinstance(inst, str) else None
                if parts is None or len(parts) != 2:
                    raise ProxyError("ValueError: not enough values to unpack (expected 2, got 1)"
                                     if parts is not None and len(parts) < 2 else
                                     "ValueError: too many values to unpack (expected 2)" if parts is not None
                                     else "AttributeError: '%s' object has no attribute 'split'" % type(inst).__name__)
                try:
                    servers.append((parts[0], int(parts[1])))
                except ValueError:
                    raise ProxyError("ValueError: invalid literal for int() with base 10: %r" % parts[1])
        except ProxyError as e:
            proxy_log("ERROR", "Failed to %s instances: %s" % (mode, str(e).split(": ", 1)[-1]), 849)
            return self._internal_error(['  File "%s", line 818, in _handle_adjust_instances' % PROXY_SRC, str(e)])
        msg = "%s %s instances: %r." % (mode, kind, [server_str(s) for s in servers])
        if kind not in ("prefill", "decode"):
            return self._fjson(200, {"error": "Instance type %s is not supported. Only support 'prefill' and "
                                              "'decode'." % kind})
        if mode == "add":
            added, waiting = [], []
            for s in servers:                          # add_instances L317-333
                if st.check(s):
                    st.add(kind, s)
                    added.append(server_str(s))
                else:
                    st.waiting[server_str(s)] = (kind, s, 0)
                    waiting.append(server_str(s))
            if waiting:
                msg = "%s %s instances: %r. Instances %r are waiting to be added." % (mode, kind, added, waiting)
        elif st.remove(kind, servers):
            msg = "Instances %s are isolated and waiting to be removed." % servers_repr(servers)
        return self._fjson(200, dict({"message": msg}, **st.current()))

    # -- POST /v1/completions, /v1/chat/completions (_handle_completions L684-813) --
    def _completions(self, path):
        st = self.state
        api = path[len("/v1"):]
        counted = st.version >= PROXY_BOUNDS_CHECKED
        if counted:
            with st.lock:
                st.request_num += 1
        try:
            try:
                req, raw = self._read_json()
                if not isinstance(req, dict):
                    raise ProxyError("AttributeError: '%s' object has no attribute 'get'" % type(req).__name__)
                p_idx, p = st.pick("prefill")
                rid = str(uuid.uuid4())                                   # next_req_id L254-256
                got = self._prefill(p, api, req, rid)
                st.release("prefill", p_idx, "release_prefiller", 276)     # the prefiller left meanwhile
                dreq = dict(req)
                if isinstance(got, dict) and got.get("kv_transfer_params"):
                    dreq["kv_transfer_params"] = got["kv_transfer_params"]
                d_idx, d = st.pick("decode")
            except ProxyError as e:
                out("Error occurred in disagg prefill proxy server - %s endpoint" % api)
                out(str(e).split(": ", 1)[-1])
                return self._internal_error(['  File "%s", line 689, in _handle_completions' % PROXY_SRC]
                                            + ([e.frame] if e.frame else []) + [str(e)])
        finally:
            if counted:
                with st.lock:
                    st.request_num -= 1
        stream = bool(req.get("stream", False))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8" if stream and
                         st.version >= PROXY_SSE_MEDIA else "application/json")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        try:
            self._decode(d, api, dreq, rid, p_idx)
            st.release("decode", d_idx, "release_decoder", 304)        # the list got shorter than d_idx
        except ProxyError as e:
            # the body iterator raised after the response started: uvicorn logs it and closes the connection
            # without the terminating chunk
            out("ERROR:    Exception in ASGI application")
            out("Traceback (most recent call last):")
            out('  File "%s", line 801, in generate_stream' % PROXY_SRC)
            if e.frame:
                out(e.frame)
            out(str(e))
            self.close_connection = True
            return None
        except ClientGone:
            self.close_connection = True
            return None
        try:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True
        return None

    def _post(self, server, api, body, rid):
        return urllib.request.urlopen(urllib.request.Request(
            "http://%s:%s/v1%s" % (server[0], server[1], api), data=json.dumps(body).encode(), method="POST",
            headers={"Content-Type": "application/json", "X-Request-Id": rid,
                     "Authorization": "Bearer %s" % os.environ.get("OPENAI_API_KEY")}))

    def _prefill(self, p, api, req, rid):
        """send_request_to_service (L530-577): the P request, retried on any failure, then raised."""
        args = self.state.args
        pre = dict(req, stream=False, max_tokens=1, min_tokens=1, kv_transfer_params={
            "do_remote_decode": True, "do_remote_prefill": False, "remote_engine_id": None,
            "remote_block_ids": None, "remote_host": None, "remote_port": None, "aborted_request": []})
        if "max_completion_tokens" in pre:
            pre["max_completion_tokens"] = 1
        pre.pop("stream_options", None)
        for attempt in range(1, args.max_retries + 1):
            try:
                with self._post(p, api, pre, rid) as r:
                    data = r.read()
                try:
                    return json.loads(data)
                except ValueError as e:
                    raise ProxyError("json.decoder.JSONDecodeError: %s" % e)
            except (OSError, http.client.HTTPException) as e:
                what = ("Client error '%d %s' for url 'http://%s:%s/v1%s'" % (e.code, e.reason, p[0], p[1], api)
                        if isinstance(e, urllib.error.HTTPError) else str(getattr(e, "reason", e)))
                proxy_log("WARNING", "Attempt %d failed for %s: %s" % (attempt, api, what), 569)
                if attempt < args.max_retries:
                    time.sleep(args.retry_delay * 2 ** (attempt - 1))
                else:
                    proxy_log("ERROR", "All %d attempts failed for %s." % (args.max_retries, api), 575)
                    raise ProxyError("httpx.HTTPStatusError: %s" % what)
        raise ProxyError("RuntimeError: no attempt made (--max-retries %d)" % args.max_retries)

    def _chunk(self, data):
        if data:
            try:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()
            except OSError:
                raise ClientGone()

    def _decode(self, d, api, dreq, rid, p_idx):
        """generate_stream (L704-802) + stream_service_response_with_retry (L580-630): D's answer relayed chunk by
        chunk (one SSE event per chunk); the prefiller's KV released at the first chunk; a decoder failing every
        attempt ends the (already 200) response empty."""
        st, args = self.state, self.state.args
        released = False
        try:
            for attempt in range(1, args.max_retries + 1):
                try:
                    with self._post(d, api, dreq, rid) as resp:
                        event = b""
                        for line in resp:
                            event += line
                            if line.strip() and resp.headers.get_content_type() == "text/event-stream":
                                continue
                            if not released:
                                st.release("prefill", p_idx, "release_prefiller_kv", 282)
                                released = True
                            if event.strip():
                                self._chunk(event)
                            event = b""
                        if event.strip():
                            self._chunk(event)
                    return
                except (OSError, http.client.HTTPException) as e:
                    what = ("Client error '%d %s' for url 'http://%s:%s/v1%s'" % (e.code, e.reason, d[0], d[1], api)
                            if isinstance(e, urllib.error.HTTPError) else str(getattr(e, "reason", e)))
                    if attempt < args.max_retries:
                        proxy_log("WARNING", "Attempt %d failed for streaming %s: %s" % (attempt, api, what), 604)
                        time.sleep(args.retry_delay * 2 ** (attempt - 1))
                    else:
                        proxy_log("ERROR", "All %d attempts failed for streaming %s." % (args.max_retries, api), 609)
                        raise ProxyError(what)
        except ProxyError as e:
            # generate_stream's except (L791-798): logs, then abort_prefiller_request(idx) and release_prefiller_kv
            # (idx): with a stale prefiller index (also what failed in release_prefiller_kv) the IndexError escapes
            proxy_log("ERROR", "Error during streaming from decoder http://%s:%s/v1: %s the aborted request %s will "
                      "be routing to the target prefiller when new request is ready to dispatch to it"
                      % (d[0], d[1], str(e).split(": ", 1)[-1] if e.frame else e, rid), 792)
            st.release("prefill", p_idx, "abort_prefiller_request", 241)


def proxy_main(argv):
    stop_on_signals()
    version = tag_version(read_settings(SETTINGS_PATH).get("image")) or (0, 13)
    p = argparse.ArgumentParser(prog="load_balance_proxy_server_example.py")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--host", type=str, default="localhost")
    p.add_argument("--prefiller-hosts", "--prefiller-host", type=str, nargs="+", default=["localhost"])
    p.add_argument("--prefiller-ports", "--prefiller-port", type=int, nargs="+", default=[8100])
    p.add_argument("--decoder-hosts", "--decoder-host", type=str, nargs="+", default=["localhost"])
    p.add_argument("--decoder-ports", "--decoder-port", type=int, nargs="+", default=[8200])
    p.add_argument("--max-retries", type=int, default=3)
    p.add_argument("--retry-delay", type=float, default=0.001)
    if version >= PROXY_INSTANCES_API:           # parse_args L464-472
        p.add_argument("--max-waiting-retries", type=int, default=3)
        p.add_argument("--waiting-retry-interval", type=float, default=10)
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
    if version < PROXY_INSTANCES_API:
        args.max_waiting_retries, args.waiting_retry_interval = 3, 10.0
    ProxyHandler.state = ProxyState(zip(args.prefiller_hosts, args.prefiller_ports),
                                    zip(args.decoder_hosts, args.decoder_ports), version, args)
    out("Initialized %d prefill clients and %d decode clients." % (len(args.prefiller_hosts), len(args.decoder_hosts)))
    try:
        srv = ThreadingHTTPServer((args.host, args.port), ProxyHandler)
    except OSError as e:
        out(uvicorn_bind_error(e, args.host, args.port))
        return 1
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True).start()
    uvicorn_started(args.host, args.port)
    while not STOP.wait(1):
        pass
    out("INFO:     Shutting down")
    return 0


# ---- main ----------------------------------------------------------------------------------------------

USAGE = "usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...\n"


def main(argv):
    stop_on_signals()
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
    exit_now(main(sys.argv[1:]))
