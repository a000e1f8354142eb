"""The cluster directory (<engine.deploy_dir>/<cluster.name>) is deployctl's alone (issue 21, observation 6):
refused when it is, holds or sits inside a path the inventory names for something else, a system directory
or a tree another program manages; every refusal names file:line, the key and a hint."""

from __future__ import annotations

from pathlib import Path

import pytest

from deployctl.core.errors import InventoryError
from deployctl.io.inventory_file import load_inventory
from deployctl.core.inventory.paths import OWNED_TREES, SYSTEM_PATHS
from deployctl.app.inventory import validate_inventory
from test_validate_hostile import BASE



def _inventory(tmp_path: Path, name: str = "ds-prod", engine: str = "", extra: str = "") -> Path:
    text = BASE.replace("  name: ds-prod\n", f"  name: {name}\n", 1)
    text = text.replace("engine:\n", "engine:\n" + engine, 1) + extra
    path = tmp_path / "inv.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _problems(path: Path) -> list:
    try:
        validate_inventory(load_inventory(path))
    except InventoryError as exc:
        return [p for p in exc.problems if "cluster directory" in p.message]
    return []


@pytest.mark.parametrize("deploy_dir,name,why", [
    ("/data", "models", "contains /data/models/DeepSeek-R1-W8A8, the model weights (model.weights_path)"),
    ("/var/lib", "docker", "/var/lib/docker is a system directory"),
    ("/var/lib", "containerd", "is a system directory"),
    ("/", "usr", "/usr is a system directory"),
    ("/", "data", "/data is a system directory"),
    ("/usr", "local", "is a system directory"),
    ("/data/models/DeepSeek-R1-W8A8", "x", "is inside /data/models/DeepSeek-R1-W8A8, the model weights"),
    ("/var/lib/docker/volumes", "x", "is inside /var/lib/docker"),
    ("/usr/local/Ascend", "x", "is inside /usr/local/Ascend"),
    ("/var/log/npu", "slog", "is /var/log/npu/slog, the NPU device logs (engine.device_logs)"),
])
def test_refused(tmp_path, deploy_dir, name, why):
    path = _inventory(tmp_path, name, f"  deploy_dir: {deploy_dir}\n")
    found = _problems(path)
    assert found, "validated"
    for p in found:
        assert p.path == "engine.deploy_dir" and p.file == str(path) and p.line == 7, p
        assert "deploy_dir" in p.hint and "--purge" in p.hint
    assert any(why in p.message for p in found), found


def test_default_deploy_dir_names_the_cluster_key(tmp_path):
    """deploy_dir left at its default: the cluster name made the directory, the problem points at it."""
    path = _inventory(tmp_path, "ds-prod", "", extra="").read_text().replace(
        "weights_path: /data/models/DeepSeek-R1-W8A8", "weights_path: /var/lib/deployctl/ds-prod/w")
    (tmp_path / "inv.yaml").write_text(path)
    found = _problems(tmp_path / "inv.yaml")
    assert [p.path for p in found] == ["cluster.name"], found
    assert "contains /var/lib/deployctl/ds-prod/w, the model weights" in found[0].message


def test_mounts_and_controller_paths(tmp_path):
    mount = "  mounts:\n    - {host: /srv/patches/ds-prod, container: /usr/local/Ascend/atb-models}\n"
    found = _problems(_inventory(tmp_path, "ds-prod", "  deploy_dir: /srv/patches\n" + mount))
    assert any("is /srv/patches/ds-prod, a directory mounted into the engine (engine.mounts[0].host)"
               in p.message for p in found), found
    path = _inventory(tmp_path, "ds-prod", "  deploy_dir: /srv/keys\n")
    path.write_text(path.read_text().replace("key: ~/.ssh/id_ed25519", "key: /srv/keys/ds-prod/id_ed25519"))
    found = _problems(path)
    assert any("contains /srv/keys/ds-prod/id_ed25519, the SSH key (ssh.key)" in p.message for p in found), found


@pytest.mark.parametrize("deploy_dir,name", [("/var/lib/deployctl", "ds-prod"), ("/data/deployctl", "models"),
                                             ("/opt/deployctl", "docker"), ("/srv", "ds-prod")])
def test_allowed(tmp_path, deploy_dir, name):
    assert _problems(_inventory(tmp_path, name, f"  deploy_dir: {deploy_dir}\n")) == []


def test_lists_are_normalised():
    for p in SYSTEM_PATHS + OWNED_TREES:
        assert p == "/" or (p.startswith("/") and not p.endswith("/") and "//" not in p), p
    assert set(OWNED_TREES) <= set(SYSTEM_PATHS)
