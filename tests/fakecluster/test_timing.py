"""Token timing of the stand-in engines (fake_bin/openai_fake.py Timing, node spec `engine_timing`): TTFT = a + b x
prompt tokens, TPOT = c + d x requests in flight; streamed as OpenAI SSE with usage; passed through by MindIE-MS's
coordinator and vLLM's P/D proxy, whose decode side does not prefill again. Processes and servers on this machine
(127.0.0.1), no cluster; plus the spec -> node state -> settings path."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

from fakecluster import tools
from fakecluster.pacing import paced
from fakecluster.spec import NodeSpec, parse_fault
from support import free_port, free_range

FAKE_BIN = Path(__file__).resolve().parent / "fake_bin"
TIMING = {"ttft_ms": 300.0, "ttft_per_token_ms": 0.5, "tpot_ms": 20.0, "tpot_per_request_ms": 5.0}
ENV = {"PATH": "/usr/bin:/bin", "HCCL_IF_IP": "127.0.0.1", "GLOO_SOCKET_IFNAME": "lo"}


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"fake_{name}_timing", FAKE_BIN / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(FAKE_BIN))
    try:
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(FAKE_BIN))
    return module


@pytest.fixture(scope="module")
def fake():
    return load("openai_fake")


def stream(port: int, words: int, max_tokens: int, model: str = "m", sse_media: bool = True, **extra) -> dict:
    """One streamed chat completion: TTFT (first content), mean gap between content chunks, text, usage."""
    body = {"model": model, "messages": [{"role": "user", "content": " ".join(["word"] * words)}],
            "max_tokens": max_tokens, "stream": True, "ignore_eos": True, "stream_options": {"include_usage": True}}
    body.update(extra)
    req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    times, text, usage, done = [], [], None, False
    with urllib.request.urlopen(req, timeout=60) as resp:
        # vLLM's server streams text/event-stream; the P/D proxy before 0.16 sends the same SSE lines as
        # application/json (FastAPI StreamingResponse without media_type; fake_bin/vllm.py PROXY_SSE_MEDIA)
        assert resp.headers["Content-Type"].startswith("text/event-stream" if sse_media else "application/json")
        for raw in resp:
            line = raw.decode().strip()
            if line == "data: [DONE]":
                done = True
            elif line.startswith("data: "):
                doc = json.loads(line[6:])
                if doc.get("usage"):
                    usage = doc["usage"]
                for c in doc["choices"]:
                    if c.get("delta", {}).get("content"):
                        times.append(time.perf_counter() - t0)
                        text.append(c["delta"]["content"])
    gaps = [b - a for a, b in zip(times, times[1:])]
    return {"ttft_ms": times[0] * 1000, "tpot_ms": 1000 * sum(gaps) / len(gaps) if gaps else None,
            "text": "".join(text), "usage": usage, "done": done}


def serve_answer(fake, timing: dict | None, model: str = "m", prefix_cache=None):
    """openai_fake.answer behind a threaded HTTP server, as the stand-ins serve it."""
    class H(fake.JsonHandler):
        ctx = {"model": model, "max_input": 100000, "max_seq": 100000, "describe": lambda s: "The stand-in says.",
               "timing": fake.Timing(timing), "prefix_cache": prefix_cache}

        def do_POST(self):
            req = self._body()
            if req is not None:
                fake.answer(self, req, self.path, self.ctx, prefilled=self.headers.get(fake.PREFILLED_HEADER) == "1")

    srv = fake.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, srv.server_address[1]


def expected_ttft(tokens: int) -> float:
    return TIMING["ttft_ms"] + TIMING["ttft_per_token_ms"] * tokens


def expected_tpot(in_flight: int) -> float:
    return TIMING["tpot_ms"] + TIMING["tpot_per_request_ms"] * in_flight


# tokens of a stream whose decode step is checked: the stand-ins pace steps on absolute deadlines, so a loaded
# machine's late first or last token is spread over all gaps (39 gaps: 97 ms of it within 10 % of a 25 ms step)
STEPS = 40


def near(measured: float, expected: float, rel: float = 0.1) -> bool:
    return abs(measured - expected) <= rel * expected


def test_prefill_grows_with_the_prompt_and_the_step_with_the_requests_in_flight(fake):
    srv, port = serve_answer(fake, TIMING)
    try:
        for words in (100, 600):
            got = stream(port, words, STEPS)
            tokens = words + 4                                   # + 4 for the chat message
            assert got["usage"] == {"prompt_tokens": tokens, "completion_tokens": STEPS,
                                    "total_tokens": tokens + STEPS}
            assert got["done"] and len(got["text"].split()) == STEPS
            assert paced(got["ttft_ms"], expected_ttft(tokens)), got
            assert near(got["tpot_ms"], expected_tpot(1)), got
        results = []
        threads = [threading.Thread(target=lambda: results.append(stream(port, 100, 20))) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(results) == 4
        assert all(near(r["tpot_ms"], expected_tpot(4), 0.15) for r in results), [r["tpot_ms"] for r in results]
        # not streamed: the whole answer after prefill + the decode steps
        body = {"model": "m", "messages": [{"role": "user", "content": "a b c d"}], "max_tokens": 10,
                "ignore_eos": True}
        t0 = time.perf_counter()
        with urllib.request.urlopen(urllib.request.Request(
                f"http://127.0.0.1:{port}/v1/chat/completions", data=json.dumps(body).encode(),
                headers={"Content-Type": "application/json"}), timeout=30) as r:
            doc = json.loads(r.read())
        took = (time.perf_counter() - t0) * 1000
        assert doc["usage"]["completion_tokens"] == 10 and doc["choices"][0]["finish_reason"] == "length"
        assert paced(took, expected_ttft(8) + 9 * expected_tpot(1)), took
    finally:
        srv.shutdown()


def test_without_timing_nothing_waits_and_answers_stay_as_they_were(fake):
    srv, port = serve_answer(fake, None)
    try:
        got = stream(port, 2000, 64, ignore_eos=False)
        assert got["ttft_ms"] < 100
        assert got["text"] == "The stand-in says. You said: " + " ".join(["word"] * 24)   # stops at its own end
        assert got["usage"]["completion_tokens"] == len(got["text"].split())
        assert len(stream(port, 3, 40)["text"].split()) == 40                               # ignore_eos: as asked
        assert len(stream(port, 3, 40, ignore_eos=False, min_tokens=30)["text"].split()) == 30
    finally:
        srv.shutdown()


def test_a_prefilled_request_skips_the_prefill(fake):
    srv, port = serve_answer(fake, TIMING)
    try:
        body = {"model": "m", "messages": [{"role": "user", "content": "w " * 1000}], "max_tokens": 2,
                "stream": True}
        req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json", fake.PREFILLED_HEADER: "1"})
        t0 = time.perf_counter()
        with urllib.request.urlopen(req, timeout=30) as r:
            r.readline()
        assert (time.perf_counter() - t0) * 1000 < expected_ttft(1004) / 3
    finally:
        srv.shutdown()


def test_mindie_ms_coordinator_streams_the_decode_answer_through(fake):
    """P (prefill, max_tokens 1) then D (marked prefilled): TTFT through the coordinator is one prefill, the decode
    steps arrive as D sends them."""
    engine = load("engine")
    p_srv, p_port = serve_answer(fake, TIMING)
    d_srv, d_port = serve_answer(fake, TIMING)
    engine.MsHandler.ctx = {"instances": [
        {"role": engine.PREFILL, "endpoints": [{"ip": "127.0.0.1", "port": p_port}]},
        {"role": engine.DECODE, "endpoints": [{"ip": "127.0.0.1", "port": d_port}]}]}
    engine.READY.set()
    port = free_port()
    coord = engine.bind_http("127.0.0.1", port, engine.MsHandler, "coordinator predict server", "predict")
    try:
        got = stream(port, 400, STEPS)
        assert got["done"] and len(got["text"].split()) == STEPS and got["usage"]["prompt_tokens"] == 404
        assert paced(got["ttft_ms"], expected_ttft(404)), got             # one prefill, not two
        assert near(got["tpot_ms"], expected_tpot(1)), got
    finally:
        for s in (coord, p_srv, d_srv):
            s.shutdown()


def test_vllm_pd_proxy_streams_the_decode_answer_through(tmp_path):
    dev = tmp_path / "dev"
    dev.mkdir()
    for i in range(8):
        (dev / f"davinci{i}").touch()
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}\n")
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"dev_dir": str(dev), "ip": "127.0.0.1", "node": "unit",
                                    "image": "quay.io/ascend/vllm-ascend:v0.13.0",
                                    "engine": {"join_timeout": 3, "timing": TIMING}}))

    def kv(role, port):
        return json.dumps({"kv_connector": "MooncakeConnectorV1", "kv_role": role, "kv_port": str(port),
                           "engine_id": role, "kv_connector_extra_config": {
                               "prefill": {"dp_size": 1, "tp_size": 4}, "decode": {"dp_size": 1, "tp_size": 4}}})

    ports = {k: free_port() for k in ("p", "d", "proxy")}
    kv_base = free_range(8, avoid=ports.values())          # P's four handshake ports, then D's
    ports.update(pkv=kv_base, dkv=kv_base + 4)
    procs = []
    env = {**ENV, "FAKE_VLLM_SETTINGS": str(settings)}
    try:
        for side, role in (("p", "kv_producer"), ("d", "kv_consumer")):
            procs.append(subprocess.Popen(
                [sys.executable, str(FAKE_BIN / "vllm.py"), "serve", str(model), "--served-model-name", "m",
                 "--tensor-parallel-size", "4", "--kv-transfer-config", kv(role, ports[side + "kv"]),
                 "--host", "127.0.0.1", "--port", str(ports[side])], env=env, stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT, text=True))
        code = ("import sys; sys.path.insert(0, %r); import vllm; sys.exit(vllm.proxy_main(sys.argv[1:]))"
                % str(FAKE_BIN))
        procs.append(subprocess.Popen(
            [sys.executable, "-c", code, "--host", "127.0.0.1", "--port", str(ports["proxy"]), "--prefiller-hosts",
             "127.0.0.1", "--prefiller-ports", str(ports["p"]), "--decoder-hosts", "127.0.0.1", "--decoder-ports",
             str(ports["d"])], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        deadline = time.monotonic() + 60
        while True:
            try:
                got = stream(ports["proxy"], 400, 16, sse_media=False)
                break
            except OSError:
                if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                    for p in procs:
                        p.terminate()
                    pytest.fail("the stand-ins did not serve: " + "\n".join(p.communicate(timeout=15)[0]
                                                                            for p in procs))
                time.sleep(0.3)
        fresh = stream(ports["proxy"], 400, STEPS, sse_media=False,
                       messages=[{"role": "user", "content": text(400)}])
        assert fresh["done"] and len(fresh["text"].split()) == STEPS and "kv_consumer" in fresh["text"]
        assert paced(fresh["ttft_ms"], expected_ttft(404)), fresh        # prefilled once, on P
        assert near(fresh["tpot_ms"], expected_tpot(1)), fresh
        # the same prompt again: P's prefix cache (on by default) holds its 25 full blocks of 16 tokens
        again = stream(ports["proxy"], 400, 16, sse_media=False, messages=[{"role": "user", "content": text(400)}])
        assert paced(again["ttft_ms"], expected_ttft(404 - 400)), again
        with urllib.request.urlopen(f"http://127.0.0.1:{ports['p']}/metrics", timeout=10) as r:
            metrics = r.read().decode()
        hits = [ln for ln in metrics.splitlines() if ln.startswith("vllm:prefix_cache_hits_total{")]
        assert len(hits) == 1 and float(hits[0].rsplit(" ", 1)[1]) >= 400, metrics
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.communicate(timeout=15)


def text(n: int, seed: int = 7) -> str:
    """n words that differ from other seeds' from the first word on."""
    import random

    rng = random.Random(seed)
    return " ".join("w%d" % rng.randrange(10**6) for _ in range(n))


