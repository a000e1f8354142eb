"""Version-file parsers and driver/firmware/CANN compatibility checks on the real samples (ascend-facts §4)."""

from __future__ import annotations

from pathlib import Path

import pytest
from transcripts import section
from hypothesis import given
from hypothesis import strategies as st

from deployctl.core.engines.mindie.version_info import parse_mindie_version
from deployctl.probes.versions import (
    cann_fits_driver,
    driver_fits_firmware,
    firmware_fits_driver,
    parse_version_info,
    version_key,
)

SAMPLES = Path(__file__).resolve().parent.parent / "samples" / "ascend"
VERSIONS = SAMPLES / "versions"
TOOLKIT_INFO = "/usr/local/Ascend/ascend-toolkit/latest/aarch64-linux/ascend_toolkit_install.info"



def load(name: str):
    return parse_version_info((VERSIONS / name).read_text())


def info(text: str):
    return parse_version_info(text)


# --------------------------------------------------------------------------- driver files


@pytest.mark.parametrize("name, version, inner, fw_range, codes", [
    ("driver_version.info_23.0.7.txt", "23.0.7", "V100R001C15SPC012B220", ("7.0.0", "7.1.99"),
     ["V100R001C29", "V100R001C30", "V100R001C13", "V100R001C15"]),
    ("driver_version.info_24.1.rc2.2.txt", "24.1.rc2.2", "V100R001C18SPC001B233", ("7.0.0", "7.2.99"),
     ["V100R001C30", "V100R001C13", "V100R001C15", "V100R001C17", "V100R001C18"]),
    ("driver_version.info_24.1.rc3.txt", "24.1.rc3", "V100R001C19SPC001B124", ("7.0.0", "7.5.99"),
     ["V100R001C13", "V100R001C15", "V100R001C17", "V100R001C18", "V100R001C19"]),
    ("driver_version.info_25.0.rc1.1.txt", "25.0.rc1.1", "V100R001C21SPC002B220", ("7.0.0", "7.7.99"),
     ["V100R001C17", "V100R001C18", "V100R001C19", "V100R001C20", "V100R001C21"]),
    ("driver_version.info_25.3.rc1.txt", "25.3.rc1", "V100R001C23SPC002B212", ("7.0.0", "8.9.9"),
     ["V100R001C19", "V100R001C20", "V100R001C21", "V100R001C22", "V100R001C23"]),
])
def test_driver_version_files(name, version, inner, fw_range, codes):
    drv = load(name)
    assert (drv.version, drv.package_version, drv.package, drv.innerversion) == (version, version, version, inner)
    assert drv.compatible_version_fw == (fw_range,)
    assert drv.compatible_version == tuple((c, c) for c in codes)
    assert drv.compatible_version_drv == ()
    assert drv.raw["tsfw_version"] == "1.0" and drv.raw["ascendhal_version"].startswith("7.35.")


@pytest.mark.parametrize("name, version, package, drv_ranges", [
    ("firmware_version.info_7.1.0.11.220_pkg23.0.7.txt", "7.1.0.11.220", "23.0.7",
     (("23.0.rc3", "23.0.rc3."), ("23.0.0", "23.0.0."))),
    ("firmware_version.info_7.5.0.1.129_pkg24.1.rc3.txt", "7.5.0.1.129", "24.1.rc3",
     (("23.0.0", "23.0.0."), ("24.0", "24.0."), ("24.1", "24.1."))),
    ("firmware_version.info_7.7.0.1.231_pkg25.0.rc1.1.txt", "7.7.0.1.231", "25.0.rc1.1",
     (("23.0.0", "23.0.0."), ("24.0", "24.0."), ("24.1", "24.1."), ("25.0", "25.0."))),
])
def test_firmware_version_files(name, version, package, drv_ranges):
    fw = load(name)
    assert (fw.version, fw.package_version, fw.innerversion) == (version, package, None)
    assert fw.compatible_version_drv == drv_ranges
    assert fw.compatible_version_fw == () and fw.raw["firmware_version"] == "1.0"


