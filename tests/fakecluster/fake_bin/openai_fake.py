#!/usr/bin/python3
"""OpenAI-style answers shared by the stand-in engines (tests/fakecluster): engine.py (MindIE) and vllm.py
(vLLM-Ascend). Standard library only; both engines import it from their own directory (in a fake container:
/.fakecluster/, where the fake docker copies the three files).

* `JsonHandler`: a BaseHTTPRequestHandler with `_json(code, obj)` / `_error(code, message, ...)` (OpenAI's error
  object) and no access log;
* `answer(h, req, path, ctx, source=None)`: a deterministic chat/text completion made up from the request
  (plain JSON, or SSE chunks ending `data: [DONE]`, with the usage chunk on `stream_options.include_usage`).
  `ctx`: model (the served name; a list of names is accepted), max_input, max_seq, and either `describe`
  (a callable source -> the sentence the answer starts with) or MindIE's where/mode/world/master.
* `relay_stream(h, resp)`: copy an upstream SSE response through.
* `Timing`: when tokens come out (node spec `engine_timing`, settings `engine.timing`): a prefill delay that grows
  with the prompt, then one token per decode step whose length grows with the requests in flight:

      TTFT = ttft_ms + ttft_per_token_ms x prompt_tokens
      TPOT = tpot_ms + tpot_per_request_ms x requests in flight on this engine process (this one included)

  `prompt_tokens` is what `usage.prompt_tokens` reports: one token per whitespace-separated word of the prompt
  (the messages' contents joined), plus 4 per chat message (the chat template's role tokens). The decode step is
  paced against absolute deadlines (no drift from thread scheduling). Without timing (the default) nothing waits
  but the old 2 ms between streamed chunks, so the deploy tests stay fast. A request whose prompt was prefilled
  elsewhere (the P/D split's decode side) skips the prefill delay.
  `ignore_eos: true` (vLLM's and MindIE's extension: generate until max_tokens) and `min_tokens` make the answer
  as long as asked, repeating its words.
* `PrefixCache`: vLLM's automatic prefix caching (an engine puts one in its ctx as `prefix_cache`; the vLLM
  stand-in does unless `--no-enable-prefix-caching`): the prompt's full blocks of PREFIX_BLOCK tokens are
  remembered as a chain of hashes (an LRU of PREFIX_CACHE_BLOCKS blocks); a request pays `ttft_per_token_ms` only
  for its tokens after the longest cached chain of blocks (always at least its last token):

      TTFT = ttft_ms + ttft_per_token_ms x (prompt_tokens - cached tokens)
"""

import http.server
import json
import socket
import re
import secrets
import socketserver
import threading
import time
from collections import OrderedDict


class ThreadingHTTPServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # listen(2048) as uvicorn (uvicorn/config.py Config: backlog 2048), which serves vLLM's API server and P/D proxy
    # and SGLang's HTTP server; socketserver's default of 5 overflows when clients reconnect faster than a busy
    # machine accepts, and the kernel then resets the connections (seen in CI: the scale test's clients got
    # ConnectionResetError from the stand-in proxy, which never logged an error)
    request_queue_size = 2048


def words(text):
    return re.findall(r"\S+", text or "")


class JsonHandler(http.server.BaseHTTPRequestHandler):
    sys_version = ""
    # TCP_NODELAY, as uvicorn and MindIE's server set it: a streamed chunk leaves at once instead of waiting for the
    # client's (delayed) ACK of the previous one, which would add up to 40 ms to the first token
    disable_nagle_algorithm = True

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

    def _body(self):
        """The request's JSON body, or None after answering 400."""
        try:
            n = int(self.headers.get("Content-Length") or 0)
            req = json.loads(self.rfile.read(n) or b"null")
        except ValueError:
            self._error(400, "The request body is not valid JSON.")
            return None
        if not isinstance(req, dict):
            self._error(400, "The request body must be a JSON object.")
            return None
        return req


# The MindIE-MS stand-in's marker on the request it sends to the decode instance (the KV came from the prefill
# instance; real MindIE-MS transfers it, the stand-in only says so): no prefill delay there.
PREFILLED_HEADER = "X-Fakecluster-Prefilled"
TIMING_KEYS = ("ttft_ms", "ttft_per_token_ms", "tpot_ms", "tpot_per_request_ms")
STREAM_GAP_S = 0.002      # between streamed chunks when no timing is configured (the stand-ins' old pace)


