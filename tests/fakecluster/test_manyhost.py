"""ManyHostCluster (manyhost.py): many simulated hosts behind one sshd, each node as a FakeCluster node prints.

One cluster of 16 nodes (A3 and A2 mixed, one refused, one down) serves the module; faults switched with
update_node are switched back by the test that sets them.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from fakecluster import FakeCluster, ManyHostCluster, default_cluster, fleet, with_faults
from fakecluster.fixtures import require_fake_cluster_support
from fakecluster.hostenv import NS_DIR, RUN_DIR, _lease_owner, tcp_port_open

HCCN = "/usr/local/Ascend/driver/tools/hccn_tool"
N = 16
A2 = {"node3", "node4"}                 # A2 hosts among the A3 ones
REFUSED, DOWN = "node15", "node16"


def _specs():
    specs = fleet(N, "a3")
    a2 = {s.name: s for s in fleet(N, "a2", subnet=specs[0].ip.rsplit(".", 2)[0])}
    mixed = [a2[s.name] if s.name in A2 else s for s in specs]
    return with_faults(mixed, **{REFUSED: {"unreachable": "refused"}, DOWN: {"unreachable": "down"}})


@pytest.fixture(scope="module")
def mc(tmp_path_factory):
    require_fake_cluster_support()
    cluster = ManyHostCluster(_specs(), tmp_path_factory.mktemp("manyhost"))
    try:
        yield cluster.start()
    finally:
        cluster.stop()


def up(mc):
    return [n for n in mc.nodes if n.spec.reachable]


def test_each_node_answers_as_itself(mc):
    for n in up(mc):
        r = mc.ssh(n, f"hostname; cat /etc/hostname; {HCCN} -i 1 -ip -g; npu-smi info -l | grep -c 'NPU ID'")
        ip = n.spec.device_ips[1]
        assert r.returncode == 0, r.stderr
        assert r.stdout == f"{n.name}\n{n.name}\nipaddr:{ip}\nnetmask:255.255.0.0\n8\n", (n.name, r.stdout)


def test_same_output_as_a_fakecluster_node(mc, tmp_path):
    """A FakeCluster node of the same spec prints the same (its name and address are the same too)."""
    require_fake_cluster_support()
    cmds = ["npu-smi info -t board -i 0", f"{HCCN} -i 3 -link -g", "cat /usr/local/Ascend/driver/version.info",
            "cat /etc/hccn.conf", "docker images --format '{{.Repository}}:{{.Tag}}'", "ls -l /data/models/*/ | wc -l",
            "npu-smi info -t health -i 2", "cat /etc/fakecluster/node.json | grep -c phy"]
    for name in ("node1", "node3"):
        spec = mc.node(name).spec
        one = default_cluster(1, spec.hardware)[0]
        fc_spec = spec.replace(ip=one.ip)
        with FakeCluster([fc_spec], tmp_path / name) as fc:
            for cmd in cmds:
                a, b = mc.ssh(name, cmd), fc.ssh(name, cmd)
                assert (a.returncode, a.stdout, a.stderr) == (b.returncode, b.stdout, b.stderr), cmd


def test_exit_status_stdin_and_streams(mc):
    r = mc.ssh("node2", "cat; echo out; echo err >&2; exit 7", input="from stdin\n")
    assert (r.returncode, r.stdout, r.stderr) == (7, "from stdin\nout\n", "err\n")
    r = subprocess.run(mc.ssh_args("node2") + ["-T"], input="hostname\nexit 4\n", capture_output=True, text=True,
                       timeout=30)
    assert (r.returncode, r.stdout) == (4, "node2\n"), r.stderr


def test_ssh_config_and_paramiko(mc):
    r = subprocess.run(["ssh", "-F", str(mc.ssh_config), "node5", "hostname"], capture_output=True, text=True,
                       timeout=30)
    assert r.stdout == "node5\n", r.stderr
    import paramiko

    client = paramiko.SSHClient()
    client.load_host_keys(str(mc.known_hosts))
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(mc.node("node6").ip, username="root", key_filename=str(mc.client_key), allow_agent=False,
                   look_for_keys=False, timeout=10)
    try:
        outs = []
        for _ in range(2):          # several channels on one connection, as deployctl's executor opens them
            _, out, _ = client.exec_command("hostname")
            outs.append(out.read().decode())
        sftp = client.open_sftp()    # the sftp subsystem runs inside the node too
        with sftp.open("/etc/hostname") as f:
            assert f.read().decode() == "node6\n"
        sftp.close()
    finally:
        client.close()
    assert outs == ["node6\n", "node6\n"]


def test_faults_stay_on_their_node(mc):
    before = {n.name: mc.ssh(n, f"npu-smi info -t health -i 1; {HCCN} -i 2 -link -g").stdout for n in up(mc)}
    mc.update_node("node7", npu_health={2: "Alarm"}, link_down={2})
    try:
        after = {n.name: mc.ssh(n, f"npu-smi info -t health -i 1; {HCCN} -i 2 -link -g").stdout for n in up(mc)}
        assert "Alarm" in after["node7"] and "link status: DOWN" in after["node7"], after["node7"]
        assert {k: v for k, v in after.items() if k != "node7"} == {k: v for k, v in before.items() if k != "node7"}
    finally:
        mc.update_node("node7", npu_health={}, link_down=set())
    assert mc.ssh("node7", f"{HCCN} -i 2 -link -g").stdout == "link status: UP\n"


def test_unreachable_refused_and_down(mc):
    assert tcp_port_open(mc.node(REFUSED).ip, 22) == "ECONNREFUSED"
    assert tcp_port_open(mc.node(DOWN).ip, 22, timeout=0.5) in ("ETIMEDOUT", "EHOSTUNREACH")
    r = mc.ssh(REFUSED, "true", timeout=30)
    assert r.returncode == 255 and "refused" in r.stderr
    # switched at runtime: node8 refuses, then answers again
    mc.update_node("node8", unreachable="refused")
    try:
        assert tcp_port_open(mc.node("node8").ip, 22) == "ECONNREFUSED"
    finally:
        mc.update_node("node8", unreachable=False)
    assert mc.ssh("node8", "hostname").stdout == "node8\n"


def test_changed_host_key_and_bad_specs(tmp_path):
    require_fake_cluster_support()
    specs = with_faults(fleet(2, "a2"), node2={"changed_host_key": True})
    with ManyHostCluster(specs, tmp_path / "keys") as mc:
        assert mc.ssh("node1", "hostname").stdout == "node1\n"
        r = mc.ssh("node2", "hostname")
        assert r.returncode == 255 and "host key" in r.stderr.lower(), r.stderr
    with pytest.raises(ValueError, match="port_busy"):
        ManyHostCluster(fleet(1, "a2", subnet="10.254", port_busy=(1025,)), tmp_path / "ports")


def _mounts_under(path: Path) -> list[str]:
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4] for line in f if line.split()[4].startswith(str(path))]


def _links_and_netns(prefix: str) -> list[str]:
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    out += subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [w for w in out.replace(":", " ").replace("@", " ").split() if w.startswith(prefix + "-")]


def _addresses(subnet: str) -> list[str]:
    out = subprocess.run(["ip", "-o", "-4", "addr"], capture_output=True, text=True).stdout
    return [w for w in out.split() if w.startswith(subnet + ".")]


def test_stop_leaves_nothing(tmp_path, monkeypatch):
    require_fake_cluster_support()
    mc = ManyHostCluster(with_faults(fleet(3, "a2"), node3={"unreachable": "refused"}), tmp_path / "ok").start()
    prefix, subnet = mc.prefix, mc.subnet
    try:
        assert len(_mounts_under(mc.ns_dir)) == 1 + 2 * 3
        assert set(_links_and_netns(prefix)) == {f"{prefix}-h", f"{prefix}-hub", f"{prefix}-void"}
        live = mc.ssh("node1", "sleep 30 >/dev/null 2>&1 & echo $!")        # outlives its session
        pids = [int(live.stdout)] + mc.sshd_pids()
    finally:
        mc.stop()
    assert _mounts_under(NS_DIR / prefix) == [] and not (NS_DIR / prefix).exists()
    assert _links_and_netns(prefix) == [] and _addresses(subnet) == []
    assert not [p for p in pids if Path(f"/proc/{p}").exists()
                and Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"]
    assert not (RUN_DIR / "clusters" / f"{prefix}.json").exists() and _lease_owner(subnet) != os.getpid()
    mc.stop()                                                               # idempotent
    # a start that fails once the namespaces exist is cleaned up too
    broken = ManyHostCluster(fleet(2, "a2"), tmp_path / "broken")

    def boom():
        raise RuntimeError("simulated failure after the namespaces exist")
    monkeypatch.setattr(broken, "_sshd_up", boom)
    with pytest.raises(RuntimeError, match="simulated"):
        broken.start()
    assert _mounts_under(NS_DIR / broken.prefix) == [] and _links_and_netns(broken.prefix) == []
    assert _addresses(broken.subnet) == []


def test_start_is_cheap(mc):
    """16 nodes start in about a second here; the phases are reported."""
    assert set(mc.phase_seconds) == {"files", "network", "namespaces", "sshd"}
    assert mc.start_seconds < 30, mc.phase_seconds
    t = time.monotonic()
    assert all(mc.ssh(n, "true").returncode == 0 for n in up(mc)[:5])
    assert time.monotonic() - t < 10