def test_cann_install_info_files():
    c80 = load("ascend_toolkit_install.info_cann-8.0.0_aarch64.txt")
    assert (c80.version, c80.innerversion, c80.package_version) == ("8.0.0", "V100R001C20SPC001B251", None)
    assert [lo for lo, _ in c80.compatible_version] == [f"V100R001C{n}" for n in (15, 17, 18, 19, 20)]
    assert c80.raw["arch"] == "aarch64" and c80.raw["path"] == "/usr/local/Ascend/ascend-toolkit/8.0.0/aarch64-linux"
    c83 = load("ascend_toolkit_install.info_cann-8.3.RC2_aarch64.txt")
    assert (c83.version, c83.innerversion) == ("8.3.RC2", "V100R001C23SPC002B210")
    assert [lo for lo, _ in c83.compatible_version] == [f"V100R001C{n}" for n in (15, 18, 19, 20, 21, 23)]


def test_toolkit_version_info_with_quoted_values():
    tk = load("ascend-toolkit_toolkit_version.info_8.2.RC1.txt")
    assert tk.version == "8.2.0.0.201" and tk.raw["version_dir"] == "8.2.RC1"
    assert tk.raw["required_package_hccl_version"] == "8.2"
    assert tk.raw["required_package_opp_kernel_version"] == ">=7.6, <=8.2"


def test_driver_template_has_no_version_and_crlf_is_tolerated():
    text = (VERSIONS / "hicann-driver_itf_ver.conf_template.txt").read_bytes().decode()   # keep the CRs
    assert "\r" in text
    with pytest.raises(ValueError, match="Version="):
        parse_version_info(text)
    drv = parse_version_info("Version=25.5.0\r\n" + text)
    assert drv.compatible_version_fw == (("7.0.0", "8.9.9"),) and drv.package_version is None
    assert drv.compatible_version == () and drv.innerversion == "V100R001C23B888"


def test_faultdiag_transcripts_driver_firmware_toolkit_nnae():
    for path in (SAMPLES / "hccn" / "faultdiag_npu_info_after_910A_alarm_versions.txt",
                 SAMPLES / "hccn" / "faultdiag_worker0_npu_info_before.txt"):
        drv = info(section(path, "cat /usr/local/Ascend/driver/version.info"))
        fw = info(section(path, "cat /usr/local/Ascend/firmware/version.info"))
        tk = info(section(path, f"cat {TOOLKIT_INFO}"))
        nnae = info(section(path, "cat /usr/local/Ascend/nnae/latest/ascend_nnae_install.info"))
        assert (drv.version, drv.compatible_version_fw) == ("23.0.7", (("7.0.0", "7.1.99"),))
        assert (fw.version, fw.package) == ("7.1.0.11.220", "23.0.7")
        assert (tk.version, tk.innerversion) == ("7.0.T10", "V100R001C13B222")
        assert tk.compatible_version[-1] == ("V100R003C11", "V100R003C11")
        assert nnae.version == "8.0.RC3"
        assert nnae.compatible_version == (("V100R001C13", "V100R001C19"), ("V100R001C30", "V100R001C30"))
        assert firmware_fits_driver(drv, fw)


@pytest.mark.parametrize("text, message", [
    ("", "Version="),
    ("Version=1.0\nnot a key value line\n", "line 2"),
    ("Version=1.0\nVersion=1.1\n", "twice"),
    ("Version=25.0.rc1.1\ncompatible_version_fw=7.0.0,7.7.99\n", r"\[lo,hi\]"),
    ("Version=25.0.rc1.1\ncompatible_version_fw=[7.0.0,7.5.0,7.7.99]\n", r"\[lo,hi\]"),
    ("Version=25.0.rc1.1\ncompatible_version_fw=[7.0.0,]\n", r"\[lo,hi\]"),
])
def test_version_info_errors(text, message):
    with pytest.raises(ValueError, match=message):
        parse_version_info(text)


# --------------------------------------------------------------------------- MindIE


@pytest.mark.parametrize("name, version", [("mindie_version.info_2.1.RC1.B152.txt", "2.1.RC1.B152"),
                                           ("mindie_version.info_2.1.RC2.B080.txt", "2.1.RC2.B080")])
def test_mindie_version_files(name, version):
    mindie = parse_mindie_version((VERSIONS / name).read_text())
    assert (mindie.version, mindie.platform) == (version, "aarch64")
    assert mindie.components == {k: version for k in
                                 ("mindie-rt", "mindie-torch", "mindie-service", "mindie-llm", "mindie-sd")}


