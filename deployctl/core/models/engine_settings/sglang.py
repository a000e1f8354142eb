"""The inventory's `engine` block for engine.kind: sglang (docs/engines.md, "SGLang")."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from deployctl.core.models.base import Strict
from deployctl.core.models.engine import EngineBase


class Ports(Strict):
    """SGLang ports. Host network (the Ascend guide's `docker run --network=host`): each must be free on the nodes
    that use it."""

    api: int = Field(30000, ge=1024, le=65535, description=(
        "launch_server --port: the HTTP (OpenAI) port of every server's first node (SGLang's default 30000)."))
    dist_init: int = Field(5000, ge=1024, le=65535, description=(
        "The port of --dist-init-addr <first node of the server>:<port>, for a server over several nodes (the "
        "Ascend DeepSeek-R1 P/D guide's 5000)."))
    bootstrap: int = Field(8998, ge=1024, le=65535, description=(
        "pd-split: --disaggregation-bootstrap-port of prefill server k is bootstrap + k (SGLang's default 8998; "
        "the guides' $((8998+$i))); the router is told each one."))
    mf_store: int = Field(24669, ge=1024, le=65535, description=(
        "pd-split with the ascend transfer backend: the MemFabric config store, ASCEND_MF_STORE_URL="
        "tcp://<first prefill node>:<port>, the same on every server (the DeepSeek-R1 P/D guide's 24669)."))
    router: int = Field(6688, ge=1024, le=65535, description=(
        "pd-split: sglang_router.launch_router --port, the deployment's OpenAI endpoint (the guides' 6688)."))
    router_metrics: int = Field(29000, ge=1024, le=65535, description=(
        "pd-split: the router's --prometheus-port (its default 29000)."))


class SglangSettings(EngineBase):
    """engine.kind: sglang."""

    kind: Literal["sglang"] = Field("sglang", description=(
        "Which engine renders and runs it (`deployctl engines` lists them)."))
    shm_size: str = Field("16g", pattern=r"^[1-9][0-9]*[kmgKMG]?$", description=(
        "docker --shm-size (SGLang's Ascend guide: --shm-size=16g)."))
    privileged: bool = Field(True, description=(
        "docker --privileged: SGLang's Ascend guide says it and host networking are required by RDMA (KV transfer, "
        "DeepEP)."))
    ports: Ports = Field(default_factory=Ports, description=(
        "SGLang ports; with host networking each must be free on the nodes that use it."))
    args: list[str] = Field(default_factory=list, max_length=200, description=(
        "Extra `python -m sglang.launch_server` flags, e.g. [\"--moe-a2a-backend\", \"deepep\", \"--deepep-mode\", "
        "\"auto\"]; checked against the chosen version's own parser table; flags deployctl derives are refused."))
    mem_fraction_static: float = Field(0.8, gt=0.0, le=0.99, description=(
        "--mem-fraction-static: the share of the memory free before the weights load that weights and KV cache "
        "may take (the rest: activations, graphs, HCCL buffers); the plan's memory fit uses it. Default 0.8, the "
        "value most of SGLang's Ascend guides pass."))
    transfer_backend: Literal["ascend", "mooncake"] = Field("ascend", description=(
        "pd-split: --disaggregation-transfer-backend (ascend: MemFabric, what every Ascend P/D guide runs)."))
    router_env: dict[str, str | int | float | bool] = Field(default_factory=dict, max_length=64, description=(
        "pd-split: environment of the router's container only (e.g. SGLANG_DP_ROUND_ROBIN: 1, which SGLang's P/D "
        "guides export before launch_router); the servers take engine.env."))
    router_args: list[str] = Field(default_factory=list, max_length=100, description=(
        "pd-split: extra `python -m sglang_router.launch_router` flags, e.g. [\"--policy\", \"cache_aware\"]; "
        "checked against the router's parser table."))


MODEL = SglangSettings   # this module is engine.kind sglang's block (engine_settings/__init__.py finds it)
