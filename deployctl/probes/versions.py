"""Parsers for the driver, firmware and CANN version files, the facts reading the host's driver and firmware
files, and the compatibility checks.

Owns the version ordering used by deployctl (``version_key``) and the driver <-> firmware rules read from the
version.info files (template: hicann/driver@ef377e95 scripts/package/custom/driver/common/conf/itf_ver.conf; real
files: Ascend/mind-cluster@22bb3d98 component/ascend-faultdiag/test/st_module_testcase/kg_parse/npu_info_after.txt,
itove/ascend@78ca5993 mdbook/src/ver-2.1.md): the firmware must sit in the driver's ``compatible_version_fw``, the
driver in the firmware's ``compatible_version_drv``. All functions are pure; malformed input raises ValueError.
"""

from __future__ import annotations

import re

from deployctl.core.models.facts import VersionInfo, VersionRange
from deployctl.probes.fact import Fact

_RANGE = re.compile(r"\[([^\[\]]*)\]")
_RANGE_LIST = re.compile(r"^\s*\[[^\[\]]*\](\s*,\s*\[[^\[\]]*\])*\s*$")
_FIELD = re.compile(r"^([a-z]*)(\d+)$")
# rank of a field's letter prefix: a GA number sorts after rcN, which sorts after trial/build tags
_PREFIX_RANK = {"": 3, "rc": 2, "t": 1, "b": 1}
_INNER_CODE = re.compile(r"^V(\d+)R(\d+)C(\d+)")
_RANGE_KEYS = ("compatible_version", "compatible_version_fw", "compatible_version_drv")


from deployctl.core.textsafe import first_line as _snippet  # noqa: E402


# --------------------------------------------------------------------------- parsing


def parse_version_info(text: str) -> VersionInfo:
    """Parse a ``key=value`` version file.

    Covers ``/usr/local/Ascend/driver/version.info``, ``/usr/local/Ascend/firmware/version.info``,
    CANN ``ascend_toolkit_install.info`` / ``ascend_nnae_install.info`` (lower-case ``version=``) and
    ``toolkit/version.info``. Leading indentation, CRLF, blank and ``#`` lines are tolerated;
    double-quoted values are unquoted. ``compatible_version*`` values are ``[a,b],[c]`` lists.

    Raises:
        ValueError: no ``Version=`` line, a line without ``=``, a repeated key, a malformed range list.
    """
    raw: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), start=1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        key, eq, value = s.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"version.info line {lineno}: expected `key=value`, got {s[:80]!r}")
        key, value = key.strip(), value.strip()
        if len(value) >= 2 and value[0] == value[-1] == '"':
            value = value[1:-1]
        if key in raw:
            raise ValueError(f"version.info line {lineno}: key {key!r} appears twice")
        raw[key] = value
    lower = {k.lower(): v for k, v in raw.items()}
    if not lower.get("version"):
        raise ValueError(f"version.info: expected a `Version=<version>` line, got {_snippet(text)}")
    ranges = {k: _ranges(lower[k], k) if lower.get(k) else () for k in _RANGE_KEYS}
    return VersionInfo(version=lower["version"], package_version=lower.get("package_version") or None,
                       innerversion=lower.get("innerversion") or None, raw=raw, **ranges)


def _ranges(value: str, key: str) -> tuple[VersionRange, ...]:
    if not _RANGE_LIST.match(value):
        raise ValueError(f"version.info {key}: expected `[lo,hi],[x],...`, got {value!r}")
    out = []
    for inner in _RANGE.findall(value):
        parts = [p.strip() for p in inner.split(",")]
        if len(parts) > 2 or not all(parts):
            raise ValueError(f"version.info {key}: expected `[lo,hi]` or `[x]`, got [{inner}]")
        out.append((parts[0], parts[-1]))
    return tuple(out)


def version_key(version: str) -> tuple[tuple[int, int], ...]:
    """A sort key for Ascend versions: ``25.0.rc1.1``, ``24.1.RC2``, ``23.0.7``, ``7.7.0.1.231``, ``8.0.T63``.

    Dot-separated fields compare left to right; a plain number sorts after ``rcN`` (case-insensitive),
    which sorts after ``TN``/``BN``, so ``25.0.rc1 < 25.0.0``. A version that extends another sorts after
    it (``24.1 < 24.1.rc3``).

    Raises:
        ValueError: an empty field or one that is not ``<digits>``/``rc|t|b<digits>``.
    """
    key = []
    for field in version.strip().lower().split("."):
        m = _FIELD.match(field)
        if m is None or m.group(1) not in _PREFIX_RANK:
            raise ValueError(f"version {version!r}: cannot order field {field!r}")
        key.append((_PREFIX_RANK[m.group(1)], int(m.group(2))))
    return tuple(key)