def test_mindie_version_errors():
    with pytest.raises(ValueError, match="Ascend-mindie"):
        parse_mindie_version("    Ascend-cann-atb : 8.2.RC2\n    Platform : aarch64\n")
    with pytest.raises(ValueError, match="key : value"):
        parse_mindie_version("MindIE 2.1\n")


# --------------------------------------------------------------------------- driver <-> firmware (§4.3 pairs)


def test_driver_25_0_rc1_1_with_firmware_7_7_0_1_231():
    drv, fw = load("driver_version.info_25.0.rc1.1.txt"), load("firmware_version.info_7.7.0.1.231_pkg25.0.rc1.1.txt")
    assert firmware_fits_driver(drv, fw)
    assert driver_fits_firmware(fw, drv)


def test_driver_23_0_7_with_firmware_7_1_0_11_220():
    drv, fw = load("driver_version.info_23.0.7.txt"), load("firmware_version.info_7.1.0.11.220_pkg23.0.7.txt")
    assert firmware_fits_driver(drv, fw)
    # applied as written, [23.0.0,23.0.0.] does not cover 23.0.7 although HDK 23.0.7 ships both
    assert not driver_fits_firmware(fw, drv)


def test_driver_24_1_rc2_rejects_firmware_7_3_0_1_231():
    drv = load("driver_version.info_24.1.rc2.2.txt")
    fw = info("Version=7.3.0.1.231\nfirmware_version=1.0\npackage_version=24.1.rc2\n"
              "compatible_version_drv=[23.0.0,23.0.0.],[24.0,24.0.],[24.1,24.1.]\n")
    assert not firmware_fits_driver(drv, fw)       # range [7.0.0,7.2.99]: "driver and firmware packages do not match"
    assert driver_fits_firmware(fw, drv)           # the firmware side alone would not catch it


def test_driver_24_1_rc3_with_firmware_7_5_0_1_129():
    drv, fw = load("driver_version.info_24.1.rc3.txt"), load("firmware_version.info_7.5.0.1.129_pkg24.1.rc3.txt")
    assert firmware_fits_driver(drv, fw) and driver_fits_firmware(fw, drv)


def test_driver_25_3_rc1_wide_range_and_old_firmware_rejects_it():
    drv = load("driver_version.info_25.3.rc1.txt")
    fw = load("firmware_version.info_7.7.0.1.231_pkg25.0.rc1.1.txt")
    assert firmware_fits_driver(drv, fw)                      # [7.0.0,8.9.9]
    assert firmware_fits_driver(drv, info("Version=7.8.0.2.212\n"))
    assert not driver_fits_firmware(fw, drv)                  # 25.3 is not in 7.7.0.1.231's list


@pytest.mark.parametrize("driver, ok", [
    ("25.0.rc1.1", True), ("25.0.RC1", True), ("25.0.0", True), ("24.1.rc3", True), ("24.1.RC2.2", True),
    ("24.0.0", True), ("23.0.0", True), ("25.2.0", False), ("25.5.1", False), ("23.0.7", False),
    ("24.10.0", False), ("22.0.0", False), ("26.0.rc1", False),
])
def test_firmware_7_7_0_1_231_driver_list(driver, ok):
    fw = load("firmware_version.info_7.7.0.1.231_pkg25.0.rc1.1.txt")
    assert driver_fits_firmware(fw, info(f"Version={driver}\npackage_version={driver}\n")) is ok


def test_driver_without_package_version_falls_back_to_version():
    fw = load("firmware_version.info_7.5.0.1.129_pkg24.1.rc3.txt")
    drv = info("Version=24.1.RC1\ncompatible_version_fw=[7.0.0,7.2.99]\n")
    assert drv.package == "24.1.RC1" and driver_fits_firmware(fw, drv)


def test_several_firmware_ranges_and_boundaries():
    drv = info("Version=25.0.rc1.1\ncompatible_version_fw=[6.4.0,6.4.99],[7.0.0,7.7.99]\n")
    assert drv.compatible_version_fw == (("6.4.0", "6.4.99"), ("7.0.0", "7.7.99"))
    for fw, ok in [("6.4.12.1.100", True), ("6.5.0.1.1", False), ("7.0.0.0.0", True), ("7.7.99.1.1", True),
                   ("7.8.0.2.212", False), ("6.3.0.1.1", False)]:
        assert firmware_fits_driver(drv, info(f"Version={fw}\n")) is ok, fw