class Timing:
    """Token timing of one engine process (see the module docstring). `Timing({})` never waits."""

    def __init__(self, cfg=None, limit=None):
        cfg = cfg if isinstance(cfg, dict) else {}
        self.cfg = {k: max(0.0, float(cfg.get(k) or 0)) for k in TIMING_KEYS}
        self.enabled = any(self.cfg.values())
        self.active = 0          # requests in the running batch
        self.waiting = 0         # requests queued for a place in it (vLLM's scheduler: at most max_num_seqs run)
        self.limit = int(limit) if limit else None
        self._lock = threading.Condition()

    def __enter__(self):
        with self._lock:
            if self.limit is not None and self.active >= self.limit:
                self.waiting += 1
                while self.active >= self.limit:
                    self._lock.wait()
                self.waiting -= 1
            self.active += 1
        return self

    def __exit__(self, *exc):
        with self._lock:
            self.active -= 1
            self._lock.notify()
        return False

    def prefill_s(self, prompt_tokens):
        return (self.cfg["ttft_ms"] + self.cfg["ttft_per_token_ms"] * prompt_tokens) / 1000.0

    def step_s(self):
        """The next decode step: the base plus the per-request term for the requests in flight now."""
        if not self.enabled:
            return STREAM_GAP_S
        return (self.cfg["tpot_ms"] + self.cfg["tpot_per_request_ms"] * max(1, self.active)) / 1000.0

    def describe(self):
        c = self.cfg
        return ("TTFT %g ms + %g ms/token, TPOT %g ms + %g ms/request in flight"
                % (c["ttft_ms"], c["ttft_per_token_ms"], c["tpot_ms"], c["tpot_per_request_ms"]))


PREFIX_BLOCK = 16             # tokens per KV block (vLLM's default block_size on most platforms)
PREFIX_CACHE_BLOCKS = 4096    # blocks the stand-in remembers (its "KV cache"), least recently used out first


class PrefixCache:
    """vLLM's automatic prefix caching, in the stand-in's tokens (template markers and words, `prompt_token_list`).

    As vLLM's V1 engine does it (vllm/v1/core/kv_cache_utils.py, hash_block_tokens / hash_request_tokens; commit
    unpinned, unverified line): only full blocks are cached; a block's key is the hash of its parent block's key and
    its own tokens, so a block matches only behind the same whole prefix; a request's hit is the longest run of
    cached blocks from its start, kept below its length so the last token is always computed (KVCacheManager
    get_computed_blocks: num_tokens - 1). A request's blocks are cached once its prefill is done (`store`).
    `queries` / `hits` count tokens, as vLLM's vllm:prefix_cache_queries / vllm:prefix_cache_hits counters do."""

    def __init__(self, block=PREFIX_BLOCK, capacity=PREFIX_CACHE_BLOCKS):
        self.block, self.capacity = int(block), int(capacity)
        self.queries = self.hits = 0
        self._blocks = OrderedDict()
        self._lock = threading.Lock()

    def chain(self, tokens):
        """The keys of the full blocks of `tokens`, first block first, each covering all the blocks before it."""
        keys, parent = [], None
        for end in range(self.block, len(tokens) + 1, self.block):
            parent = hash((parent, tuple(tokens[end - self.block:end])))
            keys.append(parent)
        return keys

    def lookup(self, tokens):
        """Tokens of the prompt found cached (a multiple of the block, less than the prompt); counted."""
        usable = max(0, len(tokens) - 1) // self.block        # blocks that may hit: the last token is computed
        found = 0
        with self._lock:
            for key in self.chain(tokens)[:usable]:
                if key not in self._blocks:
                    break
                self._blocks.move_to_end(key)
                found += 1
            self.queries += len(tokens)
            self.hits += found * self.block
        return found * self.block

    def store(self, tokens):
        """Remember the prompt's full blocks (most recently used), forgetting the least recently used beyond
        the capacity."""
        with self._lock:
            for key in self.chain(tokens):
                self._blocks[key] = True
                self._blocks.move_to_end(key)
            while len(self._blocks) > self.capacity:
                self._blocks.popitem(last=False)

    def __len__(self):
        return len(self._blocks)


PROM_BUCKETS = (0.01, 0.1, 1.0, 10.0)   # a few of the engines' own buckets


def prom_histogram(name, doc, labels, count, total):
    """A histogram whose observations all sit at total / count (the stand-in keeps no distribution)."""
    each = total / count if count else 0.0
    out = ["# HELP %s %s" % (name, doc), "# TYPE %s histogram" % name]
    for le in PROM_BUCKETS:
        out.append('%s_bucket{%s,le="%s"} %.1f' % (name, labels, le, count if each <= le else 0))
    out += ['%s_bucket{%s,le="+Inf"} %.1f' % (name, labels, count), "%s_count{%s} %.1f" % (name, labels, count),
            "%s_sum{%s} %s" % (name, labels, repr(float(total)))]
    return out


