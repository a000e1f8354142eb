"""`deploy.scaling`: when `deployctl scale` (and `watch` when told) adds or removes an instance of a role.

Defaults follow what the serving stacks that scale by load ship (docs/dev/scaling-sources.md "Load signals"):
Dynamo's load planner scales decode up at 90 % KV use and down below 50 %, prefill on more than 5 queued requests
per endpoint; llm-d's autoscaler uses 80 % KV and 5 queued; AIBrix, MindCluster's PodAutoscaler and Kubernetes' HPA
wait 300 s before scaling down and not before scaling up. deployctl adds one condition they lack on bare metal: a
new instance takes minutes to load its weights, so overload must last `up.for_s` before one is started.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from deployctl.core.models.base import Strict


class ScaleUp(Strict):
    """Overload: any one of these, on every reading for `for_s` seconds."""

    waiting_per_instance: float = Field(5.0, ge=0, le=1e6, description=(
        "Requests queued per instance of the role (the engine's waiting gauge, averaged over the role's "
        "instances) above which the role is overloaded (Dynamo's prefill threshold, llm-d's queue length)."))
    kv_usage: float = Field(0.9, gt=0, le=1, description=(
        "KV cache use (0-1, averaged) above which the role is overloaded (Dynamo's decode threshold)."))
    utilisation: float = Field(0.9, gt=0, le=10, description=(
        "Generated (decode, mixed) or prompt (prefill) tokens per second per instance over what one instance "
        "sustains (the plan's estimate, or your calibration), above which the role is overloaded."))
    ttft_ms: float | None = Field(None, gt=0, le=3_600_000, description=(
        "Your time-to-first-token target: a mean TTFT of the requests answered between two readings above it "
        "is overload (the engine's TTFT histogram). Default: not a signal."))
    tpot_ms: float | None = Field(None, gt=0, le=600_000, description=(
        "Your time-per-output-token target: a mean TPOT (inter-token latency) between two readings above it is "
        "overload. Default: not a signal."))
    for_s: float = Field(30.0, ge=0, le=86400, description=(
        "How long the overload must last before an instance is added (loading weights takes minutes: a burst "
        "shorter than this is absorbed by the queue)."))


class ScaleDown(Strict):
    """Underload: all of these, on every reading for `for_s` seconds, and the load fits one instance fewer."""

    kv_usage: float = Field(0.5, ge=0, le=1, description=(
        "KV cache use (0-1, averaged) below which the role may lose an instance (Dynamo's decode threshold)."))
    utilisation: float = Field(0.4, ge=0, le=10, description=(
        "Tokens per second per instance over what one sustains, below which the role may lose an instance; the "
        "same load over one instance fewer must stay below scale_up.utilisation (no flapping)."))
    for_s: float = Field(300.0, ge=0, le=86400, description=(
        "How long the underload must last (300 s: AIBrix's, MindCluster's and Kubernetes' HPA's scale-down "
        "window)."))


class RoleBounds(Strict):
    min: int = Field(1, ge=0, le=4096, description="Fewest instances of the role (0: the role may be emptied).")
    max: int = Field(8, ge=1, le=4096, description="Most instances of the role (spare servers permitting).")

    @model_validator(mode="after")
    def _ordered(self) -> RoleBounds:
        if self.min > self.max:
            raise ValueError(f"min {self.min} is above max {self.max}")
        return self


class Scaling(Strict):
    """When to add or remove an instance of a role, by measured load."""

    interval_s: float = Field(10.0, ge=1, le=3600, description=(
        "Seconds between readings of the engines' metrics (Dynamo's and MindCluster's 10 s)."))
    scale_up: ScaleUp = Field(default_factory=ScaleUp, description="What counts as overload.")
    scale_down: ScaleDown = Field(default_factory=ScaleDown, description="What counts as underload.")
    cooldown_up_s: float = Field(60.0, ge=0, le=86400, description=(
        "After any change, seconds before the next instance may be added (a new one must load and take load "
        "before the next reading means anything)."))
    cooldown_down_s: float = Field(300.0, ge=0, le=86400, description=(
        "After any change, seconds before an instance may be removed."))
    spares: list[str] = Field(default_factory=list, max_length=4096, description=(
        "Servers (nodes[].name) held in reserve: in no instance, probed by preflight like the others; "
        "`deployctl scale --apply` starts a new instance of a role on them (as many as one instance of the role "
        "has) and gives them back when it removes that instance."))
    roles: dict[str, RoleBounds] = Field(default_factory=dict, description=(
        "Bounds per role (mixed, prefill, decode), e.g. {decode: {min: 1, max: 4}}; a role not named keeps its "
        "planned count as both bounds (never scaled)."))


class AddedInstance(Strict):
    """An instance `deployctl scale --apply` added on spare servers (the state file's entries)."""

    role: Literal["mixed", "prefill", "decode"]
    name: str = Field(pattern=r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$", max_length=40)
    nodes: list[str] = Field(min_length=1, max_length=1024)
    since: str = Field(default="", max_length=40)      # when it was added (ISO 8601, UTC)
    run_id: str = Field(default="", max_length=64)     # the scale run that added it
    # the running instances of its role it may load its weights from (the engine's peer loading, where it has one
    # and the inventory turns it on): kept, so every later render gives it the same sources
    peers: list[str] = Field(default_factory=list, max_length=64)


class ScaleState(Strict):
    """What `deployctl scale --apply` changed of the inventory's layout: the instances it added, in order."""

    cluster: str = Field(max_length=64)
    added: list[AddedInstance] = Field(default_factory=list, max_length=4096)
