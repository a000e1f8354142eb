"""The Atlas hardware a MindIE image is built for, from Ascend Hub's tags: ``<version>-800I-A2-py311-...`` /
``<version>-800I-A3-...`` (and ``300I-Duo`` builds):
https://www.hiascend.com/developer/ascendhub/detail/af85b724a7e5469ebd7ea13c3439d48f (the published deployments this
project checks use them, e.g. ``mindie:2.2.RC1-800I-A2-py311-openeuler24.03-lts``)."""

from __future__ import annotations

import re

from deployctl.core.engine_spec.image_hardware import image_tag

_TAG = re.compile(r"(?:^|-)(?:800[IT]-(A2|A3)|(300I-Duo))(?:-|$)", re.I)


def hardware(image: str) -> str | None:
    """'a2', 'a3' or '310p' from a MindIE image tag; None when the tag does not say."""
    m = _TAG.search(image_tag(image)[1])
    if not m:
        return None
    return m.group(1).lower() if m.group(1) else "310p"
