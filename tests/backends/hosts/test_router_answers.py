"""Router and engine answers are host output (issue 21, observation 3 / deliverable 1): HAProxy `show stat` lines
and vLLM's /metrics and proxy answers that are odd, huge or lying never crash a rolling update or `status`;
what cannot be read is "unknown" / "not idle", never "idle"."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from deployctl.core.engines.vllm_ascend.control import NOT_IDLE as VLLM_NOT_IDLE, ProxyControl, requests_in_flight
from deployctl.core.errors import ExecutionError
from deployctl.backends.hosts.router_control import NOT_IDLE, HaproxyControl, Remote, ServerStat, parse_show_stat

HEADER = "# pxname,svname,qcur,qmax,scur,smax,slim,stot,status\n"


class FakeRemote:
    """Answers what the test plants, as a host would."""

    def __init__(self, answer: str = "", http: tuple[int, str] = (200, "")):
        self.answer, self.answer_http = answer, http

    def py(self, node, script, *args):
        return self.answer

    def http(self, node, method, url, body=None):
        return self.answer_http


def _haproxy(answer: str) -> HaproxyControl:
    plan = SimpleNamespace(router=SimpleNamespace(node="node1", admin_port=8081),
                           role=lambda r: [SimpleNamespace(name="inst-a"), SimpleNamespace(name="inst-b")])
    return HaproxyControl(plan, FakeRemote(answer))


ODD = (HEADER +
       "instances,inst-a,0,0,3,5,,10,UP\n"
       "instances,inst-b,x,0,99999999999999999999999,0,,0,\x1b]0;t\x07DRAIN\n"     # non-numbers, escape
       "instances,inst-c\n"                                                            # short
       "instances,inst-d,1,2,3,4,5,6,UP,extra,fields,beyond\n"                         # long
       "instances,$(id),0,0,0,0,,0,UP\n"                                               # not an instance name
       "instances,FRONTEND,0,0,0,0,,0,OPEN\n"
       "other,inst-a,0,0,7,0,,0,DOWN\n"
       'instances,"unterminated\n')


def test_odd_show_stat_lines_are_typed_skipped_or_unknown():
    stats = parse_show_stat(ODD)
    assert stats["inst-a"] == ServerStat(status="UP", scur=3, qcur=0)
    assert stats["inst-b"].status == "unknown" and stats["inst-b"].in_flight == NOT_IDLE
    assert stats["inst-c"].status == "unknown"
    assert set(stats) <= {"inst-a", "inst-b", "inst-c", "inst-d"}


def test_haproxy_control_survives_odd_answers():
    h = _haproxy(ODD)
    assert h.in_flight("inst-a") == 3
    assert h.in_flight("inst-b") == NOT_IDLE          # cannot tell: never idle
    assert h.serving("inst-a") and not h.serving("inst-b")
    assert h.view() == {"inst-a": "UP", "inst-b": "unknown"}


@pytest.mark.parametrize("answer", ["", "Unknown command.\n", "\x00" * 100, "[" * 10000, "a,b\n1,2\n"])
def test_an_answer_that_is_not_show_stat_is_an_execution_error(answer):
    with pytest.raises(ExecutionError) as err:
        _haproxy(answer).view()
    assert "HAProxy on node1" in str(err.value)


def test_huge_show_stat_is_bounded():
    rows = "".join(f"instances,i{i},0,0,1,0,,0,UP\n" for i in range(100_000))
    assert len(parse_show_stat(HEADER + rows)) <= 4096


@pytest.mark.parametrize("stdout, want", [("200\nok", (200, "ok")), ("abc\nbody", (0, "body")),
                                          ("", (0, "")), ("99999999999999999999\n", (0, ""))])
def test_http_status_line_that_is_not_a_number(stdout, want):
    executor = SimpleNamespace(run=lambda *a, **k: SimpleNamespace(rc=0, stdout=stdout, stderr=""))
    assert Remote(executor, {"node1": None}).http("node1", "GET", "http://x") == want


@pytest.mark.parametrize("metrics, want", [
    ("vllm:num_requests_running{engine=\"0\"} 2.0\nvllm:num_requests_waiting 1\n", 3),
    ("vllm:num_requests_running 1e999\n", VLLM_NOT_IDLE),
    ("vllm:num_requests_running nan\n", VLLM_NOT_IDLE),
    ("vllm:num_requests_running ...\n", VLLM_NOT_IDLE),
    ("vllm:num_requests_running -5\n", VLLM_NOT_IDLE),
    ("vllm:num_requests_running 1e300\nvllm:num_requests_waiting 1e300\n", VLLM_NOT_IDLE),
    ("# nothing\n\x1b[2J", 0),
])
def test_metrics_gauges(metrics, want):
    assert requests_in_flight(metrics) == want


def _proxy(answer: tuple[int, str]) -> ProxyControl:
    p = ProxyControl.__new__(ProxyControl)
    inst = [SimpleNamespace(name="p0", role="prefill"), SimpleNamespace(name="d0", role="decode")]
    p.plan = SimpleNamespace(instances=inst, instance=lambda n: next(i for i in inst if i.name == n),
                             role=lambda r: [i for i in inst if i.role == r])
    p.remote, p.node, p.url, p.what = FakeRemote(http=answer), SimpleNamespace(name="node1"), "http://x", "proxy"
    p.endpoints = {"p0": ["10.0.0.1:8000"], "d0": ["10.0.0.2:8000"]}
    return p


@pytest.mark.parametrize("body", ["[]", "1", '"x"', "null", '{"prefill_instances": "1"}', "[" * 100_000,
                                  '{"prefill_instances": 1e999}', '{"current_prefill_instances": 5}'])
def test_proxy_answers_of_the_wrong_shape(body):
    p = _proxy((200, body))
    view = p.view()
    assert set(view) == {"p0", "d0"} and all(isinstance(v, str) for v in view.values())
    try:
        assert p.serving("p0") is False
    except ExecutionError:
        pass                          # "answered 200: <body>": a refusal, not a crash


def test_proxy_drain_with_a_non_list_answer_is_not_a_crash():
    p = _proxy((200, '{"current_prefill_instances": 5, "message": "ok"}'))
    p.drain("p0")                     # nothing listed: the instance is out
    assert p.in_flight("p0") == 0     # /metrics answered "" with 200: no gauge, nothing in flight
