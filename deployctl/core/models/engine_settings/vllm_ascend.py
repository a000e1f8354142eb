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





MODEL = VllmAscendSettings   # this module is engine.kind vllm-ascend's block (engine_settings/__init__.py finds it)