def test_prefix_cache_keeps_full_blocks_as_a_chain(fake):
    cache = fake.PrefixCache(block=16, capacity=1000)
    a = text(100).split()
    assert cache.lookup(a) == 0 and (cache.queries, cache.hits) == (100, 0)     # cold: nothing cached yet
    cache.store(a)
    assert len(cache) == 6                                       # 6 full blocks of 16; the 4-token tail is not kept
    assert cache.lookup(a) == 96                                 # the whole prompt again: its full blocks
    assert cache.lookup(a[:96]) == 80                            # 96 tokens: the last token is always computed
    assert cache.lookup(a[:40] + text(60, seed=8).split()) == 32   # shares 40 tokens: 2 whole blocks
    assert cache.lookup(a[:15]) == 0                             # less than a block
    # a block matches only behind the same prefix: the same second block after another first one is a miss
    assert cache.lookup(text(16, seed=9).split() + a[16:]) == 0
    assert (cache.queries, cache.hits) == (100 + 100 + 96 + 100 + 15 + 100, 96 + 80 + 32)


def test_prefix_cache_forgets_the_least_recently_used_blocks(fake):
    cache = fake.PrefixCache(block=4, capacity=6)
    a, b, c = (text(13, seed=s).split() for s in (1, 2, 3))   # 3 full blocks each
    cache.store(a)
    cache.store(b)
    assert cache.lookup(a) == 12                                 # a used again: b is now the oldest
    cache.store(c)
    assert len(cache) == 6 and cache.lookup(b) == 0 and cache.lookup(a) == 12 and cache.lookup(c) == 12


