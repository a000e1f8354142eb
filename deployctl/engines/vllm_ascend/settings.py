"""The inventory's `engine` block for engine.kind: vllm-ascend (spec/inventory.md §engine)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from deployctl.models.base import Strict
from deployctl.models.engine import EngineBase


class Ports(Strict):
    """vLLM-Ascend ports. Host network: every port must be free on the nodes that use it."""

    api: int = Field(8000, ge=1024, le=65535)
    # the OpenAI endpoint of node 0 (vllm serve --port; vLLM's default); external DP: rank i serves on api+i
    dp_rpc: int = Field(13389, ge=1024, le=65535)       # --data-parallel-rpc-port (DeepSeek-V3.2.md §5.2)
    master: int = Field(29500, ge=1024, le=65535)       # --master-port of TP/PP across nodes (--nnodes)
    proxy: int = Field(1999, ge=1024, le=65535)         # pd-split: the load-balancing proxy (DeepSeek-V3.1.md §5.3)
    kv_base: int | None = Field(None, ge=1024, le=65000)
    # pd-split: kv_port of instance k = kv_base + 100*k; default 28000 on 8-NPU and 36000 on 16-NPU nodes,
    # above Mooncake's random range [20000, 20000 + 1000 x NPUs) (pd_disaggregation_mooncake_multi_node.md)


class VllmAscendSettings(EngineBase):
    kind: Literal["vllm-ascend"] = "vllm-ascend"
    shm_size: str = Field("1g", pattern=r"^[1-9][0-9]*[kmgKMG]?$")   # the guides' docker run --shm-size=1g
    ports: Ports = Field(default_factory=Ports)
    args: list[str] = Field(default_factory=list, max_length=200)
    # extra `vllm serve` flags, e.g. ["--max-num-seqs", "16", "--no-enable-prefix-caching"]; checked against
    # the chosen version's own parser table (flags/vllm-<version>.json); flags deployctl derives are refused
    additional_config: dict[str, Any] = Field(default_factory=dict)
    # merged into --additional-config; keys checked against vllm-ascend's ascend_config.py of the version
    gpu_memory_utilization: float = Field(0.9, gt=0.0, le=0.99)   # --gpu-memory-utilization (share of HBM)
    connector: Literal["MooncakeConnectorV1", "MooncakeLayerwiseConnector"] | None = None
    # pd-split KV connector; default: MooncakeConnectorV1 (the version's multi-node PD guide)


SETTINGS = VllmAscendSettings
