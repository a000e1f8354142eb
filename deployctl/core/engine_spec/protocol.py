"""The interface every engine spec implements, and the plain records it hands to the core.

An engine spec answers, for one engine kind (the full list: ``EngineSpec`` below):

* ``settings``: the pydantic model of the inventory's ``engine`` block (``kind`` is its discriminator);
* ``version(inv)``: the engine version in use and where it was read (engine.version or the image tag);
* ``validate(inv, raw)``: inventory problems only this engine knows (keys it owns, its config sections);
* ``role_preset(inv, preset, role)``: the degrees of a role on this engine's runtime (None: the catalog's);
* ``check(plan)``: the support matrix: refusals (exit 2, with the source) and warnings (unverified);
* ``accept(plan)``: what the engine itself would refuse in the files ``render`` writes for this plan (its own
  config checks, as errors with the engine's message and source; validate/plan/render refuse them, exit 2);
* ``memory(inv, role, degrees)``: what the memory plan needs from the engine (usable fraction, buffers,
  how this runtime really splits the weights);
* ``render(plan)``: every file of every node;
* ``processes(plan, node)``: what runs on a node (containers, start files, readiness, ports);
* ``host_ports(inv)``: ports that must be free on every node before a launch;
* ``metrics_targets(plan)``: every Prometheus endpoint the engine's processes serve (``deployctl observe``);
* ``metric_names``: the names of the engine's Prometheus metrics the dashboard reads (``deployctl observe``);
* ``chart``: the engine's part of the chart and how its values are made from a plan;
* ``router_control(plan, remote)``: how rolling updates and ``watch`` take an instance out of its router;
* ``infer_probe(plan, instance)``: where ``watch`` sends an idle instance a one-token completion to tell whether it
  can still infer, or why it cannot be probed that way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Protocol

if TYPE_CHECKING:
    from deployctl.core.engine_spec.router import RouterControl, RouterRemote
    from deployctl.core.errors import Problem
    from deployctl.core.input.raw import RawInventory
    from deployctl.core.models.artifact import Artifact
    from deployctl.core.models.engine import EngineBase
    from deployctl.core.models.inventory import Inventory
    from deployctl.core.models.plan import Degrees, Plan, PlanNode

TAG_VERSION = re.compile(r"^v?(\d+)\.(\d+)")


@dataclass(frozen=True)
class EngineVersion:
    version: str | None      # "2.2", "3.0", None when neither engine.version nor the image tag says
    source: str              # "engine.version", "image tag 2.2.RC1-800I-A2-...", "unknown"

    def describe(self) -> str:
        return f"{self.version} (from {self.source})" if self.version else f"unknown ({self.source})"


def version_from(engine: EngineBase) -> EngineVersion:
    """engine.version, else major.minor of the image tag (`mindie:2.2.RC1-800I-A2-...` -> 2.2,
    `vllm-ascend:v0.13.0-a3` -> 0.13); a digest-only or untagged image says nothing."""
    if engine.version:
        m = TAG_VERSION.match(engine.version)
        return EngineVersion(f"{m.group(1)}.{m.group(2)}" if m else engine.version, "engine.version")
    image = engine.image.split("@", 1)[0]
    tag = image.rsplit(":", 1)[1] if ":" in image.rsplit("/", 1)[-1] else ""
    m = TAG_VERSION.match(tag)
    if m:
        return EngineVersion(f"{m.group(1)}.{m.group(2)}", f"image tag {tag}")
    return EngineVersion(None, f"image tag {tag!r} names no version" if tag else "the image has no tag")


def read_data(package: str, name: str, words_for_booleans: bool = True) -> dict[str, Any]:
    """A driver's YAML data file. In a support matrix yes/no stay the words yes/no (YAML 1.1 would read them
    as booleans); env presets keep real booleans (``words_for_booleans=False``)."""
    from deployctl.core.packaged import packaged_yaml

    def words(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: words(v) for k, v in node.items()}
        if isinstance(node, list):
            return [words(v) for v in node]
        if isinstance(node, bool):
            return "yes" if node else "no"
        return node

    data = packaged_yaml(package, name)
    return words(data) if words_for_booleans else data


@dataclass(frozen=True)
class MemoryInputs:
    fraction: float                  # share of HBM the engine may use
    fraction_name: str               # where that share is set (NPU_MEMORY_FRACTION, --gpu-memory-utilization)
    comm_buffer_mb: int              # the widest communicator's buffer (HCCL_BUFFSIZE)
    o_proj_tp: int | None = None     # how this runtime really splits o_proj / lm_head (None: by tp)
    lm_head_tp: int | None = None
    notes: tuple[str, ...] = ()      # e.g. "local TP keys have no effect on the torch runtime (source)"
    # the KV cache's bytes per cached element when the engine stores it in another type than the model's quant
    # says (INT8 "C8" caches, their scales included); None: the quant's own (sizing/memory.py with_kv_cache)
    kv_cache_bytes: float | None = None        # MLA latent + rope key, or GQA K/V
    indexer_cache_bytes: float | None = None   # a sparse-attention (DSA) indexer's key
    # the attention cache's tokens spread over this many ranks (decode context parallel: each keeps 1/N of every
    # sequence's latent or K/V); a sparse-attention indexer's key stays whole on each (sizing/memory.py)
    kv_token_split: int = 1
    # what `fraction` is a share of. False: of the whole HBM, holding weights, KV cache, workspace and communication
    # buffers alike. True: of the memory free before the weights load (HBM less the runtime and the communication
    # buffers made at start), holding the weights and the KV cache only; the workspace must fit in the rest
    # (sizing/memory.py memory_fit)
    fraction_of_free: bool = False
    # the engine starts with a KV cache shorter than one max_seq_len sequence (it caps a request's length at what
    # the cache holds) instead of refusing to: the plan says so rather than failing
    starts_with_short_cache: bool = False
    # context parallel (layout cp) spreads each sequence's KV cache over the cp ranks (MindIE's prefill CP); False:
    # every cp rank keeps the whole sequence's (the ranks split the attention's work, not its cache)
    kv_spread_over_cp: bool = True


@dataclass(frozen=True)
class Process:
    """The containers one start file creates on a node, and how to tell that they are ready."""

    containers: tuple[str, ...]          # docker container names the start file creates
    start: str                           # start file in the revision folder
    ready_container: str                 # whose log shows ready_line
    ready_line: str                      # log line the engine prints when it serves
    ready_count: int = 1                 # how many times (one per server process in the container)
    health_urls: tuple[str, ...] = ()    # GET -> 200 when ready
    ports: tuple[int, ...] = ()          # host ports it listens on
    restart_files: tuple[str, ...] = ()  # revision files whose change restarts it (the router's own files)
    fatal_log: tuple[str, ...] = ()      # log lines (regular expressions) that mean it failed while it answers
    restart_with_engines: bool = True    # a router restarted whenever an instance restarts (MindIE-MS reads the
                                         # instances at start); deployctl's HAProxy keeps running (health checks)


@dataclass(frozen=True)
class MetricsTarget:
    """One Prometheus endpoint an engine process serves: http://address:port/path."""

    node: str                            # the plan node it runs on
    instance: str                        # the plan instance it belongs to
    role: str                            # the instance's role: mixed, prefill, decode
    address: str                         # host:port
    path: str = "/metrics"
    needs: str = ""                      # what must be set for it to answer (e.g. an environment variable)


