"""Day-two surfaces are untrusted input (issue 34): what leaves the watch as an event is cleaned and bounded, a
host that flaps is rate-limited, and an engine's or router's numbers are parsed into bounded counts, so that
neither the recovery thread nor a rolling `up` dies on one. Without hosts (the simulated-cluster proofs are
test_watch_hostile_e2e.py).

Observations of the review, and the tests here that cover them:
* 1 (the inventory runs a program on the controller): test_the_watcher_never_runs_the_inventorys_hook_command,
  test_the_operator_enables_a_hook_command_the_inventory_cannot (on the simulated cluster:
  test_watch_hostile_e2e.py)
* 7 (escapes reach alerting): test_host_text_reaches_the_record_the_webhook_and_the_hook_clean
* 8 (an overflow crashes recovery): test_gauges_of_1e308_are_no_count_and_never_an_exception,
  test_recovery_through_a_proxy_whose_metrics_say_1e308_goes_on_and_says_why,
  test_a_rolling_up_through_a_proxy_whose_metrics_say_1e308_stops_with_a_finding
* flapping (300 MB/day of events): test_a_host_flapping_every_device_each_round_is_rate_limited,
  test_the_limit_window_ends_with_one_summary
"""

from __future__ import annotations

import http.server
import json
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_watch_units import pd_plan, plan_of

from deployctl.core.engines.vllm_ascend.control import NOT_IDLE, ProxyControl, requests_in_flight
from deployctl.features.watch import recover as recover_mod
from deployctl.features.watch.hooks import Hooks
from deployctl.features.watch.loop import Watcher
from deployctl.features.watch.observe import NodeObs
from deployctl.features.watch.recover import Recoverer
from deployctl.features.watch.tracker import event

# what a host can print: an OSC window title, a screen clear, an OSC 8 hyperlink, a bidi override, C1 controls
HOSTILE = ("\x1b]0;pwned\x07\x1b[2J\x1b]8;;http://evil.example/\x1b\\click here\x1b]8;;\x1b\\ Error response from "
           "daemon: \u202eevil\u202c \x9b31m\x07 cannot restart container\r\nsecond line")
BAD = ("\x1b", "\x07", "\x9b", "\u202e", "\u202c", "\r", "\n")


def _clean(doc) -> bool:
    """No escape, control or bidi character in any string of ``doc`` (as read back from JSON)."""
    return not any(c in s for s in _strings(doc) for c in BAD)


def _strings(doc):
    if isinstance(doc, str):
        yield doc
    elif isinstance(doc, dict):
        for k, v in doc.items():
            yield k
            yield from _strings(v)
    elif isinstance(doc, list):
        for v in doc:
            yield from _strings(v)


class Webhook:
    """A webhook on 127.0.0.1 that keeps every body it is sent."""

    def __init__(self):
        self.bodies: list[dict] = []
        got = self.bodies

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(200)
                self.end_headers()

            def log_message(self, *a):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


def watcher(tmp_path: Path, webhook: str, **kw) -> tuple[Watcher, list[dict]]:
    inv, plan = plan_of(hooks={"webhook": webhook})
    printed: list[dict] = []
    w = Watcher(plan, inv, [], None, tmp_path / "runs", recover=False, on_event=printed.append, **kw)
    return w, printed


def recorded(w: Watcher) -> list[dict]:
    return [json.loads(x) for x in (w.record.path / "events.jsonl").read_text().splitlines()]


# ------------------------------------------------------------------------------------------ observation 1

def test_the_watcher_never_runs_the_inventorys_hook_command(tmp_path, monkeypatch):
    """The library too: a Watcher runs the command its caller gives (the operator's), never the inventory's."""
    monkeypatch.setenv("DEPLOYCTL_ALLOW_HOOK_COMMAND", "1")      # the CLI's opt-in: the Watcher does not read it
    marker = tmp_path / "inventory-ran-this"
    inv, plan = plan_of(hooks={"command": ["sh", "-c", f"touch {marker}"]})
    w = Watcher(plan, inv, [], None, tmp_path / "runs", recover=False)
    w._emit(event("fault", plan.instances[0].name, plan.nodes[0].name, "NPU 3 health Alarm", 3, kind="npu"))
    w.close()
    assert [e["event"] for e in recorded(w)] == ["fault"]
    assert not marker.exists()


def test_the_operator_enables_a_hook_command_the_inventory_cannot(monkeypatch):
    from deployctl.core.errors import UsageError
    from deployctl.features.watch.hooks import ALLOW_COMMAND_ENV, command_allowed, hook_command

    monkeypatch.delenv(ALLOW_COMMAND_ENV, raising=False)
    inv = ["sh", "-c", "id > /tmp/x"]
    argv, warning = hook_command(inv, None, command_allowed(False), "inv.yaml:41: deploy.recovery.hooks.command")
    assert argv is None and warning.startswith("inv.yaml:41: deploy.recovery.hooks.command (sh -c 'id > /tmp/x')")
    assert "--allow-hook-command" in warning and f"{ALLOW_COMMAND_ENV}=1" in warning and "--hook-command" in warning
    assert hook_command(inv, None, command_allowed(True)) == (inv, "")
    monkeypatch.setenv(ALLOW_COMMAND_ENV, "1")
    assert hook_command(inv, None, command_allowed(False)) == (inv, "")
    argv, warning = hook_command(inv, "/usr/local/bin/page-oncall --team 'llm ops'", False)
    assert argv == ["/usr/local/bin/page-oncall", "--team", "llm ops"] and "--hook-command replaces it" in warning
    assert hook_command(None, None, False) == (None, "")
    for bad in ("'unterminated", "   "):
        with pytest.raises(UsageError):
            hook_command(None, bad, False)