def test_a_cached_prefix_is_not_prefilled_again(fake):
    srv, port = serve_answer(fake, TIMING, prefix_cache=fake.PrefixCache())
    shared = text(500)
    try:
        def ask(tail_seed):
            return stream(port, 0, 4, messages=[{"role": "user", "content": shared + " " + text(100, tail_seed)}])

        first, second = ask(1), ask(2)
        assert first["usage"]["prompt_tokens"] == 604
        assert paced(first["ttft_ms"], expected_ttft(604)), first                 # cold
        # the 4 template tokens + 500 shared words = 504: 31 full blocks (496 tokens) found cached
        assert paced(second["ttft_ms"], expected_ttft(604 - 496)), second
    finally:
        srv.shutdown()
    srv, port = serve_answer(fake, TIMING)                       # no prefix cache (MindIE's, SGLang's stand-ins)
    try:
        for seed in (1, 2):
            got = stream(port, 0, 4, messages=[{"role": "user", "content": shared + " " + text(100, seed)}])
            assert paced(got["ttft_ms"], expected_ttft(604)), got
    finally:
        srv.shutdown()


def test_vllm_stand_in_without_prefix_caching(tmp_path):
    """`--no-enable-prefix-caching`: every prompt is prefilled whole, no prefix cache counters."""
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "davinci0").touch()
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}\n")
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"dev_dir": str(dev), "ip": "127.0.0.1", "node": "unit",
                                    "image": "quay.io/ascend/vllm-ascend:v0.13.0", "engine": {"timing": TIMING}}))
    port = free_port()
    proc = subprocess.Popen([sys.executable, str(FAKE_BIN / "vllm.py"), "serve", str(model), "--served-model-name",
                             "m", "--no-enable-prefix-caching", "--host", "127.0.0.1", "--port", str(port)],
                            env={**ENV, "FAKE_VLLM_SETTINGS": str(settings)}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    try:
        msgs = [{"role": "user", "content": text(400)}]
        deadline = time.monotonic() + 60
        while True:
            try:
                first = stream(port, 0, 2, messages=msgs)
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    proc.terminate()
                    pytest.fail("the stand-in did not serve: " + proc.communicate(timeout=15)[0])
                time.sleep(0.3)
        again = stream(port, 0, 2, messages=msgs)
        assert paced(first["ttft_ms"], expected_ttft(404)) and paced(again["ttft_ms"], expected_ttft(404)), again
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            metrics = r.read().decode()
        assert "vllm:prompt_tokens_total" in metrics and "prefix_cache" not in metrics
    finally:
        proc.terminate()
        proc.communicate(timeout=15)


def test_spec_timing_reaches_the_engine_settings(tmp_path):
    spec = NodeSpec(name="n1", ip="10.200.9.11", engine_timing=TIMING)
    st = tools.node_state(spec)
    assert st["engine"]["timing"] == TIMING
    assert "timing" not in tools.node_state(NodeSpec(name="n1", ip="10.200.9.11"))["engine"]   # default: unchanged
    with pytest.raises(ValueError, match="engine_timing keys"):
        NodeSpec(name="n1", ip="10.200.9.11", engine_timing={"ttft": 1})
    with pytest.raises(ValueError, match=">= 0"):
        NodeSpec(name="n1", ip="10.200.9.11", engine_timing={"ttft_ms": -1})
    assert parse_fault("node1:engine_timing=ttft_ms:50,tpot_ms:20") == (
        "node1", "engine_timing", {"ttft_ms": 50.0, "tpot_ms": 20.0})