@dataclass(frozen=True)
class InferProbe:
    """Where ``deployctl watch`` sends an idle instance its one-token completion (docs/watch.md, "An engine that
    answers its health check but cannot infer"): POST ``url`` with ``body`` (JSON), from ``node``."""

    node: str                            # the plan node it is sent from (the instance's master: its port is local)
    url: str                             # http://host:port/path of the instance's own API
    body: str                            # the request, JSON


@dataclass(frozen=True)
class MetricNames:
    """The engine's Prometheus metrics that ``deployctl observe``'s dashboard reads (each driver cites them)."""

    ttft: str                            # histogram of time to first token, seconds (without _bucket)
    tpot: str                            # histogram of time per output token / inter-token latency, seconds
    generated: str                       # counter of generated tokens (as exposed, with _total)
    running: str                         # gauge: requests being computed
    waiting: str                         # gauge: requests queued
    kv_usage: str                        # gauge: KV cache use, 0..1
    prompt: str = ""                     # counter of prompt tokens processed (as exposed, with _total)


@dataclass(frozen=True)
class NodeProcesses:
    """What runs on one node: the engine and, on at most one node, the router in front of the instances."""

    engine: Process
    router: Process | None = None        # started after every engine is ready (e.g. a P/D coordinator)
    serves: str | None = None            # the OpenAI base URL clients use on this node, if any
    smoke: bool = False                  # `up` sends its chat completion to `serves`
    smoke_words: int = 0                 # and then a prompt this long (e.g. to force a P -> D KV transfer)

    @property
    def containers(self) -> tuple[str, ...]:
        return self.engine.containers + (self.router.containers if self.router else ())


@dataclass(frozen=True)
class Finding:
    """A support-matrix answer: refused (error) or allowed but unverified (warning)."""

    level: str                           # "error" | "warning" | "note"
    path: str                            # inventory key, e.g. "layout.pp"
    message: str
    source: str = ""                     # repo path:line or doc section
    hint: str = ""


@dataclass(frozen=True)
class Chart:
    """The engine's part of the `ascend-llm` chart (deployctl/charts/ascend-llm, templates/<kind>-*.yaml): its block of
    values and how the values are made from a plan."""

    kind: str                            # the engine's kind (engine.kind; the chart's `engine` value)
    block: str                           # the engine's values block: .Values.<block>
    block_model: type                    # pydantic model of that block (values.schema.json is generated from it)
    owned_values: tuple[str, ...]        # keys of the block rendered from the plan: kubernetes.values may not set them
    values: Callable[[Plan, list[Artifact]], dict[str, Any]]   # (plan, bare-metal artifacts) -> the values
                                                               # (dict: common keys + block)
    image: str                           # the chart's default image when this is the default engine


