"""What the engine image ships, read on the host without starting the engine: its CANN toolkit's install file and
the versions of the Python packages the engine spec names (image_packages: torch_npu, the engine's own), so
preflight can pair them with the host's driver before an hour-long HCCL timeout does.

The image is started with a fixed shell script as its entrypoint (never its own), without network and without NPU
devices, and removed again (``docker run --rm``); an image that is not on the host is not pulled. The image and the
script are arguments of a fixed outer script, never spliced into it. What the image prints is untrusted: the parser
keeps the marked sections only, bounded, into typed values.

File format: the CANN toolkit's ``ascend_toolkit_install.info`` (``version=``, ``innerversion=``,
``compatible_version=``; samples in tests/samples/ascend/versions/, e.g. CANN 8.3.RC2's; parsed by
``versions.parse_version_info``).
"""

from __future__ import annotations

import re

from deployctl.core.models.facts import ImageVersions
from deployctl.probes.fact import Fact
from deployctl.probes.versions import parse_version_info

# inside the image: the first CANN toolkit install file found (the toolkit's `latest` link first, then any
# installed version), then the installed version of each package named in the arguments (importlib.metadata)
INNER = r"""for f in /usr/local/Ascend/ascend-toolkit/latest/*-linux/ascend_toolkit_install.info \
 /usr/local/Ascend/ascend-toolkit/*/*-linux/ascend_toolkit_install.info \
 /usr/local/Ascend/cann/*-linux/ascend_toolkit_install.info /usr/local/Ascend/cann-*/*-linux/ascend_toolkit_install.info; do
  if [ -f "$f" ]; then echo "@@cann $f"; head -c 4096 "$f"; echo; break; fi
done
if command -v python3 >/dev/null 2>&1 && [ "$#" -gt 0 ]; then
  python3 -c 'import sys
from importlib import metadata
for name in sys.argv[1:]:
    try:
        print("@@pkg", name, metadata.version(name))
    except Exception:
        pass' "$@" 2>/dev/null
fi
echo "@@end"
"""
# on the host: an image that is not there is said so (preflight's image check names it), never pulled; the image,
# the script and the package names are arguments
OUTER = ('img="$1"; script="$2"; shift 2; '
         'docker image inspect --format "{{.Id}}" "$img" >/dev/null 2>&1 || { echo "@@absent"; exit 0; }; '
         'exec docker run --rm --network none --entrypoint /bin/sh "$img" -c "$script" sh "$@"')
MAX_SECTION = 4096
_MARK = re.compile(r"^@@(cann|pkg|absent|end)(?: (.*))?$")
_PKG = re.compile(r"^([A-Za-z0-9_]{1,64}) ([A-Za-z0-9][A-Za-z0-9._+~-]{0,63})$")


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
        if kind == "cann" and kind not in sections:
            current = []
            sections[kind] = (rest[:256], current)
        elif kind == "pkg":
            p = _PKG.match(rest.strip())
            if p and len(packages) < 16:
                packages.setdefault(p.group(1), p.group(2))
    cann = sections.get("cann")
    return ImageVersions(present=True, cann=parse_version_info("\n".join(cann[1])) if cann else None,
                         cann_file=cann[0] if cann else None, packages=packages)


IMAGE_VERSIONS: Fact[ImageVersions] = Fact(
    "image-versions", lambda image, packages=(): ["sh", "-c", OUTER, "sh", str(image), INNER, *map(str, packages)],
    parse_image_versions)