TALLY_LOCK = threading.Lock()


def tally(ctx, prompt_tokens, generated, ttft_s):
    """What a metrics endpoint counts: answered requests, their tokens and the sum of their first-token times."""
    with TALLY_LOCK:
        t = ctx.setdefault("tally", {"requests": 0, "prompt": 0, "generated": 0, "ttft_s": 0.0})
        t["requests"] += 1
        t["prompt"] += prompt_tokens
        t["generated"] += generated
        t["ttft_s"] += ttft_s


def sleep_until(deadline):
    left = deadline - time.monotonic()
    if left > 0:
        time.sleep(left)


NO_TIMING = Timing()


def _timing(ctx):
    """The engine's Timing (engines put one in their ctx at start), else one that never waits."""
    t = ctx.get("timing")
    return t if isinstance(t, Timing) else NO_TIMING


def _models(ctx):
    m = ctx["model"]
    return list(m) if isinstance(m, (list, tuple)) else [m]


def prompt_of(req, chat):
    """(whole prompt text, last user message) of a request, or None when malformed."""
    if chat:
        msgs = req.get("messages")
        if not isinstance(msgs, list) or not msgs or not all(isinstance(m, dict) and "role" in m for m in msgs):
            return None
        prompt = " ".join(m.get("content") if isinstance(m.get("content"), str) else json.dumps(m.get("content"))
                          for m in msgs)
        last = next((m.get("content") for m in reversed(msgs) if m.get("role") == "user"), "")
        return prompt, last
    prompt = req.get("prompt")
    if not isinstance(prompt, str):
        return None
    return prompt, prompt


def prompt_tokens(req, chat):
    got = prompt_of(req, chat)
    if got is None:
        return 0
    return len(words(got[0])) + (4 * len(req.get("messages") or []) if chat else 0)


def prompt_token_list(req, chat):
    """The prompt as the stand-in's tokens, `prompt_tokens` of them: per chat message 4 template markers (its role)
    then its content's words; a completion's prompt: its words."""
    if prompt_of(req, chat) is None:
        return []
    if not chat:
        return words(req["prompt"])
    out = []
    for m in req["messages"]:
        c = m.get("content")
        out += ["<|%s|>" % m.get("role"), "<|t1|>", "<|t2|>", "<|t3|>"]
        out += words(c if isinstance(c, str) else json.dumps(c))
    return out


def answer(h, req, path, ctx, source=None, extra=None, prefilled=False):
    """An OpenAI-style completion, deterministic, made up from the request. `extra`: more top-level fields of
    the (non-streamed) response (vLLM's kv_transfer_params). `prefilled`: the prompt's KV came from a prefill
    instance (P/D split): no prefill delay here."""
    timing = _timing(ctx)
    with timing:
        return _answer(h, req, path, ctx, source, extra, prefilled, timing)


