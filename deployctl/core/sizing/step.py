"""The step-time physics of one instance: bytes, FLOPs and messages per die (a roofline per component, after the
published derivations of arXiv 2505.09343 §2.3.2, "Insights into DeepSeek-V3", and arXiv 2506.12708 §4.2.1, §5.5,
CloudMatrix384).

Everything here works on plain parameters (`Setup`): the calibration points (CloudMatrix384 DP320/EP320, ...) and
the layouts deployctl plans go through the same code. Times are seconds, bytes are bytes, per die.

A step is the sum over layers of per-component roofline times, each ``max(k_hbm·bytes / (BW·η_bw),
k_compute·FLOPs / (peak·η))`` (CloudMatrix's measured η, fitted deratings k >= 1), plus the MoE dispatch/combine
and TP all-reduce over the link the group spans (hidden behind compute with two prefill microbatches). The floor
drops η, k and communication: ``max(Σ bytes / BW, Σ FLOPs / peak)``, a true lower bound.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

from deployctl.core.sizing.hardware import Sku, arch, arch_of, ep_comm, efficiency, interp_log, links
from deployctl.core.sizing.memory import kv_layer_bytes

if TYPE_CHECKING:
    from deployctl.core.models.model_info import ModelInfo


@dataclass(frozen=True)
class Setup:
    """One instance as the estimator sees it (degrees as in deployctl.core.models.plan.Degrees)."""

    model: str                      # catalog key (deployctl/core/catalog/models.yaml), or the inventory's model.name
    quant: str
    sku: Sku
    dies: int                       # ranks of the instance
    dies_per_node: int
    tp: int = 1
    dp: int = 1
    pp: int = 1
    cp: int = 1
    moe_tp: int = 1
    moe_ep: int = 1
    o_proj_tp: int | None = None
    lm_head_tp: int | None = None
    super_pod: bool = False         # A3 super pod: UB between servers instead of RoCE
    extra_expert_slots: int = 0     # redundant experts (+ shared-expert copies when shared_in_ep)
    shared_in_ep: bool = False      # the shared expert runs on EP slots of its own (CloudMatrix) instead of every die
    mtp_drafts: int = 0             # MTP draft tokens per step (0: no MTP)
    mtp_accept: float = 0.7         # acceptance of each draft position
    draft_passes: int = 0           # sequential draft forwards per decode step (MTP/EAGLE: one per token; DFlash: 1)
    microbatches: int = 1           # 2: communication overlapped with compute by two microbatches
    dbo_decode_tokens: int = 0      # decode overlaps only above this many tokens per DP group (0: decode never)
    info: Any = field(default=None, compare=False)   # the ModelInfo (None: the built-in catalog's entry of `model`)

    @property
    def model_info(self) -> ModelInfo:
        if self.info is not None:
            return self.info
        from deployctl.core import catalog

        return catalog.builtin_models()[self.model]

    @property
    def accepted(self) -> float:
        """Expected accepted drafts per step: a + a² + ... (geometric, each position given the previous)."""
        return sum(self.mtp_accept ** i for i in range(1, self.mtp_drafts + 1))


@dataclass(frozen=True)
class Consts:
    """The fitted constants (deployctl/core/sizing/calibration.py FITTED): deratings of the η-roofline time."""

    k_hbm: float          # decode, HBM-bound components
    k_compute: float      # decode, compute-bound components
    k_prefill: float      # prefill, every component
    k_fixed: float = 1.0  # per-step fixed kernel costs (1: msModeling's static costs; `deployctl calibrate` fits it)
    host_ms: float = 0.0  # per-step host-side overhead (scheduling, input prep, launch) of a stock engine, batch-independent
    host_draft_ms: float = 0.0  # host overhead of each sequential draft forward of a decode step (Setup.draft_passes)


@dataclass
class Part:
    """One HBM/compute component of a step (all layers summed)."""

    name: str
    bytes: float = 0.0
    flops: float = 0.0
    int8: bool = False
    eta: float = 0.8

    def floor(self, sku: Sku) -> float:
        return max(self.bytes / sku.bw, self.flops / sku.peak(self.int8))

    def time(self, sku: Sku, eta_bw: float, k_hbm: float = 1.0, k_compute: float = 1.0) -> float:
        return max(k_hbm * self.bytes / (sku.bw * eta_bw), k_compute * self.flops / (sku.peak(self.int8) * self.eta))


@dataclass
class Step:
    """One step of one instance: components, communication, overheads (seconds)."""

    phase: str
    k_hbm: float
    k_compute: float
    parts: list[Part] = field(default_factory=list)
    comm: dict[str, float] = field(default_factory=dict)      # term name -> seconds
    comm_bytes: dict[str, float] = field(default_factory=dict)
    overhead: float = 0.0
    host: float = 0.0              # per-step host-side overhead (Consts.host_ms), not hidden by overlap
    overlap: bool = False          # comm hidden behind compute (two microbatches)
    sku: Sku | None = None

    @property
    def _sku(self) -> Sku:
        return cast(Sku, self.sku)   # step() always sets it

    def bound(self, p: Part) -> str:
        """Which side of the calibrated roofline binds the component."""
        eta_bw = efficiency()["eta_bw"]
        hbm = self.k_hbm * p.bytes / (self._sku.bw * eta_bw)
        return "HBM" if hbm >= self.k_compute * p.flops / (self._sku.peak(p.int8) * p.eta) else "compute"

    def part_time(self, p: Part) -> float:
        return p.time(self._sku, efficiency()["eta_bw"], self.k_hbm, self.k_compute)

    @property
    def compute(self) -> float:
        return sum(self.part_time(p) for p in self.parts)

    @property
    def comm_total(self) -> float:
        return sum(self.comm.values())

    @property
    def total(self) -> float:
        if self.overlap:
            return max(self.compute, self.comm_total) + self.overhead + self.host
        return self.compute + self.comm_total + self.overhead + self.host

    @property
    def floor(self) -> float:
        return max(sum(p.bytes for p in self.parts) / self._sku.bw,
                   sum(p.flops / self._sku.peak(p.int8) for p in self.parts))

    def terms(self) -> list[tuple[str, float, str]]:
        """(name, seconds of the calibrated step, what binds it), largest first; with overlap the hidden
        communication is scaled to what shows."""
        out = [(p.name, self.part_time(p), self.bound(p)) for p in self.parts]
        scale = 1.0
        if self.overlap:
            shown = max(0.0, self.comm_total - self.compute)
            scale = shown / self.comm_total if self.comm_total else 0.0
        out += [(n, t * scale, "link") for n, t in self.comm.items()]
        if self.overhead:
            out.append(("kernel fixed costs", self.overhead, "fixed"))
        if self.host:
            out.append(("host-side step overhead", self.host, "fixed"))
        return sorted(out, key=lambda t: -t[1])


def _int8(b: float) -> bool:
    return b < 2       # INT8/INT4 weights run INT8 GEMMs (W8A8, W4A8); BF16 weights run BF16


def mean_min(s: float, cap: float) -> float:
    """Mean of min(p, cap) over causal positions p = 1..s."""
    if s <= cap:
        return (s + 1) / 2
    return (cap * (cap + 1) / 2 + cap * (s - cap)) / s


def _attention(s: Setup, m: ModelInfo, phase: str, ctx: float) -> tuple[float, float]:
    """(FLOPs per query token per layer on one die, KV bytes per sequence per layer read in decode)."""
    a = arch_of(s.model_info)
    heads = m.heads / s.tp
    cache, index_key = kv_layer_bytes(m, s.quant, s.tp)       # the memory plan's formula
    if m.kv.kind == "compressed":         # DeepSeek-V4: as one K=V latent head over the cached entries (unverified)
        pos = ctx if phase == "decode" else (ctx + 1) / 2
        return 4 * heads * m.kv.head_dim * pos / 4, ctx * cache
    if m.kv.kind in ("gqa", "hybrid"):     # hybrid: the full-attention layers' cost (step() counts those layers)
        pos = ctx if phase == "decode" else (ctx + 1) / 2
        return 4 * heads * m.kv.head_dim * pos, ctx * cache
    if "mla" not in a:
        raise ValueError(f"no MLA dimensions for {m.display} in deployctl/core/sizing/arch.yaml")
    mla, dsa = a["mla"], a.get("dsa")
    if phase == "decode":
        c = min(ctx, dsa["index_topk"]) if dsa else ctx
        flops = 2 * heads * (m.kv.latent + mla["kv_lora_rank"]) * c         # absorbed MLA (derived from the MLA dims)
        kv = c * cache                                                       # the selected tokens' latents
        if dsa:
            flops += 2 * dsa["index_n_heads"] / s.tp * dsa["index_head_dim"] * ctx
            # every token's indexer key, in the layers that own an indexer (GLM-5.2: 21 of 78)
            kv += ctx * index_key * (m.kv.indexer_layers or m.layers) / m.layers
        return flops, kv
    qk = mla["qk_nope_head_dim"] + mla["qk_rope_head_dim"]
    p = mean_min(ctx, dsa["index_topk"]) if dsa else (ctx + 1) / 2
    flops = 2 * heads * (qk + mla["v_head_dim"]) * p                         # prefill MLA (derived from the MLA dims)
    if dsa:
        flops += 2 * dsa["index_n_heads"] / s.tp * dsa["index_head_dim"] * (ctx + 1) / 2
    return flops, 0.0


def layer_overhead(info: ModelInfo) -> float:
    """Seconds of fixed kernel costs per layer: ops per layer (arch.yaml) x msModeling's static cost per op."""
    from deployctl.core.sizing.hardware import catalog

    ops = arch_of(info).get("ops_per_layer") or arch("deepseek-v3")["ops_per_layer"]
    static = catalog()["op_static"]
    return (ops["matmul"] * static["matmul_us"]["value"] + ops["vector"] * static["vector_us"]["value"]) * 1e-6


