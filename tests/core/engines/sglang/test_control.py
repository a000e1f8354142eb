"""The SGLang router control against answers the real sglang-router 0.3.2 gave (GET /workers, DELETE
/workers/<id>, POST /workers: recorded from `python -m sglang_router.launch_router --pd-disaggregation` in this
session's run; the e2e test tests/features/watch/test_watch_sglang_pd_e2e.py runs it live)."""

from __future__ import annotations

import json

import pytest

from deployctl.core.engines.sglang.control import NOT_IDLE, RouterControl, read_gauges, workers
from deployctl.core.errors import ExecutionError
from tests.core.engines.sglang.test_launch import pd
from tests.core.checkpoint.test_plan import plan_of

LISTED = {"workers": [
    {"id": "6da7638a-821e-4d7f-a0c1-0c130a376775", "url": "http://10.0.0.3:30000", "model_id": "m", "priority": 50,
     "cost": 1.0, "worker_type": "decode", "is_healthy": True, "load": 0, "connection_mode": "HTTP",
     "metadata": {"model_path": "/w"}, "disable_health_check": False},
    {"id": "fce34e60-f502-4742-a74b-49b91307fc01", "url": "http://10.0.0.1:30000", "model_id": "m", "priority": 50,
     "cost": 1.0, "worker_type": "prefill", "is_healthy": True, "load": 0, "connection_mode": "HTTP",
     "bootstrap_port": 8998, "metadata": {}, "disable_health_check": False}],
    "total": 2, "stats": {"prefill_count": 1, "decode_count": 1, "regular_count": 0}}


class Remote:
    def __init__(self, listed: dict) -> None:
        self.listed, self.calls = listed, []

    def http(self, node, method, url, body=None):
        self.calls.append((method, url, body))
        if method == "GET" and url.endswith("/workers"):
            return 200, json.dumps(self.listed)
        if method == "DELETE":
            wid = url.rsplit("/", 1)[1]
            self.listed["workers"] = [w for w in self.listed["workers"] if w["id"] != wid]
            return 202, json.dumps({"status": "accepted", "worker_id": wid})
        if method == "POST":
            doc = json.loads(body)
            self.listed["workers"].append({"id": "db448e52-1aca-4cd4-9b0e-835bf6c05640", "url": doc["url"],
                                           "worker_type": doc["worker_type"], "is_healthy": True})
            return 202, json.dumps({"status": "accepted"})
        if url.endswith("/metrics"):
            return 200, 'sglang:num_running_reqs{engine_type="unified",tp_rank="0"} 3.0\nsglang:num_queue_reqs 2\n'
        return 0, ""


def control():
    plan = plan_of(pd())
    remote = Remote(json.loads(json.dumps(LISTED)))
    return RouterControl(plan, remote), remote


def test_drain_deletes_the_servers_worker_and_ready_posts_it_back_with_its_type():
    ctl, remote = control()
    remote.listed["workers"][0]["url"] = ctl.endpoint["decode"]
    assert ctl.view()["decode"] == "UP" and ctl.serving("decode")
    ctl.drain("decode")
    assert ("DELETE", f"{ctl.url}/workers/6da7638a-821e-4d7f-a0c1-0c130a376775", None) in remote.calls
    assert ctl.view()["decode"] == "OUT" and not ctl.serving("decode")
    ctl.ready("decode")
    method, url, body = remote.calls[-1]
    assert (method, url) == ("POST", f"{ctl.url}/workers")
    assert json.loads(body) == {"url": ctl.endpoint["decode"], "worker_type": "decode"}
    assert ctl.serving("decode")


def test_a_prefill_server_comes_back_with_its_bootstrap_port():
    ctl, remote = control()
    ctl.ready("prefill-1")
    assert json.loads(remote.calls[-1][2]) == {"url": ctl.endpoint["prefill-1"], "worker_type": "prefill",
                                               "bootstrap_port": 8999}


def test_requests_in_flight_are_the_servers_running_and_queued_gauges():
    ctl, _ = control()
    assert ctl.in_flight("decode") == 5
    assert read_gauges("sglang:num_running_reqs nan\n") == (None, "sglang:num_running_reqs is 'nan', not a count "
                                                                  "of requests")
    assert read_gauges("sglang:num_queue_reqs 1e40\n")[0] is None
    assert NOT_IDLE > 0


def test_a_malformed_worker_list_is_no_worker_and_a_refused_list_is_an_error():
    assert workers('{"workers": [{"id": "../x", "url": "u"}, {"id": 3}, "x"]}') == []
    assert workers("not json") == []
    ctl, remote = control()
    remote.http = lambda node, method, url, body=None: (500, "boom")
    with pytest.raises(ExecutionError, match="GET /workers answered 500"):
        ctl.drain("decode")
    assert ctl.view()["decode"].startswith("router:")