# ------------------------------------------------------------------------------------------ observation 7

def test_host_text_reaches_the_record_the_webhook_and_the_hook_clean(tmp_path):
    hook_out = tmp_path / "stdin.jsonl"
    hook = [sys.executable, "-c", "import sys; open(sys.argv[1], 'a').write(sys.stdin.read() + chr(10))",
            str(hook_out)]
    web = Webhook()
    try:
        w, printed = watcher(tmp_path, web.url)
        w.hooks.close()             # the operator's hook command, beside the inventory's webhook
        w.hooks = Hooks(web.url, hook, lambda msg: w._emit(event("hook-error", cause=msg), hooks=False))
        # what recovery quotes from hosts: a `docker restart` error, a router's answer, a list of causes
        w._emit(event("restart-failed", "mixed-1", cause=f"node3 (rc 1: {HOSTILE})"))
        w._emit(event("recovery-error", "mixed-1", cause=f"the P/D proxy answered 500: {HOSTILE}" * 200,
                      causes=[HOSTILE] * 500))
        w.close()
    finally:
        web.close()
    rec = recorded(w)
    stdin = [json.loads(x) for x in hook_out.read_text().splitlines() if x.strip()]
    for where, docs in (("events.jsonl", rec), ("--output json", printed), ("webhook", web.bodies),
                        ("hook stdin", stdin)):
        assert [d["event"] for d in docs] == ["restart-failed", "recovery-error"], (where, docs)
        assert all(_clean(d) for d in docs), (where, docs[0]["cause"][:300])
        assert "Error response from daemon" in docs[0]["cause"] and "cannot restart container" in docs[0]["cause"]
        assert all(len(json.dumps(d)) <= 16 * 1024 for d in docs), where           # bounded (events.MAX_EVENT)
    assert (tmp_path / "runs").exists()


def test_clean_event_keeps_numbers_finite_and_text_one_line():
    from deployctl.features.watch.events import clean_event

    doc = clean_event({"ts": 1.5, "event": "x", "cause": "a\nb\tc", "recover_s": float("inf"), "attempt": 10 ** 40,
                       "nodes": ["n1", "\x1b[31mn2"], "more": {"k\x1b]0;t\x07": "v"}})
    assert doc["cause"] == "a b c" and doc["recover_s"] is None and doc["attempt"] is None
    assert doc["nodes"] == ["n1", "n2"] and doc["more"] == {"k": "v"} and doc["ts"] == 1.5


# ------------------------------------------------------------------------------------------ flapping

def _flapping(plan, node: str):
    """Every round: every device of ``node`` in Alarm, then all OK again; every other node healthy."""
    rounds = [0]

    def observe(nodes=None):
        rounds[0] += 1
        sick = rounds[0] % 2 == 1
        return {n.name: NodeObs(n.name, containers={"e": "running"}, ready=True,
                                npu={d: "Alarm" if sick and n.name == node else "OK" for d in n.device_ids})
                for n in plan.nodes}
    return observe


def test_a_host_flapping_every_device_each_round_is_rate_limited(tmp_path):
    web = Webhook()
    try:
        w, printed = watcher(tmp_path, web.url)
        node = w.plan.nodes[0].name
        w.observe = _flapping(w.plan, node)
        made = sum(len(w.step()) for _ in range(200))        # 200 rounds: ~8 minutes at the default interval
        w.close()
    finally:
        web.close()
    rec = recorded(w)
    # 8 devices x (fault + cleared) + instance-failed/-serving every two rounds: ~1,800 events made, a few kept
    assert made > 1500 and len(rec) < 40, (made, len(rec))
    from deployctl.features.watch.events import LIMIT

    kept = [e for e in rec if e["event"] != "suppressed"]
    summaries = [e for e in rec if e["event"] == "suppressed"]
    # each (node, instance, event, kind) at most LIMIT times, then one summary with the count
    assert len(kept) <= 4 * LIMIT and len(summaries) <= 4, [e["event"] for e in rec]
    assert len(kept) + sum(e["count"] for e in summaries) == made
    assert {e["of"] for e in summaries} >= {"fault", "cleared"} and all(e["node"] in (node, "") for e in summaries)
    assert "not recorded or sent" in summaries[0]["cause"]
    assert printed == rec and len(web.bodies) == len(rec)       # printed and sent: the same, limited, events


