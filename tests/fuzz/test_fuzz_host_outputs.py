"""Host-output fuzzer (issue 21, deliverable 9): what a lying or broken host prints, fed to the probe parsers,
to preflight's per-host assembly, to the router/engine answer readers and to the deployed-state reader.

Baselines are real outputs (tests/samples/ascend, tests/fakecluster/real_samples); tests/fuzz/host_mutate.py
mutates them. Properties:

* a parser raises nothing but ValueError (its documented "not this format"; pydantic's ValidationError is one);
* what it returns survives a JSON round trip through its model (every value still matches its pattern), and
  holds no control character;
* ``assemble`` (the boundary: probe outputs -> HostFacts) never raises at all, whatever each probe printed:
  a bad output is a probe error of that host;
* the HAProxy `show stat`, /metrics and status-line readers never raise but ValueError, and stay bounded;
* ``parse_state`` (deploy/remote.py) never raises.

Size: DEPLOYCTL_FUZZ_HOST_EXAMPLES, else DEPLOYCTL_FUZZ_EXAMPLES, else 60 examples per property (a few
seconds each on 2 cores).
"""

from __future__ import annotations

import json
import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from deployctl.probes import hccn_tool, host, image_versions, npu_smi, npu_smi_queries, versions

from .host_mutate import (BOARD, CHIP_MAP, HCCN_CONF, HCCN_ONE, HCCN_TRANSCRIPTS, HEALTH, HOST, IMAGE_VERSIONS, NPU_INFO,
                          NPU_LIST, SPOD, VERSIONS, mutated)

N = int(os.environ.get("DEPLOYCTL_FUZZ_HOST_EXAMPLES") or os.environ.get("DEPLOYCTL_FUZZ_EXAMPLES") or "60")
SETTINGS = settings(max_examples=N, deadline=None, derandomize=os.environ.get("DEPLOYCTL_FUZZ_RANDOM") != "1",
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\u2028\u2029\ud800-\udfff]")

PARSERS = {   # name: (parser, baselines)
    "npu-smi info": (npu_smi.parse_npu_smi_info, NPU_INFO),
    "npu-smi info -l": (npu_smi_queries.parse_npu_list, NPU_LIST),
    "npu-smi info -m": (npu_smi_queries.parse_chip_map, CHIP_MAP),
    "npu-smi board": (npu_smi_queries.parse_board_info, BOARD),
    "npu-smi health": (npu_smi_queries.parse_npu_health, HEALTH),
    "npu-smi spod-info": (npu_smi_queries.parse_spod_info, SPOD),
    "version.info": (versions.parse_version_info, VERSIONS),
    "image versions": (image_versions.parse_image_versions, IMAGE_VERSIONS),
    "hccn.conf": (hccn_tool.parse_host_hccn_conf, HCCN_CONF),
    "hccn_tool -ip": (hccn_tool.parse_ip_conf, HCCN_ONE["ip"] + HCCN_TRANSCRIPTS),
    "hccn_tool -vnic": (hccn_tool.parse_vnic, HCCN_ONE["vnic"]),
    "hccn_tool -link": (hccn_tool.parse_link, HCCN_ONE["link"]),
    "hccn_tool -net_health": (hccn_tool.parse_net_health, HCCN_ONE["health"]),
    "hccn_tool -netdetect": (hccn_tool.parse_netdetect, HCCN_ONE["netdetect"]),
    "hccn_tool -gateway": (hccn_tool.parse_gateway, HCCN_ONE["gateway"]),
    "hccn_tool -ping": (hccn_tool.parse_ping, HCCN_ONE["ping"]),
    "hccn_tool -tls": (hccn_tool.parse_tls, HCCN_ONE["tls"] + HCCN_TRANSCRIPTS),
    "os-release": (host.parse_os_release, HOST["os"]),
    "uname -m": (host.parse_arch, HOST["arch"]),
    "df": (host.parse_df, HOST["df"]),
    "ss": (host.parse_listening_ports, HOST["ss"]),
    "ip -o addr": (host.parse_addresses, HOST["addr"]),
    "weights summary": (host.parse_weights_dir, HOST["weights"]),
    "date": (host.parse_epoch, HOST["epoch"]),
}


