"""The hardware an engine image is built for, read from the tags its publishers name (each engine's images.py
cites them), and the refusal of an image of the other hardware (deployctl/core/engine_spec/image_hardware.py)."""

from __future__ import annotations

import pytest

from conftest import ROOT, run_cli
from deployctl.core.engines.mindie.images import hardware as mindie_hardware
from deployctl.core.engines.vllm_ascend.images import hardware as vllm_ascend_hardware

HUB = "swr.cn-south-1.myhuaweicloud.com/ascendhub/mindie"
QUAY = "quay.io/ascend/vllm-ascend"


@pytest.mark.parametrize("image,hardware", [
    (f"{HUB}:2.2.RC1-800I-A2-py311-openeuler24.03-lts", "a2"),
    (f"{HUB}:3.0.0-800I-A3-py311-openeuler24.03-lts", "a3"),
    (f"{HUB}:2.1.RC1-800I-A2-py311-openeuler24.03-lts-arm64", "a2"),
    (f"{HUB}:2.1.RC1-300I-Duo-py311-openeuler24.03-lts", "310p"),
    ("registry.local/mindie:latest", None),                      # a private tag says nothing
    (f"{HUB}@sha256:{'a' * 64}", None),                          # nor does a digest
    ("registry:5000/mindie", None),                               # a port is no tag
])
def test_mindie_tags(image, hardware):
    assert mindie_hardware(image) == hardware


@pytest.mark.parametrize("image,hardware", [
    (f"{QUAY}:v0.13.0", "a2"), (f"{QUAY}:v0.13.0-openeuler", "a2"), (f"{QUAY}:v0.23.0-a3", "a3"),
    (f"{QUAY}:v0.11.0rc0-a3-openeuler", "a3"), (f"{QUAY}:v0.13.0-310p", "310p"), (f"{QUAY}:v0.18.0-950dt", "950dt"),
    (f"m.daocloud.io/{QUAY}:v0.13.0", "a2"),                      # a mirror of the project's repository
    ("my.registry/team/vllm-ascend:v0.13.0", None),                 # another repository's bare tag: not judged
    ("my.registry/team/vllm-ascend:v0.13.0-a3", "a3"),              # its suffix is the project's convention
    (f"{QUAY}:main", None), (f"{QUAY}:latest", None),
])
def test_vllm_ascend_tags(image, hardware):
    assert vllm_ascend_hardware(image) == hardware


@pytest.mark.parametrize("example,image", [
    ("a3-pd-2p1d.yaml", f"{HUB}:2.2.RC1-800I-A2-py311-openeuler24.03-lts"),
    ("vllm-a3-1p1d-qwen3.yaml", f"{QUAY}:v0.13.0"),
    ("vllm-a2-2x8-v32-dp-ep.yaml", f"{QUAY}:v0.13.0-a3"),
])
def test_an_image_of_the_other_hardware_is_refused_at_its_line(tmp_path, example, image):
    text = (ROOT / "inventories" / "examples" / example).read_text()
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith("image:") and "haproxy" not in line)
    lines[at] = lines[at].split("image:")[0] + f"image: {image}"
    path = tmp_path / "inv.yaml"
    path.write_text("\n".join(lines) + "\n")
    res = run_cli("validate", "-i", str(path), cwd=tmp_path)
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"{path}:{at + 1} engine.image: {image} is built for Atlas" in res.stderr, res.stderr
    assert "use the Atlas" in res.stderr