def test_the_limit_window_ends_with_one_summary():
    from deployctl.features.watch.events import Limiter

    now = [0.0]
    lim = Limiter(limit=2, window=60, clock=lambda: now[0])
    ev = {"event": "fault", "node": "n1", "instance": "i", "kind": "npu"}
    assert [len(lim.admit(dict(ev, cause=str(k)))) for k in range(5)] == [1, 1, 0, 0, 0]
    assert lim.admit(dict(ev, node="n2")) == [dict(ev, node="n2")]      # another node: its own budget
    now[0] = 30
    assert lim.due() == []                                              # the window is not over
    now[0] = 61
    out = lim.due()                                                     # over: one summary, of n1's window
    assert [(e["event"], e["node"], e["count"], e["of"], e["kind"]) for e in out] == [
        ("suppressed", "n1", 3, "fault", "npu")]
    assert lim.admit(ev) == [ev]                                        # a new window
    lim.admit(ev), lim.admit(ev), lim.admit(ev)
    now[0] = 130
    out = lim.admit(ev)                       # the window ended: its summary first, then the event
    assert [e["event"] for e in out] == ["suppressed", "fault"] and out[0]["count"] == 2
    assert lim.due(final=True) == []          # nothing suppressed in the new window


# ------------------------------------------------------------------------------------------ observation 8

OVERFLOW = "vllm:num_requests_running 1e308\nvllm:num_requests_waiting 1e308\n"


@pytest.mark.parametrize("metrics, want", [
    (OVERFLOW, None),
    ("vllm:num_requests_running 1.7976931348623157e308\n" * 3, None),
    ("vllm:num_requests_running 2.5\n", None),                          # no count of requests
    ("vllm:num_requests_running 1073741824\n", None),                   # 2**30: beyond any engine
    ("vllm:num_requests_running{engine=\"0\"} 3.0\nvllm:num_requests_waiting{engine=\"1\"} 4\n", 7),
])
def test_gauges_of_1e308_are_no_count_and_never_an_exception(metrics, want):
    assert requests_in_flight(metrics) == (NOT_IDLE if want is None else want)
    from deployctl.core.engines.vllm_ascend.control import read_gauges

    n, why = read_gauges(metrics)                     # the count, or why there is none (for the finding)
    assert n == want and (why == "") == (want is not None)


class ProxyRemote:
    """The P/D proxy and the engines' /metrics as a host answers them: every gauge 1e308."""

    def __init__(self, proxy: ProxyControl):
        self.proxy, self.calls = proxy, []

    def http(self, node, method, url, body=None):
        self.calls.append(url)
        if url.endswith("/metrics"):
            return 200, OVERFLOW
        listed = [] if url.endswith("/remove") else [ep for eps in self.proxy.endpoints.values() for ep in eps]
        return 200, json.dumps({"message": "ok", "current_prefill_instances": listed,
                                "current_decode_instances": listed})


def test_recovery_through_a_proxy_whose_metrics_say_1e308_goes_on_and_says_why(monkeypatch):
    monkeypatch.setattr(recover_mod, "DRAIN_TIMEOUT", 1.0)
    inv, plan = pd_plan(2)
    ctl = ProxyControl(plan, None)
    ctl.remote = ProxyRemote(ctl)
    events, restarts = [], []

    def observe(nodes):
        return {n: NodeObs(n, containers={"e": "running"}, started={"e": str(len(restarts))}, ready=True)
                for n in nodes}

    rec = Recoverer(plan, inv.deploy.recovery, ctl, observe, lambda nodes, kill: restarts.append(nodes) or [],
                    events.append, threading.Event(), interval=0.01)
    rec.start("prefill-1", frozenset({"npu"}))        # not dead: its requests in flight are waited for
    rec.join(20)
    assert [e["event"] for e in events] == ["drained", "restart", "back"], events
    drained = events[0]["cause"]
    assert "still in flight after 1.0 s" in drained and "/metrics" in drained and "1e308" in drained, drained
    assert rec.active == {} and not any(t.is_alive() for t in rec.threads)


def test_a_rolling_up_through_a_proxy_whose_metrics_say_1e308_stops_with_a_finding():
    from deployctl.backends.hosts.rolling import BatchSteps, Rollout, roll
    from deployctl.backends.hosts.runstate import HostsRun

    inv, plan = pd_plan(2)
    ctl = ProxyControl(plan, None)
    ctl.remote = ProxyRemote(ctl)
    steps = []
    never = BatchSteps(restart=lambda *a, **k: pytest.fail("nothing may restart while requests may be in flight"),
                       read_back=lambda *a, **k: pytest.fail("nothing restarted: nothing to read back"),
                       smoke=lambda *a, **k: pytest.fail("nothing restarted: nothing to smoke"))
    applied = roll(plan, Rollout(ctl, [["prefill-1"]], []), HostsRun(), never,
                   SimpleNamespace(step=steps.append, failure=steps.append), 1.0, threading.Event())
    assert not applied.ok
    assert "requests still in flight" in applied.failure and "prefill-1: cannot tell" in applied.failure
    assert "1e308" in applied.failure and "/metrics" in applied.failure, applied.failure
