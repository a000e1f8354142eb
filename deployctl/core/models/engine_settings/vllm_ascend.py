"""The inventory's `engine` block for engine.kind: vllm-ascend (spec/inventory.md §engine)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from deployctl.core.models.base import Strict
from deployctl.core.models.engine import EngineBase


class Ports(Strict):
    """vLLM-Ascend ports. Host network: every port must be free on the nodes that use it."""

    api: int = Field(8000, ge=1024, le=65535, description=(
        "The OpenAI endpoint of node 0 (vllm serve --port); external DP: rank i serves on api+i."))
    dp_rpc: int = Field(13389, ge=1024, le=65535, description="--data-parallel-rpc-port.")
    master: int = Field(29500, ge=1024, le=65535, description="--master-port of TP/PP across nodes (--nnodes).")
    proxy: int = Field(1999, ge=1024, le=65535, description="pd-split: the load-balancing proxy.")
    kv_base: int | None = Field(None, ge=1024, le=65000, description=(
        "pd-split: kv_port of instance k = kv_base + 100*k; default 28000 on 8-NPU and 36000 on 16-NPU nodes, "
        "above Mooncake's random range [20000, 20000 + 1000 x NPUs)."))
    # (pd_disaggregation_mooncake_multi_node.md; ports: DeepSeek-V3.2.md §5.2, DeepSeek-V3.1.md §5.3)


class NetLoader(Strict):
    """Loading weights from a running peer: vLLM-Ascend's NetLoader (`--load-format netloader`, v0.12.0rc1 and
    later; vllm-project/vllm-ascend@182b75ea docs/source/user_guide/feature_guide/netloader.md L36-46). Every
    instance started with it serves its weights once loaded; one started while live peers of its role are named
    (by deployctl's scaling, Plan.weight_peers) loads from them first and from disk if that fails. Key names are
    MindIE-Motor's for the same switch (docs/zh/user_guide/features/startup_acceleration.md@0363f5e3)."""

    enabled: bool = Field(False, description=(
        "Start every `vllm serve` with --load-format netloader: it serves its weights to new instances of its role "
        "once loaded, and a new instance loads from a running one (falling back to disk). vLLM-Ascend 0.12 and later."))
    # 7000: deployctl's choice. The weight servers of up to 1,000 ranks (7000-7999) stay below the API ports (8000+),
    # and their draft/MTP twins (+10000, netloader.py@182b75ea L39) below Mooncake's random ports (20000+) and
    # Linux's ephemeral range (32768+); the port plan checks the rest per host. vLLM-Ascend's own default (unset:
    # a random free port, netloader.py L440-452) could not be named to a new instance in advance. Bounds: a server
    # opens only for a base port in range(1024, 65535) (L431).
    listen_port: int = Field(7000, ge=1024, le=65534, description=(
        "Base port of each instance's weight servers: rank r listens on listen_port + r (a draft/MTP model's on "
        "+ 10000 more), on the node's IP; peers of the role must reach them."))
    int8_cache: Literal["no", "hbm", "dram"] = Field("no", description=(
        "INT8_CACHE: where a serving instance keeps a copy of its original int8 parameters for quantized models "
        "(hbm, dram, or no copy: vLLM-Ascend's default). Every instance of a role must say the same."))


class VllmAscendSettings(EngineBase):
    """engine.kind: vllm-ascend."""

    kind: Literal["vllm-ascend"] = Field("vllm-ascend", description=(
        "Which engine renders and runs it (`deployctl engines` lists them)."))
    shm_size: str = Field("1g", pattern=r"^[1-9][0-9]*[kmgKMG]?$", description=(
        "docker --shm-size (the guides' docker run --shm-size=1g)."))
    ports: Ports = Field(default_factory=Ports, description=(
        "vLLM-Ascend ports; with host networking each must be free on the nodes that use it."))
    args: list[str] = Field(default_factory=list, max_length=200, description=(
        "Extra `vllm serve` flags, e.g. [\"--max-num-seqs\", \"16\", \"--no-enable-prefix-caching\"]; checked "
        "against the chosen version's own parser table; flags deployctl derives are refused."))
    additional_config: dict[str, Any] = Field(default_factory=dict, description=(
        "Merged into --additional-config; keys checked against vllm-ascend's config reader of the version."))
    gpu_memory_utilization: float = Field(0.9, gt=0.0, le=0.99, description=(
        "--gpu-memory-utilization: the share of HBM vLLM uses; the plan's memory fit uses it."))
    connector: Literal["MooncakeConnectorV1", "MooncakeLayerwiseConnector", "MooncakeHybridConnector"] | None = Field(
        None, description=("pd-split KV connector; default: the model family's (MooncakeHybridConnector for "
                           "DeepSeek-V4), else MooncakeConnectorV1 (the version's multi-node PD guide)."))
    # left out of plan.json and the other dumps while off, so deployments that do not use it read as before
    netloader: NetLoader = Field(default_factory=NetLoader, exclude_if=lambda v: v == NetLoader(), description=(
        "Loading weights from a running peer instead of disk (vLLM-Ascend's NetLoader); per role in a pd-split."))





MODEL = VllmAscendSettings   # this module is engine.kind vllm-ascend's block (engine_settings/__init__.py finds it)