def _strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _strings(k)
            yield from _strings(v)
    elif isinstance(value, (list, tuple, set, frozenset)):
        for v in value:
            yield from _strings(v)


def _check_result(result) -> None:
    """A parsed fact: it round-trips through its own model (patterns hold) and carries no control character."""
    if isinstance(result, BaseModel):
        again = type(result).model_validate_json(result.model_dump_json())
        assert again == result
        data = json.loads(result.model_dump_json())
    else:
        data = result
    for s in _strings(data):
        assert not CONTROL.search(s), f"control character in a fact: {s!r}"
        assert len(s) <= 4096, f"a fact string of {len(s)} characters"


@pytest.mark.parametrize("name", sorted(PARSERS))
def test_probe_parser_on_mutated_real_output(name):
    parse, baselines = PARSERS[name]
    assert baselines, f"no baseline sample for {name}"

    @SETTINGS
    @given(text=mutated(baselines))
    def prop(text):
        try:
            result = parse(text)
        except ValueError:
            return
        if result is not None:
            _check_result(result)

    prop()


def _all_probe_outputs(hardware: str):
    from deployctl.features.preflight.probes import host_commands

    names = [n for n, _ in host_commands(hardware, "img:1", "/weights")]
    by_kind = {"npu.info": NPU_INFO, "npu.list": NPU_LIST, "ver.": VERSIONS, "hccn.conf": HCCN_CONF,
               "host.os": HOST["os"], "host.arch": HOST["arch"], "host.shm": HOST["df"], "host.weights_df": HOST["df"],
               "host.weights": HOST["weights"], "host.docker": HOST["docker"], "host.image": ["sha256:abc\n"],
               "image.versions": IMAGE_VERSIONS,
               "host.ports": HOST["ss"], "host.addr": HOST["addr"], "npu.board.": BOARD, "npu.spod.": SPOD,
               "hccn.ip.": HCCN_ONE["ip"], "hccn.link.": HCCN_ONE["link"], "hccn.health.": HCCN_ONE["health"],
               "hccn.tls.": HCCN_ONE["tls"], "hccn.vnic.": HCCN_ONE["vnic"]}
    return {n: next(v for k, v in by_kind.items() if n.startswith(k)) for n in names}


@pytest.mark.parametrize("hardware", ["a2", "a3"])
def test_assemble_never_raises_and_facts_hold_their_patterns(hardware):
    """The host data boundary: every probe output mutated at once, HostFacts always built."""
    from deployctl.io.executor import HostTarget
    from deployctl.core.models.host_facts import HostFacts
    from deployctl.io.batch import ProbeOutput
    from deployctl.features.preflight.probes import assemble

    baselines = _all_probe_outputs(hardware)
    names = sorted(baselines)

    @SETTINGS
    @given(data=st.data())
    def prop(data):
        chosen = data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=6, unique=True))
        out = {n: ProbeOutput(n, 0, baselines[n][0]) for n in names}
        for n in chosen:
            out[n] = ProbeOutput(n, data.draw(st.sampled_from([0, 0, 1, 124, 127])), data.draw(mutated(baselines[n])))
        facts = assemble(HostTarget(name="node1", address="10.0.0.1"), hardware, out, None, 0.5)
        again = HostFacts.model_validate_json(facts.model_dump_json())
        assert again == facts
        for s in _strings(json.loads(facts.model_dump_json())):
            assert not CONTROL.search(s), f"control character in the facts: {s!r}"
        for iface in facts.addresses.values():
            assert re.fullmatch(r"[A-Za-z0-9_.-]{1,15}", iface)

    prop()


SHOW_STAT = ["# pxname,svname,qcur,qmax,scur,smax,slim,stot,bin,bout,dreq,dresp,ereq,econ,eresp,wretr,wredis,status\n"
             "front,FRONTEND,,,0,1,2000,3,0,0,0,0,0,,,,,OPEN\n"
             "instances,inst-a,0,0,2,3,,10,0,0,,0,,0,0,0,0,UP\n"
             "instances,inst-b,0,0,0,1,,5,0,0,,0,,0,0,0,0,DRAIN\n"
             "instances,inst-c,0,0,0,0,,0,0,0,,0,,0,0,0,0,UP 1/2\n"
             "instances,BACKEND,0,0,2,3,200,15,0,0,0,0,,0,0,0,0,UP\n"]
