"""Every fact deployctl knows, by name: what tests/probes/test_facts.py walks with the fixtures of
tests/probes/fixtures/<name>/."""

from __future__ import annotations

from deployctl.probes import (containers, deployed, engine_load, hccn_tool, host, image_versions, infer, npu_smi,
                              npu_smi_watch, versions)
from deployctl.probes.fact import Fact

_MODULES = (npu_smi, hccn_tool, versions, host, containers, deployed, image_versions, engine_load, npu_smi_watch,
            infer)
ALL: tuple[Fact, ...] = tuple(f for m in _MODULES for f in vars(m).values() if isinstance(f, Fact))
FACTS: dict[str, Fact] = {f.name: f for f in ALL}
