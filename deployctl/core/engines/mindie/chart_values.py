"""MindIE's block of the `ascend-llm` chart's values (`mindie:`): the keys only templates/mindie-*.yaml read.

The common keys are deployctl/core/render/chart_values.py; the values are built in helm.py. Field names are the chart's.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from deployctl.core.engines.mindie.install import RUN_PACKAGE
from deployctl.core.render.chart_values import Resources
from deployctl.core.models.base import Frozen

OWNED_VALUES = ("ms",)    # rendered from the plan; kubernetes.values may not set mindie.ms


class RankTable(Frozen):
    source: Literal["deployctl", "cluster"] = "deployctl"
    configMapPrefix: str = Field("rings-config-", description="cluster source: the table of instance X is in "
                                                              "ConfigMap <prefix><fullname>-X (not created here)")
    waitSeconds: int = Field(600, ge=1, description="cluster source: how long a pod waits for status completed")


class Ports(Frozen):
    """Host ports (the pods use the host network, as HCCL and MindIE's rank table need)."""

    http: int = Field(1025, ge=1024, le=65535)
    management: int = Field(1026, ge=1024, le=65535)
    metrics: int = Field(1027, ge=1024, le=65535)
    interComm: int = Field(1121, ge=1024, le=65535)
    multiNode: int = Field(1120, ge=1024, le=65535)
    coordinator: int = Field(1035, ge=1024, le=65535)
    controller: int = Field(1045, ge=1024, le=65535)
    distBase: int = Field(10000, ge=1024, le=65000, description="pd-split decode: DP rank r of a pod serves on "
                                                                "distBase + 4r .. +3 (management: +1)")


class Ms(Frozen):
    """pd-split: MindIE-MS controller and coordinator (no NPU), pinned to one node."""

    enabled: bool = False
    node: str = ""
    env: dict[str, str] = Field(default_factory=dict)
    files: dict[str, str] = Field(default_factory=dict, description="ms_controller.json, ms_coordinator.json, "
                                                                      "global_ranktable.json, verbatim")


class Launchers(Frozen):
    """bash -c of each role, the same text bare metal's start.sh runs (engines/mindie/install.py, per version)."""

    server: str = Field(RUN_PACKAGE.launcher, description="one MindIE server")
    dpServer: str = Field(RUN_PACKAGE.dp_launcher, description="pd-split decode (distributed DP): one MindIE server "
                                                               "per DP rank of the pod, config<i>.json each")
    controller: str = Field(dict(RUN_PACKAGE.ms_launchers)["controller"], description="MindIE-MS controller")
    coordinator: str = Field(dict(RUN_PACKAGE.ms_launchers)["coordinator"], description="MindIE-MS coordinator")


class MindieValues(Frozen):
    """What templates/mindie-*.yaml read from .Values.mindie."""

    rankTable: RankTable = RankTable()
    daemon: str = Field(RUN_PACKAGE.server, pattern=r"^/")
    msHome: str = Field(RUN_PACKAGE.ms_home, pattern=r"^/")
    launchers: Launchers = Launchers()
    tls: bool = False
    ports: Ports = Ports()
    msResources: Resources = Resources(requests={"cpu": "2", "memory": "2Gi"})
    ms: Ms = Ms()
