"""The stand-in `npu-smi info watch`: rows until killed, `-s u` (AI Cube usage) only from HDK 26.0.RC1, refused
before with npu-smi's usage error; run as deployctl's fact runs it (under `timeout` and `stdbuf -oL`) and read by the
fact's own parser, which is what `deployctl watch` does with it. A chip set busy in the node state shows in the next
row."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from fakecluster import tools
from fakecluster.fake_bin import npu_smi as fake
from fakecluster.spec import default_cluster

from deployctl.probes.npu_smi_watch import NPU_USAGE, parse_npu_usage


def state(hardware: str = "a2", driver: str = "26.0.rc1") -> dict:
    spec = default_cluster(1, hardware, subnet="10.250.0", driver_version=driver)[0]
    return tools.node_state(spec)


def run_watch(tmp_path, st: dict, npu: int, chip: int, seconds: int, busy: float) -> subprocess.CompletedProcess:
    """The fact's command for ``seconds``; the chip gets busy once the first row is out (not after a fixed time:
    an interpreter start on a loaded machine can take longer than a row), so the next rows say so."""
    path = tmp_path / "node.json"
    path.write_text(json.dumps(st))
    argv = NPU_USAGE.command(npu, chip, seconds)
    smi = argv.index("npu-smi")
    argv = argv[:smi] + [sys.executable, str(tools.FAKE_BIN / "npu_smi.py")] + argv[smi + 1:]
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, "FAKECLUSTER_STATE": str(path)})
    lines = []
    try:
        for line in p.stdout:
            lines.append(line)
            if len(lines) == 2:          # the header and the first row (the chip idle)
                for d in st["devices"]:
                    if (d["npu"], d["chip"]) == (npu, chip):
                        d["aicore"] = busy
                path.write_text(json.dumps(st))
        err = p.stderr.read()
        p.wait(timeout=seconds + 60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    return subprocess.CompletedProcess(argv, p.returncode, "".join(lines), err)


def test_hdk_26_scrolls_ai_cube_usage_until_killed_and_the_fact_reads_it(tmp_path):
    res = run_watch(tmp_path, state("a3"), 3, 1, seconds=5, busy=57)
    assert res.returncode == 124, res.stderr                # killed by `timeout`, as on a real host
    lines = res.stdout.splitlines()
    assert lines[0].split() == ["NpuID(Idx)", "ChipId(Idx)", "AI", "Cube(%)"]
    assert all(len(ln) == 36 for ln in lines[1:]), lines   # three columns, 12 characters each
    usage = parse_npu_usage(res.stdout, 3, 1)
    assert 2 <= len(usage.samples) <= 6 and usage.samples[0] == 0 and usage.peak == 57, usage


def test_before_hdk_26_the_letter_is_refused_as_npu_smi_refuses_an_option():
    rc, out, _ = fake.run(["info", "watch", "-i", "0", "-c", "0", "-d", "1", "-s", "u"], state(driver="25.0.rc1.1"))
    assert rc != 0 and out.startswith("Error parameter of -s\nUsage: npu-smi info")
    assert parse_npu_usage(out, 0, 0).refused == "Error parameter of -s"
    rc, w, _ = fake.run(["info", "watch", "-i", "0", "-c", "0", "-s", "pta"], state(driver="25.0.rc1.1"))
    assert rc == 0 and w.letters == "pta"                   # the letters every HDK has
    for argv in (["info", "watch", "-i", "9"], ["info", "watch", "-c", "0"], ["info", "watch", "-d", "x"],
                 ["info", "watch", "-s", "uz"], ["info", "-s", "u"]):
        assert fake.run(argv, state())[0] != 0, argv
