"""The inventory's `engine` block for engine.kind: mindie (spec/inventory.md §engine)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from deployctl.models.base import Strict
from deployctl.models.engine import EngineBase

class Ports(Strict):
    """MindIE ports (its defaults). Host network: every port must be free on every node."""

    http: int = Field(1025, ge=1024, le=65535)          # ServerConfig.port (OpenAI endpoint)
    management: int = Field(1026, ge=1024, le=65535)    # ServerConfig.managementPort (health)
    metrics: int = Field(1027, ge=1024, le=65535)       # ServerConfig.metricsPort
    inter_comm: int = Field(1121, ge=1024, le=65535)    # ServerConfig.interCommPort (PD KV links)
    multi_node: int = Field(1120, ge=1024, le=65535)    # BackendConfig.multiNodesInferPort
    master: int = Field(7008, ge=1024, le=65535)        # MASTER_PORT (seed guide)
    coordinator: int = Field(1035, ge=1024, le=65535)   # pd-split: MindIE-MS coordinator, 5 ports from here
    controller: int = Field(1045, ge=1024, le=65535)    # pd-split: MindIE-MS controller http server
    cluster: int = Field(8899, ge=1024, le=65535)       # pd-split: controller cluster_port
    dist_base: int = Field(10000, ge=1024, le=65000)
    # pd-split distributed decode: DP rank r of a node serves on dist_base + 4*r .. +3 (see ms.py)


class MsSettings(Strict):
    """pd-split: MindIE-MS settings merged over the rendered ms_controller.json / ms_coordinator.json, the same
    way as engine.config (key by key, lists of objects by position), e.g. what Motor's samples set:
    `coordinator: {request_limit: {single_node_max_requests: 4096}, exception_config: {infer_timeout: 3600}}`
    (MindIE-Motor user_config.json L108-116), `controller: {default_p_rate: 1, default_d_rate: 1}`.
    Ports, IPs, paths, TLS switches and the instance shapes stay deployctl's (validate.py OWNED_MS_KEYS)."""

    controller: dict[str, Any] = Field(default_factory=dict)
    coordinator: dict[str, Any] = Field(default_factory=dict)


class MindieSettings(EngineBase):
    kind: Literal["mindie"] = "mindie"
    # merged over the rendered config.json last, key by key; lists of objects merge by position (entry i into
    # entry i), other lists and values replace. So {BackendConfig: {ModelDeployConfig: {ModelConfig:
    # [{models: {deepseekv2: {...}}}]}}} adds to ModelConfig[0] and keeps its rendered keys.
    config: dict[str, Any] = Field(default_factory=dict)
    ms: MsSettings = Field(default_factory=MsSettings)      # pd-split: MindIE-MS controller/coordinator settings
    ports: Ports = Field(default_factory=Ports)
    tls: bool = False            # every MindIE TLS switch (https, inter-node, inter-comm, MS) follows this one
    # the server binary; default: the engine version's layout (install.py: 2.x mindie-service/bin/
    # mindieservice_daemon of the run package, 3.0+ the wheel's /usr/local/bin/mindie_llm_server)
    daemon: str | None = Field(None, pattern=r"^/[A-Za-z0-9._/-]+$")
    # pd-split: MindIE-MS's install dir (MIES_INSTALL_PATH); default: the version's layout (2.x mindie-service,
    # 3.0+ site-packages/mindie_motor)
    ms_home: str | None = Field(None, pattern=r"^/[A-Za-z0-9._/-]+$")
SETTINGS = MindieSettings