METRICS = ['# HELP vllm:num_requests_running Number of requests in model execution batches.\n'
           '# TYPE vllm:num_requests_running gauge\n'
           'vllm:num_requests_running{engine="0",model_name="qwen3"} 3.0\n'
           'vllm:num_requests_waiting{engine="0",model_name="qwen3"} 1.0\n']


def test_show_stat_reader():
    from deployctl.backends.hosts.router_control import MAX_STAT_ROWS, ServerStat, parse_show_stat

    @SETTINGS
    @given(text=mutated(SHOW_STAT))
    def prop(text):
        try:
            stats = parse_show_stat(text)
        except ValueError:
            return
        assert len(stats) <= MAX_STAT_ROWS
        for name, row in stats.items():
            assert re.fullmatch(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?", name)
            assert isinstance(row, ServerStat) and not CONTROL.search(row.status)
            assert row.in_flight >= 0

    prop()


def test_metrics_reader():
    from deployctl.core.engines.vllm_ascend.control import NOT_IDLE, requests_in_flight

    @SETTINGS
    @given(text=mutated(METRICS))
    def prop(text):
        n = requests_in_flight(text)
        assert isinstance(n, int) and 0 <= n <= NOT_IDLE

    prop()


def _state_baselines():
    run = "20250101-000000-abcd"
    manifest = json.dumps({"revision": "0123456789abcdef", "run": run, "files": {"env": "sha"}})
    entry = json.dumps({"revision": 3, "run_id": run, "time": "2025-01-01T00:00:00Z", "user": "root",
                        "operation": "up", "result": "successful", "nodes": {"node1": "0123456789abcdef"}})
    return {
        "dep.current": ["/opt/deployctl/c/revisions/0123456789abcdef\n"],
        "dep.previous": ["/opt/deployctl/c/revisions/fedcba9876543210\n"],
        "dep.manifests": [f"@@file /opt/deployctl/c/revisions/0123456789abcdef/.deployctl.json\n{manifest}\n"],
        "dep.history": [f"@@file /opt/deployctl/c/history/3.json\n{entry}\n",
                        f"@@file /opt/deployctl/c/history/3.json\n{entry}\n@@file /opt/deployctl/c/history/4.json\n"
                        + entry.replace('"revision": 3', '"revision": "4"').replace('"time": ', '"t": ') + "\n"],
        "dep.lock": [json.dumps({"user": "root", "host": "ctl", "pid": 42, "command": "up", "run_id": run,
                                 "started": "2025-01-01T00:00:00Z"}) + "\n"],
        "dep.container.0": ['{"Status":"running","ExitCode":0,"StartedAt":"2025-01-01T00:00:00Z"}\n'
                            '[{"Source":"/opt/deployctl/c/revisions/0123456789abcdef","Destination":"/work"}]\n'
                            '["A=1","B=2"]\n', "[]\n[]\n[]\n", ""],
        "dep.health.0": ["200\n", "0\n"],
        "dep.readylog": ["1\n"],
    }


@pytest.fixture(scope="module")
def sample_plan():
    from deployctl.app.plan import planned

    from .host_mutate import ROOT

    return planned(ROOT / "inventories" / "sample.yaml").plan


def test_parse_state_never_raises(sample_plan):
    from deployctl.backends.hosts.remote import parse_state
    from deployctl.io.batch import ProbeOutput

    node = sample_plan.nodes[0].name
    baselines = _state_baselines()
    names = sorted(baselines)

    @SETTINGS
    @given(data=st.data())
    def prop(data):
        out = {}
        for n in names:
            text = data.draw(mutated(baselines[n])) if data.draw(st.booleans()) else baselines[n][0]
            out[n] = ProbeOutput(n, data.draw(st.sampled_from([0, 0, 0, 1])), text)
        parse_state(sample_plan, node, out)

    prop()
