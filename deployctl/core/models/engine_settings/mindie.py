"""The inventory's `engine` block for engine.kind: mindie (spec/inventory.md §engine)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from deployctl.core.models.base import Strict
from deployctl.core.models.engine import EngineBase


class Ports(Strict):
    """MindIE ports (its defaults). Host network: every port must be free on every node."""

    http: int = Field(1025, ge=1024, le=65535, description="The OpenAI-compatible endpoint (ServerConfig.port).")
    management: int = Field(1026, ge=1024, le=65535, description=(
        "Health endpoints /v2/health/live|ready (ServerConfig.managementPort)."))
    metrics: int = Field(1027, ge=1024, le=65535, description="ServerConfig.metricsPort.")
    inter_comm: int = Field(1121, ge=1024, le=65535, description="PD KV links (ServerConfig.interCommPort).")
    multi_node: int = Field(1120, ge=1024, le=65535, description="BackendConfig.multiNodesInferPort.")
    master: int = Field(7008, ge=1024, le=65535, description="MASTER_PORT.")
    coordinator: int = Field(1035, ge=1024, le=65535, description=(
        "pd-split: the MindIE-MS coordinator, 5 ports from here."))
    controller: int = Field(1045, ge=1024, le=65535, description="pd-split: the MindIE-MS controller's http server.")
    cluster: int = Field(8899, ge=1024, le=65535, description="pd-split: the controller's cluster_port.")
    dist_base: int = Field(10000, ge=1024, le=65000, description=(
        "pd-split distributed decode: DP rank r of a node serves on dist_base + 4*r .. +3."))


class MsSettings(Strict):
    """pd-split: MindIE-MS settings merged over the rendered ms_controller.json / ms_coordinator.json, the same
    way as engine.config (key by key, lists of objects by position), e.g. what Motor's samples set:
    `coordinator: {request_limit: {single_node_max_requests: 4096}, exception_config: {infer_timeout: 3600}}`
    (MindIE-Motor user_config.json L108-116), `controller: {default_p_rate: 1, default_d_rate: 1}`.
    Ports, IPs, paths, TLS switches and the instance shapes stay deployctl's (validate.py OWNED_MS_KEYS)."""

    controller: dict[str, Any] = Field(default_factory=dict, description="Merged over ms_controller.json.")
    coordinator: dict[str, Any] = Field(default_factory=dict, description="Merged over ms_coordinator.json.")


class Assumption(Strict):
    """One refusal a custom or patched image is said to lift (engines/mindie/assume.py)."""

    refusal: str = Field(pattern=r"^[A-Za-z0-9_.-]+$", description=(
        "The id of the refusal: model-version, backend-version, quant (the support matrix), or a MindIE "
        "acceptance check id (acceptance.yaml, e.g. modelconfig.backendType); the refusal's hint names it."))
    reason: str = Field(min_length=1, max_length=500, description=(
        "What the image runs that the stock release does not, e.g. \"2.2 test image with atb-models patched "
        "for DeepSeek-V3.2\"; shown in plan next to the risk."))


class MindieSettings(EngineBase):
    """engine.kind: mindie (the default when kind is left out)."""

    kind: Literal["mindie"] = Field("mindie", description=(
        "Which engine renders and runs it (`deployctl engines` lists them)."))
    config: dict[str, Any] = Field(default_factory=dict, description=(
        "Merged over the rendered MindIE config.json last, key by key; lists of objects merge by position "
        "(entry i into entry i), other lists and values replace: {BackendConfig: {ModelDeployConfig: {ModelConfig: "
        "[{models: {deepseekv2: {...}}}]}}} adds to ModelConfig[0] and keeps its rendered keys. Keys deployctl "
        "owns (ports, ipAddress, inferMode, npuDeviceIds, multiNodesInferEnabled, modelInstanceNumber) are "
        "refused: set them through the inventory."))
    assume: list[Assumption] = Field(default_factory=list, description=(
        "Say what a custom or patched image runs that MindIE's support matrix or its published checks refuse: "
        "each entry names a refusal (its id) and the reason; that refusal becomes a warning naming the risk and "
        "the assumption (shown by plan), e.g. [{refusal: model-version, reason: \"2.2 test image with atb-models "
        "patched for DeepSeek-V3.2\"}]. Nothing else changes: deployctl still renders what it would for "
        "engine.version (set other values through engine.config)."))
    ms: MsSettings = Field(default_factory=MsSettings, description=(
        "pd-split: MindIE-MS controller/coordinator settings merged over ms_controller.json / ms_coordinator.json."))
    ports: Ports = Field(default_factory=Ports, description=(
        "MindIE ports; with host networking each must be free on every node."))
    tls: bool = Field(False, description=(
        "One switch for every MindIE TLS setting (https, inter-node, inter-comm, MS); true requires "
        "certificates in the image."))
    daemon: str | None = Field(None, pattern=r"^/[A-Za-z0-9._/-]+$", description=(
        "The server binary; default: the engine version's layout (2.x: mindie-service/bin/"
        "mindieservice_daemon of the run package; 3.0+: the wheel's /usr/local/bin/mindie_llm_server)."))
    ms_home: str | None = Field(None, pattern=r"^/[A-Za-z0-9._/-]+$", description=(
        "pd-split: MindIE-MS's install dir (MIES_INSTALL_PATH); default: the version's layout (2.x "
        "mindie-service, 3.0+ site-packages/mindie_motor)."))




MODEL = MindieSettings   # this module is engine.kind mindie's block (engine_settings/__init__.py finds it)
