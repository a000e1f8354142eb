"""The image-to-host pairing rule (deployctl/features/preflight/pairing.py) on synthetic HostFacts built from the real
version files of tests/samples/ascend/versions/ (the simulated-cluster run is in test_preflight_cluster.py)."""

from __future__ import annotations

from pathlib import Path

from deployctl.core.models.facts import ImageVersions
from deployctl.features.preflight.pairing import releases
from deployctl.probes.versions import parse_version_info
from tests.features.preflight.test_rules import cluster, findings, of, upd

SAMPLES = Path(__file__).resolve().parents[2] / "samples" / "ascend" / "versions"


def sample(name: str):
    return parse_version_info((SAMPLES / name).read_text())


CANN_83 = sample("ascend_toolkit_install.info_cann-8.3.RC2_aarch64.txt")      # lists C15, C18-C21, C23
DRIVER_25 = sample("driver_version.info_25.0.rc1.1.txt")                     # C21
DRIVER_241 = sample("driver_version.info_24.1.rc2.2.txt")                    # C18; lists C30, C13, C15, C17, C18
# a CANN whose install file lists only C21 and C23 (the shape of test_versions.py's mismatch case)
CANN_NEW = parse_version_info("package_name=Ascend-cann-toolkit\nversion=9.0.0\ninnerversion=V100R001C25SPC001B212\n"
                              "compatible_version=[V100R001C21],[V100R001C23]\n")


def with_image(cann, driver, **packages):
    facts = cluster(2)
    iv = ImageVersions(present=True, cann=cann, cann_file="/usr/local/Ascend/ascend-toolkit/latest/aarch64-linux/"
                       "ascend_toolkit_install.info", packages=packages)
    return {name: upd(h, driver=driver, image_versions=iv) for name, h in facts.items()}


def test_a_cann_and_driver_that_list_each_other_pass():
    assert of(findings(with_image(CANN_83, DRIVER_25)), "image-pairing") == []
    assert of(findings(with_image(CANN_83, DRIVER_241)), "image-pairing") == []


def test_a_cann_the_driver_does_not_list_and_that_lists_not_the_driver_fails_on_the_host():
    facts = with_image(CANN_NEW, DRIVER_25)          # C21 is listed by the CANN: node1 passes
    facts["node2"] = upd(facts["node2"], driver=DRIVER_241)
    fs = [f for f in findings(facts) if f.rule == "image-pairing"]
    assert [(f.severity, f.host) for f in fs] == [("FAIL", "node2")]
    assert "CANN 9.0.0 (V100R001C25SPC001B212)" in fs[0].message and "V100R001C21, V100R001C23" in fs[0].message
    assert "driver 24.1.rc2.2 (V100R001C18SPC001B233)" in fs[0].message and "HDK" in fs[0].hint


def test_the_image_not_read_or_not_there():
    facts = cluster(2)
    facts["node1"] = upd(facts["node1"], image_versions=None, probe_errors={"image.versions": "exit 125: docker: "
                                                                            "Error response from daemon"})
    facts["node2"] = upd(facts["node2"], image_present=False, image_versions=ImageVersions(present=False))
    assert of(findings(facts), "image-pairing") == [("WARN", "node1", None)]
    no_cann = with_image(None, DRIVER_25, torch_npu="2.7.1")
    assert of(findings(no_cann), "image-pairing") == [("WARN", "node1", None), ("WARN", "node2", None)]


def test_every_release_names_its_source_and_what_it_pairs():
    for rel in releases():
        assert rel["name"] and rel["source"] and rel["when"] and rel["pairs"], rel


CANN_910 = parse_version_info("package_name=Ascend-cann-toolkit\nversion=9.1.0\ninnerversion=V100R001C10SPC002B210\n"
                              "compatible_version=[V100R001C21],[V100R001C22],[V100R001C23],[V100R001C25],"
                              "[V100R001C10]\n")
DRIVER_26 = parse_version_info("Version=26.0.rc1\nInnerversion=V100R001C10SPC001B220\n"
                               "compatible_version=[V100R001C21],[V100R001C22],[V100R001C23],[V100R001C25],"
                               "[V100R001C10]\ncompatible_version_fw=[7.0.0,8.9.9]\npackage_version=26.0.rc1\n")


def test_a_vllm_ascend_image_with_another_cann_or_torch_npu_than_its_release_is_a_warning_citing_the_matrix():
    ok = with_image(CANN_910, DRIVER_25, vllm_ascend="0.23.0", torch_npu="2.10.0.post4")
    assert of(findings(ok), "image-pairing") == []
    # v0.18.0's torch_npu carries a local suffix in the image (2.9.0.post1+git4c901a4): the same version
    suffixed = with_image(CANN_83, DRIVER_25, vllm_ascend="0.18.0", torch_npu="2.9.0.post1+git4c901a4")
    fs = [f for f in findings(suffixed) if f.rule == "image-pairing"]
    assert [(f.severity, f.host) for f in fs] == [("WARN", "node1"), ("WARN", "node2")]
    assert fs[0].message.endswith("here: CANN 8.3.RC2 (the release pairs CANN 8.5.1)")
    assert "versioning_policy.md L32" in fs[0].message


def test_a_motor_3_1_image_on_another_hdk_fails_naming_the_hdk_it_pairs_with():
    assert of(findings(with_image(CANN_910, DRIVER_26, mindie_motor="3.1.0")), "image-pairing") == []
    fs = [f for f in findings(with_image(CANN_910, DRIVER_25, mindie_motor="3.1.0")) if f.rule == "image-pairing"]
    assert [(f.severity, f.host) for f in fs] == [("FAIL", "node1"), ("FAIL", "node2")]
    assert "driver 25.0.rc1.1 (V100R001C21SPC002B220) (the release pairs HDK 26.0.RC1)" in fs[0].message
    assert "release_note_motor.md" in fs[0].message and fs[0].hint == "install HDK 26.0.RC1 (driver + firmware) on this node"
