"""The estimate as data: frozen pydantic models, JSON-serialisable (`deployctl plan --output json` carries them).

Every number here is *estimated* (label "estimated"), never measured: docs/performance-model.md says how.
Times are milliseconds, throughputs output tokens per second.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from deployctl.core.models.base import Frozen


class Workload(Frozen):
    """What the estimate is for: prompt and output lengths, and the concurrent sequences of the deployment
    (None: as many as the KV cache holds at input + output tokens, within the engine's batch limit)."""

    input_len: int = Field(gt=0, le=4_194_304)
    output_len: int = Field(gt=0, le=4_194_304)
    concurrency: int | None = Field(None, ge=1, le=10_000_000)
    # an open-loop client (`--request-rate`): requests per second arriving, concurrency then a ceiling
    request_rate: float | None = Field(None, gt=0, le=1_000_000)
    arrival: Literal["poisson", "fixed"] = "poisson"
    prefix_hit: float = Field(0.0, ge=0, lt=1)   # share of each prompt found in the engine's prefix cache


class Term(Frozen):
    """One term of a step: an HBM/compute component (its roofline time with measured efficiencies and the fitted
    derating) or a communication / stall term."""

    name: str
    ms: float
    share: float                          # of the step (0..1)
    bound: Literal["HBM", "compute", "link", "stall", "fixed", "step"]   # step: a whole step (TTFT parts)
    floor_ms: float | None = None         # pure roofline: peak bandwidth / peak FLOPs, no efficiency or derating
    bytes: float | None = None            # per die per step
    flops: float | None = None


class StepEstimate(Frozen):
    """One step of one instance, per die: a decode iteration, or the prefill of one batch."""

    phase: Literal["decode", "prefill"]
    sequences_per_die_group: float        # decode: sequences per DP group; prefill: prompts per active DP group
    tokens_per_die_group: float           # query tokens per DP group in the step
    context: float                        # decode: mean KV length; prefill: prompt length
    step_ms: float
    floor_ms: float
    terms: list[Term]
    binding: str                          # "EP combine over RoCE dominates: 58% of the step"


class InstanceEstimate(Frozen):
    instance: str
    role: Literal["mixed", "prefill", "decode"]
    dies: int
    degrees: dict[str, int]
    link_intra: str
    link_inter: str
    concurrency: int | None = None        # sequences decoding on this instance
    tpot_ms: float | None = None
    tpot_floor_ms: float | None = None
    ttft_ms: float | None = None          # prefill part of the TTFT on this instance (one prompt)
    prefill_tokens_per_s: float | None = None   # prompt tokens per second at full batches (capacity)
    output_tokens_per_s: float | None = None
    decode: StepEstimate | None = None
    prefill: StepEstimate | None = None   # one prompt of input_len, alone on its DP group (the TTFT prefill)
    stall_ms_per_step: float | None = None      # colocated prefills stalling decode, per step (mixed)


class Mtp(Frozen):
    drafts: int
    acceptance: float                     # per draft position
    accepted_per_step: float
    source: str


class PlanEstimate(Frozen):
    """The estimate of a whole deployment for one workload."""

    label: Literal["estimated"] = "estimated"
    workload: Workload                    # concurrency resolved
    sku: str
    sku_source: str
    dies: int
    ttft_ms: float
    tpot_ms: float
    tpot_floor_ms: float
    output_tokens_per_s: float
    per_die_tokens_per_s: float
    ttft_terms: list[Term]                # what the TTFT is made of (prefill, KV transfer, waits)
    binding: str
    limited_by: Literal["decode", "prefill"] = "decode"
    mtp: Mtp
    instances: list[InstanceEstimate]
    assumptions: list[str]
    warnings: list[str] = Field(default_factory=list)
    calibration: dict[str, float | str]
    # issue 27: the simulated serving loop (deployctl.core.sizing.simulate): p50/p90/p99 of TTFT, TPOT and E2E (ms) and
    # throughput; the headline ttft_ms / tpot_ms / output_tokens_per_s are its p50s and throughput
    distribution: dict | None = None
    client: dict | None = None            # the benchmark client model simulated (deployctl.core.sizing.clients)
    # how far off it can be: the check set's error for these deratings and layout kind, the user's calibration
    # (deployctl.core.sizing.accuracy)
    accuracy: dict | None = None
