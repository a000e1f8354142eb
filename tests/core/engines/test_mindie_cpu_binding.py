"""CPU binding of distributed-decode servers (issue 22 item 5), where MindIE publishes one.

MindIE-Motor's node_manager starts each decode DP server i under `taskset -c <cores>` (llm_daemon_starter.py
@5dfb024e L38-43, L132-134). On A3 the cores are slice i of (online CPUs // the server's NPUs), less its last two
(node_manager/common/mindie_cpu_binding.py get_cores_a3 L107-118). The container script deployctl renders is run
here with fake `getconf`, `taskset` and daemon: the cores it binds must be the published formula's, computed here
independently of deployctl. A2 binds by each NPU's NUMA node (get_cores_a2 L121-138, npu-smi + lspci at start):
not rendered, so no taskset there."""

from __future__ import annotations

import shlex
import subprocess

import pytest

from conftest import EXAMPLES, ROOT, run_cli

D5 = ROOT / "tests" / "conformance" / "mindie" / "inventories" / "d5-a2-pd-1p2-1d8.yaml"


def container(start_sh) -> tuple[str, dict[str, str]]:
    words = shlex.split(start_sh.read_text().split("docker run", 1)[1].split("\necho ", 1)[0].replace("\\\n", " "))
    env = dict(words[i + 1].split("=", 1) for i, w in enumerate(words) if w == "-e")
    return words[words.index("-c", words.index("bash")) + 1], env


def run(tmp_path, script: str, env: dict, cpus: int) -> list[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    servers = int(env.get("DEPLOYCTL_DP_SERVERS", "1"))
    log = tmp_path / "log"
    for name, body in {"getconf": f"echo {cpus}",
                       "taskset": f'echo "taskset $*" >> {log}; shift 2; exec "$@"',
                       # the launcher stops every server when the first exits: each logs, then lives until
                       # every server has logged (at most 10 s)
                       "daemon": f'echo "daemon $*" >> {log}; for _ in $(seq 200); do '
                                 f'[ "$(grep -c ^daemon {log})" -ge {servers} ] && exit 0; sleep 0.05; done'}.items():
        (bin_dir / name).write_text(f"#!/bin/bash\n{body}\n")
        (bin_dir / name).chmod(0o755)
    # the launcher's set_env prelude sources nothing here (no /usr/local/Ascend); the daemon is the fake
    env = dict(env, DEPLOYCTL_DAEMON=str(bin_dir / "daemon"), DEPLOYCTL_WORK="/w",
               PATH=f"{bin_dir}:/usr/bin:/bin")
    res = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    return sorted(log.read_text().splitlines())


def motor_a3_cores(i: int, npus: int, cpus: int) -> str:
    per = cpus // npus
    cores = list(range((i - 1) * per, (i - 1) * per + per))[:-2]
    return f"{cores[0]}-{cores[-1]}"


@pytest.mark.parametrize("cpus", [192, 320])
def test_a3_decode_servers_are_bound_as_motor_binds_them(tmp_path, cpus):
    out = tmp_path / "out"
    r = run_cli("render", "-i", str(EXAMPLES / "a3-pd-2p1d.yaml"), "-o", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    script, env = container(out / "d1" / "start.sh")
    servers, npus = int(env["DEPLOYCTL_DP_SERVERS"]), int(env["DEPLOYCTL_DP_CPU_SLICES"])
    assert npus == 16
    lines = run(tmp_path, script, env, cpus)
    bound = [line for line in lines if line.startswith("taskset")]
    assert bound == sorted(f"taskset -c {motor_a3_cores(i, npus, cpus)} {tmp_path}/bin/daemon --config-file "
                           f"/w/config{i}.json --expert-parallel true" for i in range(1, servers + 1))


def test_a2_decode_servers_are_not_bound(tmp_path):
    out = tmp_path / "out"
    r = run_cli("render", "-i", str(D5), "-o", str(out))
    assert r.returncode == 0, r.stdout + r.stderr
    script, env = container(out / "d1" / "start.sh")
    assert "DEPLOYCTL_DP_CPU_SLICES" not in env
    lines = run(tmp_path, script, env, 192)
    assert lines and not any(line.startswith("taskset") for line in lines)