class EngineSpec(Protocol):
    """Everything the rest of deployctl may ask of an engine. The composition root (deployctl/app/engines.py)
    resolves engine.kind to one EngineSpec, once; validation attaches it to the inventory (``inv.engine_spec``,
    ``plan.engine_spec``) and everything below receives it from there. Every capability is listed here: callers
    never probe an engine with getattr; an engine without one inherits EngineSpecBase's answer."""

    kind: str
    display: str

    @property
    def settings(self) -> type[EngineBase]: ...   # its engine block's model (core/models/engine_settings/)

    max_servers: int | None     # servers one instance (one HCCL world) may span
    role_keys: tuple[str, ...]  # engine keys a pd-split role may set over the engine block (layout.<role>.engine)
    needs_device_ips: bool      # its files name every device's NIC IP (an HCCL rank table)
    # the Python packages in its image whose versions pair with the host (preflight reads them: probes/image_versions)
    image_packages: tuple[str, ...]

    @property
    def chart(self) -> Chart: ...              # its part of the chart, for --target k8s

    @property
    def metric_names(self) -> MetricNames: ...

    # the performance model's deratings fitted on this engine's published points, where they come from and the
    # fit's record (None: the CloudMatrix384 fit of core/sizing/calibration.py); read-only properties
    @property
    def perf_deratings(self) -> dict | None: ...

    @property
    def perf_deratings_source(self) -> str | None: ...

    @property
    def perf_fit_record(self) -> dict | None: ...

    def version(self, inv: Inventory) -> EngineVersion: ...

    def validate(self, inv: Inventory, raw: RawInventory) -> list[Problem]: ...

    def role_preset(self, inv: Inventory, preset: str, role: str) -> dict | None: ...

    def needs_interfaces(self, inv: Inventory) -> str | None: ...   # why every node needs nodes[].interface
                                                                     # (None: no need)

    def chunked_prefill(self, inv: Inventory) -> bool: ...          # splits a prompt longer than its prefill batch

    def prefix_caching(self, inv: Inventory) -> tuple[bool, str]: ...   # (reuses cached prompt prefixes, source)

    def graph_mode(self, inv: Inventory) -> str: ...     # how the role's decode steps run ("": the engine has one)

    def redundant_experts(self, inv: Inventory) -> tuple[int, str]: ...  # EPLB's extra expert slots, where set

    def runs_prompt_over_prefill_budget(self, inv: Inventory) -> bool: ...   # a prompt longer than max_prefill_tokens
                                                                             # still runs (chunked, or alone)

    def microbatch_overlap(self, engine: EngineBase, env: dict | None = None) -> tuple[int, str]: ...  # (0, ""): none

    def check(self, plan: Plan) -> list[Finding]: ...

    def accept(self, plan: Plan) -> list[Finding]: ...

    def memory(self, inv: Inventory, role: str, degrees: Degrees) -> MemoryInputs: ...

    def render(self, plan: Plan) -> list[Artifact]: ...

    def processes(self, plan: Plan, node: PlanNode) -> NodeProcesses: ...

    def host_ports(self, inv: Inventory) -> dict[str, int]: ...

    def metrics_targets(self, plan: Plan) -> list[MetricsTarget]: ...

    def router_control(self, plan: Plan, remote: RouterRemote) -> RouterControl | None: ...

    def router_control_gap(self, plan: Plan) -> str | None: ...  # why router_control gives None, for `watch`

    def infer_probe(self, plan: Plan, instance: str) -> InferProbe | str: ...   # or why it cannot be probed

    def support_rows(self) -> list[dict]: ...

    def support_table(self) -> str: ...


class EngineSpecBase:
    """The answers of an engine that lacks a capability; each engine's spec class derives from it."""

    @property
    def perf_deratings(self) -> dict | None:
        return None

    @property
    def perf_deratings_source(self) -> str | None:
        return None

    @property
    def perf_fit_record(self) -> dict | None:
        return None

    def chunked_prefill(self, inv: Inventory) -> bool:
        return False            # prefills the longest input in one batch

    def runs_prompt_over_prefill_budget(self, inv: Inventory) -> bool:
        return self.chunked_prefill(inv)    # else its prefill batch must hold the longest input

    def prefix_caching(self, inv: Inventory) -> tuple[bool, str]:
        return False, "no prefix cache known for this engine"

    def graph_mode(self, inv: Inventory) -> str:
        return ""               # one way of running decode steps: its deratings cover it

    def redundant_experts(self, inv: Inventory) -> tuple[int, str]:
        return 0, ""            # no redundant experts in its settings

    def microbatch_overlap(self, engine: EngineBase, env: dict | None = None) -> tuple[int, str]:
        return 0, ""

    def router_control(self, plan: Plan, remote: RouterRemote) -> RouterControl | None:
        return None             # no router of its own deployctl can take an instance out of

    def router_control_gap(self, plan: Plan) -> str | None:
        return None

    def infer_probe(self, plan: Plan, instance: str) -> InferProbe | str:
        return "deployctl knows no request of this engine's own to probe it with"