def link_keys(s: Setup) -> tuple[str, str]:
    """(link inside a server, link between servers)."""
    intra = "hccs" if s.sku.hardware == "a2" else "ub"
    inter = "ub" if s.sku.hardware == "a3" and s.super_pod else "roce"
    return intra, inter


def _fanout(ep: int, k: float) -> float:
    """Expected distinct destination ranks of one token (uniform routing)."""
    return ep * (1 - (1 - 1 / ep) ** k)


def ep_alpha(s: Setup, link: str) -> float:
    """Fixed latency of one dispatch or combine: static cost + ceil(log2 EP) link latencies (hardware.yaml)."""
    return (ep_comm()["static_us"] + math.ceil(math.log2(s.moe_ep)) * links()[link].latency_us) * 1e-6


def ep_op_time(s: Setup, phase: str, op: str, tokens: float, msg: float, k_eff: float) -> tuple[float, float, str]:
    """(seconds, network bytes, link label) of one dispatch or combine per MoE layer on the busiest die."""
    ep, e = s.moe_ep, ep_comm()
    fan = _fanout(ep, k_eff)
    # every die of the destination's expert-TP group needs the token (dispatch) and sends its partial (combine)
    net = tokens * fan * msg * (ep - 1) / ep * s.moe_tp
    # expert-TP groups are the inner (contiguous) ranks, so one server holds per_node / moe_tp ranks of an EP group
    local = min(ep, max(1, s.dies_per_node // s.moe_tp))
    intra_b = net * (local - 1) / max(1, ep - 1)
    inter_b = net - intra_b
    intra, inter = link_keys(s)
    eta = efficiency()["eta_link"]
    alpha = ep_alpha(s, inter if inter_b > 0 else intra)
    if phase == "decode":
        # CANN low-latency operator: CM Table 7 time at 128 tokens (hidden 7168, top-8) gives the UB bandwidth
        t128 = interp_log(e[f"ll_{op}_us"], ep) * 1e-6
        ref_msg = 7168 + e["dispatch_scale_bytes"] if op == "dispatch" else 2 * 7168
        ref = e["low_latency_tokens"] * _fanout(ep, 8) * ref_msg * (ep - 1) / ep
        fast = ref / max(t128 - ep_alpha(s, "ub"), 1e-6)
    else:
        fast = interp_log(e[f"normal_{op}_gbps"], ep) * 1e9
    slow = links()[inter].gbps * 1e9 * eta
    if inter == intra or inter_b == 0:
        return alpha + net / fast, net, intra if inter_b == 0 else inter
    return alpha + max(intra_b / fast, inter_b / min(slow, fast)), net, inter


def _allreduce(s: Setup, group: int, nbytes: float) -> tuple[float, str]:
    intra, inter = link_keys(s)
    key = intra if group <= s.dies_per_node else inter
    bw = links()[key].gbps * 1e9 * efficiency()["eta_link"]
    return ep_comm()["allreduce_latency_us"] * 1e-6 + 2 * (group - 1) / group * nbytes / bw, key


LINK_NAMES = {"hccs": "HCCS", "ub": "UB", "roce": "RoCE"}


def overlaps(s: Setup, phase: str, tokens_group: float) -> bool:
    """Two microbatches hide communication behind compute: prefill always when set; decode only above the
    engine's decode threshold (vLLM ParallelConfig.dbo_decode_token_threshold, 32 by default: a decode batch of
    fewer tokens is not split)."""
    if s.microbatches < 2:
        return False
    return phase == "prefill" or bool(s.dbo_decode_tokens) and tokens_group > s.dbo_decode_tokens


def _local_tp_comm(s: Setup, m: ModelInfo, st: Step, layers: int, own: float, sampled: float) -> None:
    """o_proj / lm_head TP wider than the attention TP (MindIE's o_proj_local_tp / lm_head_local_tp inside DP
    attention): the weight read per die shrinks (in step()) and the group exchanges its tokens. Assumed pattern
    (not read in the engines' source): o_proj all-gathers the group's attention outputs (heads x v_head_dim per
    token) and reduce-scatters its hidden output; lm_head all-gathers the hidden states and sends the
    vocabulary-split BF16 logits back to each token's die. Two collectives each, with the all-reduce's latency.
    `own`: the tokens one die brings (its DP group's); `sampled`: those of them that reach lm_head."""
    v_dim = arch_of(s.model_info).get("mla", {}).get("v_head_dim") or m.kv.head_dim or 128
    vocab = m.params_b.lm_head * 1e9 / m.hidden
    eta, lat = efficiency()["eta_link"], ep_comm()["allreduce_latency_us"] * 1e-6
    for name, g, count, n, per_token in (("o_proj TP gather + reduce-scatter", s.o_proj_tp, layers, own,
                                          m.heads * v_dim + m.hidden),
                                         ("lm_head TP gather + logits", s.lm_head_tp, 1, sampled, m.hidden + vocab)):
        if not g or g <= s.tp:
            continue
        peers = g // s.tp                  # distinct token sets in the group (TP ranks share theirs)
        nbytes = (peers - 1) * n * per_token * 2
        intra, inter = link_keys(s)
        key = intra if g <= s.dies_per_node else inter
        label = f"{name} over {LINK_NAMES[key]}"
        st.comm[label] = count * (2 * lat + nbytes / (links()[key].gbps * 1e9 * eta))
        st.comm_bytes[label] = count * nbytes


def step(s: Setup, phase: str, tokens_group: float, ctx: float, c: Consts, seqs_group: float | None = None,
         groups_active: int | None = None) -> Step:
    """One step of the instance.

    decode: ``tokens_group`` query tokens per DP group (sequences x (1 + drafts)), context ``ctx`` per sequence.
    prefill: ``tokens_group`` prompt tokens per active DP group, prompts of ``ctx`` tokens; ``groups_active`` DP
    groups carry a batch (default all), the others only serve their experts.
    """
    m = s.model_info
    q = m.quants[s.quant]
    p = m.params_b
    eff = efficiency()
    groups = s.dp if groups_active is None else groups_active
    total_tokens = tokens_group * groups                   # tokens every MoE layer sees
    local = tokens_group / s.cp                            # tokens one die of an active group processes
    # each MTP draft runs the MTP module once: one more MoE layer (DeepSeek-V3 README_WEIGHTS.md: 11.5B; sharded like
    # one MoE layer: assumed)
    mtp = s.mtp_drafts if phase == "decode" else 0
    layers, moe_layers, dense_layers = m.layers + mtp, m.moe_layers + mtp, m.dense_layers
    kh, kc = (c.k_hbm, c.k_compute) if phase == "decode" else (c.k_prefill, c.k_prefill)
    st = Step(phase=phase, k_hbm=kh, k_compute=kc, sku=s.sku, overlap=overlaps(s, phase, tokens_group))

    attn_params = (p.attention_per_layer - p.o_proj_per_layer) / s.tp + p.o_proj_per_layer / (s.o_proj_tp or s.tp)
    # o_proj TP wider than tp gathers its group's tokens: FLOPs per die stay those of attention / tp
    st.parts.append(Part("attention weights", bytes=layers * attn_params * 1e9 * q.attention,
                         flops=layers * local * 2 * p.attention_per_layer / s.tp * 1e9, int8=_int8(q.attention),
                         eta=eff["eta_gemm"]))
    f_tok, kv_seq = _attention(s, m, phase, ctx)
    seqs = (seqs_group if seqs_group is not None else tokens_group) / s.cp
    decode = phase == "decode"
    # hybrid (Qwen3-Next): softmax attention in the full layers only; each decode step reads every sequence's
    # linear-attention state once (its per-token FLOPs are not modelled)
    att_layers = min(layers, m.kv.full_layers) if m.kv.full_layers else layers
    state = m.kv.state_bytes_per_seq / min(s.tp, m.kv.state_split) if m.kv.state_bytes_per_seq else 0.0
    st.parts.append(Part("attention core (KV cache)" if decode else "attention core",
                         bytes=(att_layers * seqs * kv_seq + seqs * state) if decode else 0.0,
                         flops=att_layers * local * f_tok, int8=False, eta=eff["eta_attn"]))
    if dense_layers:
        dense = p.dense_ffn_per_layer * 1e9 / s.tp
        st.parts.append(Part("dense FFN", bytes=dense_layers * dense * q.dense, flops=dense_layers * local * 2 * dense,
                             int8=_int8(q.dense), eta=eff["eta_gemm"]))
    shared = m.shared_experts * p.expert * 1e9
    if shared and not s.shared_in_ep:
        st.parts.append(Part("shared expert", bytes=moe_layers * shared / s.tp * q.shared,
                             flops=moe_layers * local * 2 * shared / s.tp, int8=_int8(q.shared), eta=eff["eta_gemm"]))
    slots = m.routed_experts + s.extra_expert_slots
    k_eff = m.experts_per_token + (m.shared_experts if s.shared_in_ep else 0)
    if slots:                 # a dense model (Qwen3-32B) has no routed experts
        per_die = math.ceil(slots / s.moe_ep)
        # share of local experts that get a token (uniform routing, derived)
        hit = 1 - (1 - min(1.0, k_eff / slots)) ** total_tokens
        expert = p.expert * 1e9 / s.moe_tp
        st.parts.append(Part("routed experts", bytes=moe_layers * per_die * hit * expert * q.experts,
                             flops=moe_layers * per_die * total_tokens * k_eff / slots * 2 * expert,
                             int8=_int8(q.experts), eta=eff["eta_gemm"]))
    head_tp = s.lm_head_tp or s.tp
    # decode: every token samples, spread over the stage's dies; prefill: the last token of each prompt
    head_tokens = total_tokens * head_tp / (s.dies / s.pp) if phase == "decode" else tokens_group / max(ctx, 1)
    st.parts.append(Part("lm_head", bytes=p.lm_head * 1e9 / head_tp * q.embedding,
                         flops=head_tokens * 2 * p.lm_head * 1e9 / head_tp, int8=_int8(q.embedding),
                         eta=eff["eta_gemm"]))

    if s.moe_ep > 1 and slots:
        dispatched = tokens_group / (s.tp * s.cp)
        # dispatch INT8 activations + scale when the experts run INT8 GEMMs, combine BF16 (CM §4.2.1)
        msgs = {"dispatch": m.hidden + ep_comm()["dispatch_scale_bytes"] if _int8(q.experts) else 2 * m.hidden,
                "combine": 2 * m.hidden}
        for op, msg in msgs.items():
            t, nbytes, link = ep_op_time(s, phase, op, dispatched, msg, k_eff)
            name = f"EP {op} over {LINK_NAMES[link]}"
            st.comm[name] = moe_layers * t
            st.comm_bytes[name] = moe_layers * nbytes
    ar_bytes = local * m.hidden * 2
    if s.tp > 1:
        t, link = _allreduce(s, s.tp, ar_bytes)
        count = layers + dense_layers      # after attention; after the dense FFN (TP-split)
        st.comm[f"TP all-reduce over {LINK_NAMES[link]}"] = count * t
        st.comm_bytes[f"TP all-reduce over {LINK_NAMES[link]}"] = count * ar_bytes
    if s.moe_tp > 1 and s.moe_ep == 1:        # experts split by TP only (with EP the combine reduces them)
        moe_bytes = ar_bytes * max(1.0, s.moe_tp / s.tp)     # the MoE TP group gathers its DP groups' tokens
        t, link = _allreduce(s, s.moe_tp, moe_bytes)
        name = f"MoE TP all-reduce over {LINK_NAMES[link]}"
        st.comm[name] = moe_layers * t
        st.comm_bytes[name] = moe_layers * moe_bytes
    _local_tp_comm(s, m, st, layers, local, local if decode else local / max(ctx, 1))
    st.overhead = layers * layer_overhead(s.model_info) * c.k_fixed
    st.host = (c.host_ms + c.host_draft_ms * (s.draft_passes if phase == "decode" else 0)) * 1e-3
    if s.pp > 1:
        _, inter = link_keys(s)
        ln = links()[inter]
        send = (s.pp - 1) * (ln.latency_us * 1e-6 + tokens_group * m.hidden * 2 / (ln.gbps * 1e9 * eff["eta_link"]))
        st.comm[f"PP stage send over {LINK_NAMES[inter]}"] = send
    return st