def _numeric3(version: str, what: str) -> tuple[int, int, int]:
    fields = version.strip().split(".")[:3]
    if len(fields) < 3 or not all(f.isdigit() for f in fields):
        raise ValueError(f"{what} {version!r}: expected three numeric fields (like 7.7.0)")
    return int(fields[0]), int(fields[1]), int(fields[2])


# --------------------------------------------------------------------------- compatibility


def firmware_fits_driver(driver: VersionInfo, firmware: VersionInfo) -> bool:
    """Whether the firmware is inside the driver's ``compatible_version_fw`` (any of its ranges).

    Compares the first three numeric fields of the firmware ``Version`` with the bounds, inclusive:
    ``[7.0.0,7.7.99]`` accepts 7.7.0.1.231 and rejects 7.8.0.2.212. This is the check whose failure
    is reported as "driver and firmware packages do not match" (a public report of driver 24.1.rc2 with firmware
    7.3.0.1.231 whose repository is not recorded: unverified).

    Raises:
        ValueError: the driver file has no ``compatible_version_fw``, or a version is not numeric.
    """
    if not driver.compatible_version_fw:
        raise ValueError(f"driver {driver.version}: version.info has no compatible_version_fw")
    fw = _numeric3(firmware.version, "firmware version")
    return any(_numeric3(lo, "compatible_version_fw bound") <= fw <= _numeric3(hi, "compatible_version_fw bound")
               for lo, hi in driver.compatible_version_fw)


def driver_fits_firmware(firmware: VersionInfo, driver: VersionInfo) -> bool:
    """Whether the driver is inside one of the firmware's ``compatible_version_drv`` ranges.

    The driver is its ``package_version`` (``Version`` when absent), case-insensitive. A
    ``[prefix,prefix.]`` range accepts the prefix and everything under it: ``[24.1,24.1.]`` accepts
    24.1.rc3 and 24.1.RC2.2, not 24.10.0 or 25.0.rc1. Other ranges are ``lo <= v <= hi`` by
    ``version_key``, a trailing ``.`` on ``hi`` again meaning "and everything under it".

    The rule is applied as written: firmware 7.1.0.11.220 (``[23.0.rc3,..],[23.0.0,23.0.0.]``)
    does not list driver 23.0.7 although HDK 23.0.7 ships both, so treat a False here as a warning
    and ``firmware_fits_driver`` as the blocking check.

    Raises:
        ValueError: the firmware file has no ``compatible_version_drv``, or a version cannot be ordered.
    """
    if not firmware.compatible_version_drv:
        raise ValueError(f"firmware {firmware.version}: version.info has no compatible_version_drv")
    v = driver.package.strip().lower()
    return any(_in_range(v, lo.strip().lower(), hi.strip().lower()) for lo, hi in firmware.compatible_version_drv)


def _in_range(v: str, lo: str, hi: str) -> bool:
    if version_key(v) < version_key(lo):
        return False
    if hi.endswith("."):
        return v.startswith(hi) or version_key(v) <= version_key(hi[:-1])
    return version_key(v) <= version_key(hi)


def cann_fits_driver(driver: VersionInfo, cann: VersionInfo) -> bool:
    """Whether CANN and driver declare each other: the CANN inner code is in the driver's
    ``compatible_version``, or the driver's is in the CANN's (the codes a driver declares:
    hicann/driver@ef377e95 scripts/package/custom/driver/common/compatible_version.conf).

    This rule is inferred from observed working pairs, not an official matrix: use it for a warning.
    Codes compare as (V, R, C) numbers, ``V100R001C21SPC002B220`` -> (100, 1, 21).

    Raises:
        ValueError: a missing ``innerversion`` or an inner code that is not ``V<n>R<n>C<n>...``.
    """
    d_code = _inner_code(driver.innerversion, "driver innerversion")
    c_code = _inner_code(cann.innerversion, "CANN innerversion")
    return _code_listed(c_code, driver.compatible_version) or _code_listed(d_code, cann.compatible_version)


def _inner_code(value: str | None, what: str) -> tuple[int, int, int]:
    m = _INNER_CODE.match(value or "")
    if m is None:
        raise ValueError(f"{what}: expected a code like V100R001C21, got {value!r}")
    return int(m.group(1)), int(m.group(2)), int(m.group(3))


def _code_listed(code: tuple[int, int, int], ranges: tuple[VersionRange, ...]) -> bool:
    return any(_inner_code(lo, "compatible_version") <= code <= _inner_code(hi, "compatible_version")
               for lo, hi in ranges)


# --------------------------------------------------------------------------- the facts

DRIVER_VERSION: Fact[VersionInfo] = Fact("driver-version", lambda: ["cat", "/usr/local/Ascend/driver/version.info"],
                                         parse_version_info)
FIRMWARE_VERSION: Fact[VersionInfo] = Fact("firmware-version",
                                           lambda: ["cat", "/usr/local/Ascend/firmware/version.info"],
                                           parse_version_info)
