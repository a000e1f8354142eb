"""MindIE's own version file in an image (`/usr/local/Ascend/mindie/latest/version.info`)."""

from __future__ import annotations

from deployctl.core.models.base import Frozen
from deployctl.core.textsafe import first_line as _snippet


class MindieVersion(Frozen):
    """`mindie/latest/version.info` (`Ascend-mindie : MindIE 2.1.RC2.B080`, one line per component)."""

    version: str                          # 2.1.RC2.B080
    components: dict[str, str]            # mindie-rt, mindie-llm, ... -> version
    platform: str | None = None


def parse_mindie_version(text: str) -> MindieVersion:
    """Parse ``/usr/local/Ascend/mindie/latest/version.info``.

    Expected: ``Ascend-mindie : MindIE 2.1.RC2.B080``, then ``<component>: <version>`` lines and
    ``Platform : aarch64``.
    """
    version: str | None = None
    platform: str | None = None
    components: dict[str, str] = {}
    for line in text.splitlines():
        s = line.strip()
        if not s:
            continue
        key, colon, value = (p.strip() for p in s.partition(":"))
        if not colon:
            raise ValueError(f"mindie version.info: expected `key : value`, got {s[:80]!r}")
        if key == "Ascend-mindie":
            version = value.removeprefix("MindIE").strip()
        elif key == "Platform":
            platform = value
        else:
            components[key] = value
    if not version:
        raise ValueError(f"mindie version.info: expected `Ascend-mindie : MindIE <version>`, got {_snippet(text)}")
    return MindieVersion(version=version, components=components, platform=platform)


# --------------------------------------------------------------------------- ordering