def _answer(h, req, path, ctx, source, extra, prefilled, timing):
    chat = path.endswith("/chat/completions")
    model = req.get("model")
    names = _models(ctx)
    if not model:
        return h._error(400, "you must provide a model parameter", param="model")
    if model not in names:
        return h._error(404, "The model `%s` does not exist." % model, err_code="model_not_found", param="model")
    got = prompt_of(req, chat)
    if got is None:
        if chat:
            return h._error(400, "'messages' must be a non-empty list of {role, content}", param="messages")
        return h._error(400, "'prompt' must be a string", param="prompt")
    prompt, last = got
    ptoks = prompt_tokens(req, chat)
    if ptoks > ctx["max_input"]:
        return h._error(400, ctx.get("too_long", "The input length %(tokens)d exceeds maxInputTokenLen %(limit)d.")
                        % {"tokens": ptoks, "limit": ctx["max_input"]}, param="messages" if chat else "prompt")
    max_tokens = req.get("max_tokens", req.get("max_completion_tokens"))
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1):
        return h._error(400, "max_tokens must be a positive integer", param="max_tokens")
    said = " ".join(words(last if isinstance(last, str) else json.dumps(last))[:24])
    if ctx.get("describe"):
        text = "%s You said: %s" % (ctx["describe"](source), said)
    else:
        text = ("This is %s answering from %s (fake MindIE %s, %d devices, instance master %s). You said: %s"
                % (names[0], source or ctx["where"], ctx["mode"], ctx["world"], ctx["master"], said))
    toks = words(text)
    limit = max_tokens if max_tokens is not None else max(1, ctx["max_seq"] - ptoks)
    finish = "stop"
    want = limit if req.get("ignore_eos") is True else req.get("min_tokens")
    if isinstance(want, int) and not isinstance(want, bool) and want > len(toks):
        base = list(toks)
        toks = [base[i % len(base)] for i in range(min(want, limit))]
    if len(toks) > limit:
        toks, finish = toks[:limit], "length"
    elif len(toks) == limit and req.get("ignore_eos") is True:
        finish = "length"
    start = time.monotonic()
    cache = ctx.get("prefix_cache") if not prefilled else None
    ptok_list = prompt_token_list(req, chat) if isinstance(cache, PrefixCache) else None
    cached = cache.lookup(ptok_list) if ptok_list is not None else 0
    if timing.enabled and not prefilled:
        sleep_until(start + timing.prefill_s(ptoks - cached))   # prefill: the first token comes out at its end
    if ptok_list is not None:
        cache.store(ptok_list)
    created = int(time.time())
    rid = ("chatcmpl-" if chat else "cmpl-") + secrets.token_hex(12)
    usage = {"prompt_tokens": ptoks, "completion_tokens": len(toks), "total_tokens": ptoks + len(toks)}
    tally(ctx, ptoks, len(toks), time.monotonic() - start)
    if not req.get("stream"):
        if timing.enabled:                                  # the other tokens, one decode step each
            deadline = time.monotonic()
            for _ in toks[1:]:
                deadline += timing.step_s()
                sleep_until(deadline)
        if chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": " ".join(toks)}, "logprobs": None,
                      "finish_reason": finish}
        else:
            choice = {"index": 0, "text": " ".join(toks), "logprobs": None, "finish_reason": finish}
        doc = {"id": rid, "object": "chat.completion" if chat else "text_completion",
               "created": created, "model": model, "choices": [choice], "usage": usage}
        doc.update(extra or {})
        return h._json(200, doc)
    h.send_response(200)
    h.send_header("Content-Type", "text/event-stream")
    h.send_header("Cache-Control", "no-cache")
    h.send_header("Connection", "close")
    h.end_headers()
    obj = "chat.completion.chunk" if chat else "text_completion"

    def chunk(delta, finish_reason=None):
        c = {"index": 0, "logprobs": None, "finish_reason": finish_reason}
        if chat:
            c["delta"] = delta
        else:
            c["text"] = delta.get("content", "")
        doc = {"id": rid, "object": obj, "created": created, "model": model, "choices": [c]}
        h.wfile.write(("data: " + json.dumps(doc) + "\n\n").encode())
        h.wfile.flush()

    try:
        if chat:
            chunk({"role": "assistant", "content": ""})
        deadline = time.monotonic()
        for i, t in enumerate(toks):
            if timing.enabled and i:
                deadline += timing.step_s()
                sleep_until(deadline)
            chunk({"content": (" " if i else "") + t})
            if not timing.enabled:
                time.sleep(STREAM_GAP_S)
        chunk({}, finish)
        if (req.get("stream_options") or {}).get("include_usage"):
            h.wfile.write(("data: " + json.dumps({"id": rid, "object": obj, "created": created, "model": model,
                                                  "choices": [], "usage": usage}) + "\n\n").encode())
        h.wfile.write(b"data: [DONE]\n\n")
        h.wfile.flush()
    except (BrokenPipeError, ConnectionResetError):
        pass
    return None


def passthrough(h, code, headers, data):
    h.send_response(code)
    h.send_header("Content-Type", headers.get("Content-Type", "application/json"))
    h.send_header("Content-Length", str(len(data)))
    h.end_headers()
    h.wfile.write(data)


def relay_stream(h, resp):
    """Copy an upstream response (an urllib response) to the client: SSE line by line, else in one piece."""
    ctype = resp.headers.get("Content-Type", "application/json")
    if not ctype.startswith("text/event-stream"):
        return passthrough(h, resp.status, resp.headers, resp.read())
    h.send_response(200)
    h.send_header("Content-Type", ctype)
    h.send_header("Cache-Control", "no-cache")
    h.send_header("Connection", "close")
    h.end_headers()
    try:
        for line in resp:
            h.wfile.write(line)
            h.wfile.flush()
    except (BrokenPipeError, ConnectionResetError):
        pass
    return None


def read_settings(path):
    """The container's fault settings (a JSON object the fake docker writes), {} when absent or unreadable."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def interface_addresses():
    """{interface name: IPv4 address or None} of this network namespace (the node's: veth `eth0` + `lo`)."""
    import fcntl
    import struct
    found = {}
    for _, name in socket.if_nameindex():
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))   # SIOCGIFADDR
            found[name] = socket.inet_ntoa(packed[20:24])
        except OSError:
            found[name] = None
        finally:
            s.close()
    return found
