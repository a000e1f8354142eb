"""Issue 21 observation 8: the kubeconfig an inventory names (kubernetes.kubeconfig) may carry a credential
plugin (`exec`, `auth-provider`) that the Kubernetes client and helm run on this machine. Read-only commands
ran it; now it is refused unless the operator opts in (--allow-kubeconfig-exec /
DEPLOYCTL_ALLOW_KUBECONFIG_EXEC=1), and the refusal names the command."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from conftest import ROOT, run_cli

SAMPLE = ROOT / "inventories/sample.yaml"


def kube_inventory(tmp_path: Path, user: dict) -> tuple[Path, Path]:
    marker = tmp_path / "plugin-ran"
    kubeconfig = {
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1"}}],   # nothing listens there
        "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}],
        "users": [{"name": "u", "user": user}],
    }
    (tmp_path / "kube").mkdir()
    (tmp_path / "kube" / "config.yaml").write_text(yaml.safe_dump(kubeconfig))
    doc = yaml.safe_load(SAMPLE.read_text())
    doc["kubernetes"] = {"kubeconfig": "kube/config.yaml", "namespace": "llm"}     # relative to the inventory
    inv = tmp_path / "inv.yaml"
    inv.write_text(yaml.safe_dump(doc, sort_keys=False))
    return inv, marker


def exec_user(marker: Path) -> dict:
    cred = ('{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential",'
            '"status":{"token":"t"}}')
    return {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "/bin/sh",
                     "args": ["-c", f"touch {marker}; echo '{cred}'"], "interactiveMode": "Never"}}


@pytest.mark.parametrize("command", [["status"], ["history"], ["diff"]])
def test_an_exec_plugin_is_refused_and_never_runs(tmp_path, command):
    inv, marker = kube_inventory(tmp_path, exec_user(tmp_path / "plugin-ran"))
    res = run_cli(*command, "-i", str(inv), "--target", "k8s")
    assert res.returncode == 2, res.stdout + res.stderr
    assert "runs a credential plugin" in res.stderr and "/bin/sh -c touch" in res.stderr, res.stderr
    assert "--allow-kubeconfig-exec" in res.stderr
    assert not marker.exists(), "the kubeconfig's exec plugin ran"


def test_an_auth_provider_is_refused_naming_its_command(tmp_path):
    user = {"auth-provider": {"name": "gcp", "config": {"cmd-path": "/usr/bin/gcloud", "cmd-args": "config"}}}
    inv, _ = kube_inventory(tmp_path, user)
    res = run_cli("status", "-i", str(inv), "--target", "k8s")
    assert res.returncode == 2 and "auth-provider `/usr/bin/gcloud`" in res.stderr, res.stderr


@pytest.mark.slow
def test_the_operator_can_opt_in(tmp_path):
    inv, marker = kube_inventory(tmp_path, exec_user(tmp_path / "plugin-ran"))
    res = run_cli("status", "-i", str(inv), "--target", "k8s", "--allow-kubeconfig-exec")
    assert "runs a credential plugin" not in res.stderr
    assert marker.exists(), res.stdout + res.stderr         # allowed: it ran (the server is unreachable: fine)
    marker.unlink()
    res = run_cli("status", "-i", str(inv), "--target", "k8s", env={"DEPLOYCTL_ALLOW_KUBECONFIG_EXEC": "1"})
    assert marker.exists(), res.stdout + res.stderr


@pytest.mark.slow
def test_a_plain_token_kubeconfig_is_not_refused(tmp_path):
    inv, _ = kube_inventory(tmp_path, {"token": "abc"})
    res = run_cli("status", "-i", str(inv), "--target", "k8s")
    assert "credential plugin" not in res.stderr
