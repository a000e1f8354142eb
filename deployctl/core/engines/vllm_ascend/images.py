"""The Atlas hardware a vLLM-Ascend image is built for, from the project's "Supported images": ``vllm-ascend:<version>``
and ``-openeuler`` for Atlas A2, ``-a3`` / ``-a3-openeuler`` for Atlas A3, ``-310p`` for Atlas 300I DUO, ``-950dt``
for Atlas 950DT (vllm-project/vllm-ascend@182b75ea docs/source/installation.md L321-330). The bare tag means A2 only
in the project's own repository (``.../ascend/vllm-ascend``, or a mirror of it): another repository's may mean
anything."""

from __future__ import annotations

import re

from deployctl.core.engine_spec.image_hardware import image_tag

_TAG = re.compile(r"^v?\d[^-]*(?:-(a3|310p|950dt))?(?:-openeuler)?$", re.I)


def hardware(image: str) -> str | None:
    """'a2', 'a3', '310p' or '950dt' from a vLLM-Ascend image tag; None when the tag does not say."""
    repo, tag = image_tag(image)
    m = _TAG.match(tag)
    if not m:
        return None
    if m.group(1):
        return m.group(1).lower()
    return "a2" if repo.lower().endswith("ascend/vllm-ascend") else None
