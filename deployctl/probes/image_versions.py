"""What the engine image ships, read on the host without starting the engine: its CANN toolkit's install file,
MindIE's version file and the versions of the Python packages that must pair with the host (torch_npu, torch, vllm,
vllm_ascend), so preflight can pair them with the host's driver before an hour-long HCCL timeout does.

The image is started with a fixed shell script as its entrypoint (never its own), without network and without NPU
devices, and removed again (``docker run --rm``); an image that is not on the host is not pulled. The image and the
script are arguments of a fixed outer script, never spliced into it. What the image prints is untrusted: the parser
keeps the marked sections only, bounded, into typed values.

File formats: the CANN toolkit's ``ascend_toolkit_install.info`` (``version=``, ``innerversion=``,
``compatible_version=``; samples in tests/samples/ascend/versions/, e.g. CANN 8.3.RC2's; parsed by
``versions.parse_version_info``) and MindIE's ``version.info`` (``key : value`` lines, same folder).
"""

from __future__ import annotations

import re

from deployctl.core.models.facts import ImageVersions
from deployctl.probes.fact import Fact
from deployctl.probes.versions import parse_version_info

# inside the image: the first CANN toolkit install file found (the toolkit's `latest` link first, then any
# installed version), MindIE's version file, then each package's installed version (importlib.metadata)
INNER = r"""for f in /usr/local/Ascend/ascend-toolkit/latest/*-linux/ascend_toolkit_install.info \
 /usr/local/Ascend/ascend-toolkit/*/*-linux/ascend_toolkit_install.info \
 /usr/local/Ascend/cann/*-linux/ascend_toolkit_install.info /usr/local/Ascend/cann-*/*-linux/ascend_toolkit_install.info; do
  if [ -f "$f" ]; then echo "@@cann $f"; head -c 4096 "$f"; echo; break; fi
done
for f in /usr/local/Ascend/mindie/latest/version.info; do
  if [ -f "$f" ]; then echo "@@mindie $f"; head -c 4096 "$f"; echo; fi
done
if command -v python3 >/dev/null 2>&1; then
  python3 -c 'import sys
from importlib import metadata
for name in sys.argv[1:]:
    try:
        print("@@pkg", name, metadata.version(name))
    except Exception:
        pass' torch_npu torch vllm vllm_ascend mindie_motor 2>/dev/null
fi
echo "@@end"
"""
# on the host: an image that is not there is said so (preflight's image check names it), never pulled
OUTER = ('docker image inspect --format "{{.Id}}" "$1" >/dev/null 2>&1 || { echo "@@absent"; exit 0; }; '
         'exec docker run --rm --network none --entrypoint /bin/sh "$1" -c "$2"')
PACKAGES = ("torch_npu", "torch", "vllm", "vllm_ascend", "mindie_motor")     # and "mindie", from its version.info
MAX_SECTION = 4096
_MARK = re.compile(r"^@@(cann|mindie|pkg|absent|end)(?: (.*))?$")
_PKG = re.compile(r"^([a-z_]+) ([A-Za-z0-9][A-Za-z0-9._+~-]{0,63})$")


def parse_image_versions(text: str) -> ImageVersions:
    """The marked sections of the script's output as ImageVersions.

    Raises:
        ValueError: the script did not run to its end (no ``@@end`` and no ``@@absent``), or a version file that
            was found does not parse.
    """
    lines = text.splitlines()
    if any(line.strip() == "@@absent" for line in lines):
        return ImageVersions(present=False)
    if not any(line.strip() == "@@end" for line in lines):
        raise ValueError("the image's version script did not finish (no @@end line): "
                         f"{(text.strip().splitlines() or ['no output'])[-1][:120]!r}")
    sections: dict[str, tuple[str, list[str]]] = {}
    packages: dict[str, str] = {}
    current: list[str] | None = None
    for line in lines:
        m = _MARK.match(line.rstrip("\r"))
        if m is None:
            if current is not None and sum(len(x) + 1 for x in current) < MAX_SECTION:
                current.append(line)
            continue
        kind, rest = m.group(1), (m.group(2) or "")
        current = None
        if kind in ("cann", "mindie") and kind not in sections:
            current = []
            sections[kind] = (rest[:256], current)
        elif kind == "pkg":
            p = _PKG.match(rest.strip())
            if p and p.group(1) in PACKAGES:
                packages.setdefault(p.group(1), p.group(2))
    cann = sections.get("cann")
    if "mindie" in sections:
        mindie = mindie_version("\n".join(sections["mindie"][1]))
        if mindie:
            packages.setdefault("mindie", mindie)
    return ImageVersions(present=True, cann=parse_version_info("\n".join(cann[1])) if cann else None,
                         cann_file=cann[0] if cann else None, packages=packages)


def mindie_version(text: str) -> str | None:
    """MindIE's ``version.info`` (``key : value`` lines, e.g. ``mindie-llm: 2.1.RC1.B152``; sample in
    tests/samples/ascend/versions/): the mindie-llm version, else the one ``Ascend-mindie`` names."""
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields[key.strip().lower()] = value.strip().removeprefix("MindIE ").strip()
    for key in ("mindie-llm", "ascend-mindie"):
        v = fields.get(key, "")
        if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._+~-]{0,63}", v):
            return v
    return None


IMAGE_VERSIONS: Fact[ImageVersions] = Fact(
    "image-versions", lambda image: ["sh", "-c", OUTER, "sh", str(image), INNER], parse_image_versions)