def test_general_ranges_in_compatible_version_drv():
    fw = info("Version=7.9.0.1.1\ncompatible_version_drv=[24.1.rc1,25.0.],[25.2.0,25.3.rc1]\n")
    for drv, ok in [("24.1.rc1", True), ("24.1.0", True), ("25.0.rc1.1", True), ("25.1.0", False),
                    ("25.2.0", True), ("25.3.rc1", True), ("25.3.0", False), ("24.0.0", False)]:
        assert driver_fits_firmware(fw, info(f"Version={drv}\n")) is ok, drv


def test_compatibility_needs_the_lists():
    with pytest.raises(ValueError, match="compatible_version_fw"):
        firmware_fits_driver(info("Version=24.1.rc1\n"), info("Version=7.1.0.11.220\n"))
    with pytest.raises(ValueError, match="compatible_version_drv"):
        driver_fits_firmware(info("Version=7.1.0.11.220\n"), info("Version=24.1.rc1\n"))
    with pytest.raises(ValueError, match="three numeric fields"):
        firmware_fits_driver(load("driver_version.info_23.0.7.txt"), info("Version=7.1\n"))


# --------------------------------------------------------------------------- CANN <-> driver (inferred rule)


def test_cann_driver_observed_pairs():
    c80 = load("ascend_toolkit_install.info_cann-8.0.0_aarch64.txt")
    c83 = load("ascend_toolkit_install.info_cann-8.3.RC2_aarch64.txt")
    assert cann_fits_driver(load("driver_version.info_24.1.rc3.txt"), c80)     # C19 listed by CANN 8.0.0
    assert cann_fits_driver(load("driver_version.info_23.0.7.txt"), c80)       # C15 listed by CANN 8.0.0
    assert cann_fits_driver(load("driver_version.info_25.0.rc1.1.txt"), c83)   # C21 listed by CANN 8.3.RC2
    tk = info(section(SAMPLES / "hccn" / "faultdiag_worker0_npu_info_before.txt", f"cat {TOOLKIT_INFO}"))
    assert cann_fits_driver(load("driver_version.info_23.0.7.txt"), tk)        # C13 listed by the driver


def test_cann_driver_mismatch_and_ranges():
    drv = load("driver_version.info_24.1.rc2.2.txt")     # C18, lists C30,C13,C15,C17,C18
    new_cann = info("version=9.0.0\ninnerversion=V100R001C25SPC001B212\n"
                    "compatible_version=[V100R001C21],[V100R001C23]\n")
    assert not cann_fits_driver(drv, new_cann)
    ranged = info("version=8.0.RC3\ninnerversion=V100R001C19SPC001B137\ncompatible_version=[V100R001C13,V100R001C19]\n")
    assert cann_fits_driver(drv, ranged)                 # C18 inside [C13,C19]
    with pytest.raises(ValueError, match="innerversion"):
        cann_fits_driver(info("Version=24.1.rc1\n"), ranged)


# --------------------------------------------------------------------------- ordering


@pytest.mark.parametrize("lower, higher", [
    ("25.0.rc1", "25.0.0"), ("25.0.rc1", "25.0.rc1.1"), ("24.1.RC2", "24.1.rc3"), ("23.0.7", "24.1.rc1"),
    ("7.7.0.1.231", "7.8.0.2.212"), ("8.0.T63", "8.0.RC1"), ("24.1", "24.1.rc3"), ("24.1.rc3", "24.10.0"),
])
def test_version_key_order(lower, higher):
    assert version_key(lower) < version_key(higher)


def test_version_key_case_insensitive_and_errors():
    assert version_key("24.1.RC2") == version_key("24.1.rc2")
    for bad in ("", "25..0", "9.0.0-beta.2", "v25.0"):
        with pytest.raises(ValueError, match="cannot order"):
            version_key(bad)


@given(st.lists(st.integers(0, 999), min_size=1, max_size=6), st.lists(st.integers(0, 999), min_size=1, max_size=6))
def test_version_key_orders_numeric_versions_like_tuples(a, b):
    key_a, key_b = version_key(".".join(map(str, a))), version_key(".".join(map(str, b)))
    assert (key_a < key_b) == (tuple(a) < tuple(b))
