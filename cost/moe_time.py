"""Time of one micro-batch of a mixture of experts' pipeline stage.

An MoE layer is the transformer's layer (cost.transformer_time.layer_times: attention, its
tensor- and context-parallel traffic, and the shared experts as an MLP every token passes
through) plus what routing adds: the router, the permutation of tokens to their experts and
back, the experts' grouped GEMMs on the tokens routed to this rank, and the token dispatch and
combine all-to-alls over the expert-parallel group (Megatron-Core's MoEAlltoAllTokenDispatcher
and flex dispatcher; DeepSeek-V3 report sec. 3.2). Dense layers (DeepSeek's first three) are
the transformer's layers; the logits and the loss are the transformer's too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np

from .collectives import all_gather_s, all_to_all_s, domain_members, group_link, inside_domain
from .deepep import internode_dedup_runs
from .degrees import Degrees
from .efficiency import Efficiency
from .errors import named
from .flops import attention_gemms, mlp_gemms
from .inputs import Array, ClusterSpec, TrainingSpec, Value
from .kernels import gemm_s, gemm_shape_factor, memory_bound_s
from .moe_epilogue import epilogue_cost
from .moe_layout import balanced_layers, moe_stage_shape, stage_mix
from .overlap import exposed_s
from .precision import element_bytes, gemm_input_bytes, state_bytes
from .transformer_time import (
    _FP8_CAST_BYTES,
    LayerTimes,
    StageShape,
    forward_kernels,
    host_s,
    layer_times,
    logits_s,
)
from .workload import StageCost

if TYPE_CHECKING:
    from .moe import MoEModelSpec

__all__ = ["GROUPED_TILE_ROWS", "DispatchBytes", "dispatch_bytes", "expert_layer_times",
           "grouped_gemm_s", "overlap_refusal", "overlap_runs", "paired_exposed_parts_s",
           "paired_share", "stage_cost", "sync_wait_s"]

ROUTER_PASSES = 4.0
"""fp32 passes over the router's tokens x experts scores per forward: the score function
(softmax or sigmoid) written and read, top-k read, the selected probabilities written."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DispatchBytes:
    """Bytes one rank sends in one dispatch (or combine) all-to-all of one MoE layer and
    micro-batch: to ranks of other scale-up domains (over its NIC) and to ranks of its own."""

    remote_bytes: Array
    local_bytes: Array


def _draws_miss(pool: float, held: Array, draws: int) -> Array:
    """Probability that `draws` experts drawn uniformly without replacement from `pool`
    miss all `held` of them."""
    miss: Array = np.ones(np.shape(held))
    for i in range(draws):
        miss = miss * np.clip((pool - held - i) / (pool - i), 0.0, 1.0)
    return miss


def _choose(n: Value, k: int) -> Array:
    """n choose k for a real array n (the falling factorial over k!)."""
    out: Array = np.ones(np.shape(n))
    for i in range(k):
        out = out * np.maximum(np.asarray(n, dtype=np.float64) - i, 0.0) / (i + 1.0)
    return out


def _domain_miss(model: MoEModelSpec, domains: Array) -> Array:
    """Probability that none of a token's top_k experts lies in one given domain of
    experts / domains experts (the EP ranks of one scale-up domain). Force-balanced routing
    draws them uniformly without replacement; with group-limited routing (expert_groups g,
    group_top_k m: DeepSeek-V3's node-limited routing, arXiv 2412.19437 sec. 2.1.2, and
    Megatron-Core's --moe-router-num-groups / --moe-router-group-topk) from the experts of m
    groups drawn uniformly. A domain holding q = g / domains whole groups is missed when j of
    them are chosen (hypergeometric) and no expert falls in those j; a domain inside a group
    when its group is not chosen, or no expert falls in its share of the chosen ones."""
    e = float(model.experts)
    g, m, k = float(model.expert_groups), model.group_top_k, model.top_k
    if g <= 1.0:
        return _draws_miss(e, e / domains, k)
    size = e / g
    pool = m * size
    q = g / domains
    whole: Array = np.zeros(np.shape(domains))
    for j in range(m + 1):
        chosen = _choose(q, j) * _choose(g - q, m - j) / _choose(np.float64(g), m)
        whole = whole + chosen * _draws_miss(pool, np.full(np.shape(q), j * size), k)
    inside = (1.0 - m / g) + m / g * _draws_miss(pool, e / domains, k)
    return np.where(q >= 1.0, whole, inside)


def dispatch_bytes(model: MoEModelSpec, cluster: ClusterSpec, d: Degrees, *, tokens: Value,
                   act_bytes: float, eff: Efficiency) -> DispatchBytes:
    """Each of `tokens` tokens on this rank goes to top_k experts spread evenly over the ep
    ranks (spaced etp apart): (ep - 1)/ep of the copies leave the rank, the share in other
    scale-up domains over the NIC. With deduplication (eff.ep_dedup: DeepEP, HybridEP) a token
    crosses once to each remote domain holding one of its experts and NVLink fans it out
    there, on GPUs whose DeepEP runs internode (cost.deepep: SM90 and newer). A copy is
    hidden·act_bytes; the busiest rank carries expert_imbalance times the mean."""
    n = d.ep
    local_members = domain_members(cluster, stride=d.etp, size=n)
    domains = n / local_members
    copy = model.hidden * act_bytes * eff.expert_imbalance
    copies = tokens * model.top_k * copy
    plain_remote = copies * (n - local_members) / n
    plain_local = copies * (local_members - 1.0) / n
    hit_domains = (domains - 1.0) * (1.0 - _domain_miss(model, domains))
    spans = domains > 1.0
    dedup = eff.ep_dedup & spans & internode_dedup_runs(cluster.gpu.compute_capability)
    return DispatchBytes(
        remote_bytes=np.where(dedup, tokens * copy * hit_domains, plain_remote),
        local_bytes=np.where(dedup, copies * (local_members - 1.0) / local_members,
                             plain_local))


def expert_layer_times(model: MoEModelSpec, cluster: ClusterSpec, training: TrainingSpec,
                       d: Degrees, eff: Efficiency, *, shape: StageShape
                       ) -> tuple[LayerTimes, Array, Array]:
    """One MoE layer and micro-batch on one GPU: its LayerTimes (the transformer's layer with
    the shared experts as its MLP, plus router, permutation and experts) and the exposed
    expert-parallel traffic (dispatch and combine all-to-alls forward and backward, again under
    full recompute; with etp > 1 the all-gather and reduce-scatter of the routed tokens inside
    the expert's tensor-parallel group), hidden behind compute as far as eff.ep_overlap says."""
    base = layer_times(model, cluster, training, d, eff, shape=shape,
                       ffn_hidden=model.shared_ffn_hidden)
    act = element_bytes(training.precision)["activation"]
    tokens = shape.tokens_per_micro_batch / d.tp  # the sequence-parallel shard enters routing
    work = _routed_work_s(model, cluster, training, d, eff, tokens=tokens, act_bytes=act)
    full, selective = d.recompute >= 2, d.recompute >= 1
    forward = base.forward_s + work["forward"]
    backward = base.backward_s + 2.0 * (work["forward"] - work["quantise"] - work["epilogue"]) \
        + work["quantise_backward"] + work["epilogue_backward"] + work["wgrad_extra"]
    redone = work["activation"] + _selective_extra_s(model, cluster, training, d, eff,
                                                     tokens=shape.tokens_per_micro_batch,
                                                     act_bytes=act)
    recompute = base.recompute_s + np.where(full, work["forward"],
                                            np.where(selective, redone, 0.0))
    sent = dispatch_bytes(model, cluster, d, tokens=tokens, act_bytes=act, eff=eff)
    one = all_to_all_s(cluster, remote_bytes=sent.remote_bytes, local_bytes=sent.local_bytes,
                       size=d.ep, fraction=eff.network_fraction,
                       message_s=eff.message_overhead_s)
    etp_link = group_link(cluster, stride=1.0, size=d.etp, fraction=eff.network_fraction)
    gathered = tokens * model.top_k * eff.expert_imbalance * model.hidden * act * d.etp
    etp_comm = all_gather_s(gathered, d.etp, etp_link.bandwidth_bytes_per_s,
                            etp_link.latency_s)
    ep_forward, ep_backward = paired_exposed_parts_s(
        forward_comm_s=2.0 * (one + etp_comm),  # dispatch and combine, forward
        backward_comm_s=(2.0 + np.where(full, 2.0, 0.0)) * (one + etp_comm),  # (+ redone)
        forward_s=forward, backward_s=backward + recompute, d=d, eff=eff,
        mtp_layers=model.mtp_layers)
    # the all-to-alls cross no NIC where every ep peer shares the rank's scale-up domain
    ep_inside = (sent.remote_bytes <= 0.0) & inside_domain(cluster, stride=1.0, size=d.etp)
    wait = sync_wait_s(model, d, eff, device_s=forward,
                       precision=training.precision) * np.where(full, 2.0, 1.0)
    return (replace(base, forward_s=forward, backward_s=backward, recompute_s=recompute,
                    scale_up_forward_s=base.scale_up_forward_s
                    + np.where(ep_inside, ep_forward, 0.0),
                    scale_up_backward_s=base.scale_up_backward_s
                    + np.where(ep_inside, ep_backward, 0.0)),
            ep_forward + ep_backward, wait)


def paired_exposed_parts_s(*, forward_comm_s: Array, backward_comm_s: Array,
                           forward_s: Array, backward_s: Array, d: Degrees, eff: Efficiency,
                           mtp_layers: int = 0) -> tuple[Array, Array]:
    """Exposed all-to-all seconds of one MoE layer and micro-batch, in its forward pass and in
    its backward pass (with the redone forward). The overlap pairs one
    micro-batch's forward with another's backward, layer by layer (Megatron-Core's
    --overlap-moe-expert-parallel-comm, DeepSeek-V3's DualPipe, arXiv 2412.19437 sec. 3.2.1:
    each chunk's communication hides behind the other chunk's computation): the forward
    pass's dispatch and combine hide behind the paired backward's compute, the backward's
    (and, under full recompute, the redone forward's) behind the paired forward's, each at
    most as long as that window (cost.overlap.exposed_s), on the share of chunks that have a
    partner (paired_share), where the schedule can pair them at all (overlap_runs)."""
    hideable = eff.ep_overlap * paired_share(d) * overlap_runs(d, eff, mtp_layers=mtp_layers)
    return (exposed_s(forward_comm_s, backward_s, slowdown=eff.overlap_slowdown,
                      hideable=hideable),
            exposed_s(backward_comm_s, forward_s, slowdown=eff.overlap_slowdown,
                      hideable=hideable))


_MEGATRON_OVERLAP_RULES: tuple[tuple[str, Callable[..., Any]], ...] = (
    ("it needs ep > 1", lambda ep, pp, vs, recompute, mtp: ep > 1),
    ("with pp > 1 it needs interleaved stages (virtual_stages >= 2)",
     lambda ep, pp, vs, recompute, mtp: (pp <= 1) | (vs > 1)),
    ("it excludes full recompute", lambda ep, pp, vs, recompute, mtp: recompute < 2),
    ("it allows one multi-token-prediction layer at most",
     lambda ep, pp, vs, recompute, mtp: mtp <= 1),
)
"""Megatron-Core's conditions for --overlap-moe-expert-parallel-comm, each with what a refused
plan lacks: its TransformerConfig asserts expert parallelism, virtual stages where pp > 1 (the
combined 1F1B schedule pairs the chunks of the interleaved schedule), no full recompute and
at most one multi-token-prediction layer (core_v0.15.0
megatron/core/transformer/transformer_config.py, __post_init__, the asserts under
`if self.overlap_moe_expert_parallel_comm`). Arguments: ep, pp, virtual stages, the recompute
code (cost.codec: 2 is full) and the model's MTP layers, arrays or numbers."""
_RULES_OF_SCHEDULE = {"megatron": _MEGATRON_OVERLAP_RULES,
                      "dualpipe": _MEGATRON_OVERLAP_RULES[:1]}
"""Efficiency.ep_overlap_schedule's schedules and the rules each keeps: DeepSeek's DualPipe
pairs the forward and backward chunks of a plain pipeline (arXiv 2412.19437 sec. 3.2.1,
fig. 5): expert parallelism is all it needs."""


def overlap_runs(d: Degrees, eff: Efficiency, *, mtp_layers: int = 0) -> Array:
    """1.0 where the stack's schedule runs the expert all-to-all overlap for the plan, else 0.0
    (Efficiency.ep_overlap_schedule; _MEGATRON_OVERLAP_RULES): a plan the schedule cannot
    overlap hides nothing."""
    rules = named(_RULES_OF_SCHEDULE, eff.ep_overlap_schedule, field="stack.ep_overlap_schedule")
    runs: Array = np.ones(np.shape(d.ep), dtype=bool)
    for _, holds in rules:
        runs = runs & holds(d.ep, d.pp, d.vs, d.recompute, mtp_layers)
    return np.where(runs, 1.0, 0.0)


def overlap_refusal(*, ep: int, pp: int, virtual_stages: int, recompute: int, mtp_layers: int,
                    schedule: str = "megatron") -> str | None:
    """What one plan lacks for the schedule's expert all-to-all overlap (the first rule it
    breaks, in words), or None where the schedule runs it: what `tuner plan` says where it
    leaves Megatron's flag out."""
    for lacks, holds in named(_RULES_OF_SCHEDULE, schedule, field="stack.ep_overlap_schedule"):
        if not bool(holds(ep, pp, virtual_stages, recompute, mtp_layers)):
            return lacks
    return None


def paired_share(d: Degrees) -> Array:
    """Share of a step's forward chunks that run beside another micro-batch's backward, the
    only ones whose all-to-alls can hide (Megatron-Core's combined 1F1B overlap, DualPipe):
    all but the first stage's warm-up, p - 1 forwards under 1F1B, 2(p - 1) + (v - 1)p under
    the interleaved schedule (Megatron-LM's get_forward_backward_func), one without a
    pipeline."""
    chunks = d.micro_batches * d.vs
    warmup = np.where(d.vs > 1, 2.0 * (d.pp - 1.0) + (d.vs - 1.0) * d.pp, d.pp - 1.0)
    return np.clip(1.0 - np.maximum(warmup, 1.0) / chunks, 0.0, 1.0)


def _routed_work_s(model: MoEModelSpec, cluster: ClusterSpec, training: TrainingSpec,
                   d: Degrees, eff: Efficiency, *, tokens: Array, act_bytes: float
                   ) -> dict[str, Array]:
    """Forward seconds of routing on one rank: the router GEMM (tokens x hidden x experts) and
    its fp32 scores; permuting the tokens' top_k copies to their experts and back (read and
    write, each way); the experts' grouped GEMMs (grouped_gemm_s), experts/ep local experts
    each on its share of the routed copies, at the training format's rate (fp8: the fp8 peak
    with its longer tiles, cost.kernels.gemm_s `rate_ratio`, and 1-byte inputs); their
    activation function; and the eager work of expert biases and a clamped activation
    (`epilogue`, forward; `epilogue_backward`; cost.moe_epilogue). `activation` is the
    activation function with its eager clamp, what selective recompute redoes;
    `quantise_backward` the fp8 casts of the backward pass (_expert_fp8_casts_s)."""
    gpu = cluster.gpu
    peak, hbm = gpu.peak_for(training.precision), gpu.hbm_bandwidth_bytes_per_s
    fraction = eff.gemm_fraction_for(gpu)
    ratio = peak / gpu.peak_for("bf16") if training.precision == "fp8" else 1.0
    h = float(model.hidden)
    router = gemm_s(tokens, h, float(model.experts), peak_flops_per_s=peak,
                    hbm_bytes_per_s=hbm, element_bytes=act_bytes, fraction=fraction, eff=eff)
    router = router + memory_bound_s(ROUTER_PASSES * 4.0 * tokens * model.experts,
                                     hbm_bytes_per_s=hbm, eff=eff)
    routed = tokens * model.top_k * eff.expert_imbalance  # copies the busiest rank computes
    permute = memory_bound_s(2.0 * act_bytes * h * (tokens + routed), hbm_bytes_per_s=hbm,
                             eff=eff)
    if not model.routes:  # one expert: the dense MLP
        router, permute = 0.0 * router, 0.0 * permute
    local_experts = model.experts / d.ep
    per_expert = routed * d.etp / local_experts
    experts: Value = 0.0
    wgrad: Value = 0.0
    grad_bytes = state_bytes(training.precision, eff).gradient
    for g in mlp_gemms(h, model.expert_ffn_hidden, model.gated_mlp):
        k, n = g.per_gpu(d.etp)
        gemm = partial(grouped_gemm_s, local_experts, per_expert, k, n,
                       peak_flops_per_s=peak, hbm_bytes_per_s=hbm,
                       element_bytes=gemm_input_bytes(training.precision), fraction=fraction,
                       eff=eff, padded=model.routes, rate_ratio=ratio)
        experts = experts + gemm()
        wgrad = wgrad + gemm(accumulate_bytes=grad_bytes)
    epilogue = epilogue_cost(model, eff, act_bytes=act_bytes, etp=d.etp)
    rows = routed * d.etp  # the rows the experts' GEMMs run, each expert_ffn_hidden/etp wide
    clamp = memory_bound_s(rows * epilogue.activation_bytes, hbm_bytes_per_s=hbm, eff=eff)
    activation = np.asarray(clamp + memory_bound_s(
        act_bytes * eff.elementwise_passes_ffn * routed * model.expert_ffn_hidden,
        hbm_bytes_per_s=hbm, eff=eff))
    biases = memory_bound_s(rows * (epilogue.forward_bytes - epilogue.activation_bytes),
                            hbm_bytes_per_s=hbm, eff=eff)
    quantise, quantise_backward = _expert_fp8_casts_s(model, training, d, eff, routed=routed,
                                                      hbm_bytes_per_s=hbm)
    return {"forward": router + permute + experts + activation + biases + quantise,
            "activation": activation, "quantise": quantise,
            "quantise_backward": quantise_backward, "epilogue": np.asarray(clamp + biases),
            "epilogue_backward": np.asarray(memory_bound_s(
                rows * epilogue.backward_bytes, hbm_bytes_per_s=hbm, eff=eff)),
            "wgrad_extra": np.asarray(wgrad - experts)}


def _expert_fp8_casts_s(model: MoEModelSpec, training: TrainingSpec, d: Degrees,
                        eff: Efficiency, *, routed: Array, hbm_bytes_per_s: float
                        ) -> tuple[Array, Array]:
    """fp8 quantisation of the experts' GEMM operands per MoE layer and micro-batch, as
    cost.transformer_time quantises a dense MLP's (Transformer Engine's grouped linear layers
    quantise each expert's input and output gradient, cost.transformer_time._FP8_CAST_BYTES
    bytes per element): forward, the second GEMM's input (routed x expert_ffn_hidden/etp) and,
    for routed tokens, the permuted copies entering the first (routed x hidden; the dense
    layer's terms count the token's own input once); backward, the first GEMM's output
    gradient (gate x width) and, routed, the copies' gradient entering the second. 0 outside
    fp8."""
    if training.precision != "fp8":
        zero = np.zeros(np.shape(routed))
        return zero, zero
    per_element = _FP8_CAST_BYTES.get(eff.fp8_recipe, 0.0)  # an unknown recipe: the dense
    # layer's casts (cost.transformer_time._fp8_casts_s) refuse it first
    width = model.expert_ffn_hidden / d.etp
    gate = 2.0 if model.gated_mlp else 1.0
    copies = model.hidden * d.etp if model.routes else 0.0
    forward = routed * (width + copies)
    backward = routed * (gate * width + copies)
    return (np.asarray(memory_bound_s(per_element * forward, hbm_bytes_per_s=hbm_bytes_per_s,
                                      eff=eff)),
            np.asarray(memory_bound_s(per_element * backward, hbm_bytes_per_s=hbm_bytes_per_s,
                                      eff=eff)))


GROUPED_TILE_ROWS = 128.0
"""Rows of one tile of a grouped GEMM: each expert's tokens are padded to a multiple of it
(DeepGEMM's M alignment of 128 for its contiguous grouped layout; CUTLASS grouped GEMM's
128-row threadblock tiles)."""


def grouped_gemm_s(groups: Value, m: Value, k: Value, n: Value, *, peak_flops_per_s: float,
                   hbm_bytes_per_s: float, element_bytes: float, fraction: float,
                   eff: Efficiency, padded: bool = True, rate_ratio: float = 1.0,
                   accumulate_bytes: float = 0.0) -> Array:
    """`groups` GEMMs of (m x k) @ (k x n), one per local expert, in one grouped kernel
    (Transformer Engine's grouped GEMM, CUTLASS, DeepGEMM): the tiles of every group fill the
    GPU together, so cost.kernels' saturating shape factor sees their rows stacked
    (groups·m), and each group wastes the padding of its last tile; HBM traffic reads every
    group's weights. Roofline: the slower of the two (MegaBlocks, Gale et al. 2023, sec. 5:
    grouped and block-sparse expert kernels run near dense-GEMM throughput). Not `padded`:
    a single expert is a plain GEMM of the routed tokens. `rate_ratio`: the format's peak over
    the 16-bit one, lengthening the half-dimension as cost.kernels.gemm_s does.

    `accumulate_bytes` > 0: the weight-gradient GEMM of the same shapes (the same FLOPs,
    reducing over each group's m rows), which reads its two activation operands and adds its
    groups·k·n output into the persistent gradient buffer of that many bytes per element,
    read and written every micro-batch (Megatron-Core's gradient_accumulation_fusion:
    Transformer Engine's GroupedLinear writes the wgrad into `main_grad` with accumulate;
    autograd's .grad accumulation reads and writes it too). Few rows per expert (many local
    experts, small micro-batches) make it memory-bound."""
    rows = groups * m
    fill = np.where((m > 0) & padded,
                    m / (np.ceil(m / GROUPED_TILE_ROWS) * GROUPED_TILE_ROWS), 1.0)
    half_dim = eff.gemm_half_dim * rate_ratio
    rate = peak_flops_per_s * fraction * gemm_shape_factor(rows, k, n, half_dim) * fill
    compute_s = 2.0 * rows * k * n / np.maximum(rate, 1e-30)
    weights = groups * k * n
    moved = np.where(accumulate_bytes > 0.0,
                     element_bytes * (rows * k + rows * n) + 2.0 * accumulate_bytes * weights,
                     element_bytes * (rows * k + weights + rows * n))
    memory_s = moved / (hbm_bytes_per_s * eff.hbm_fraction)
    return np.maximum(compute_s, memory_s)


def _selective_extra_s(model: MoEModelSpec, cluster: ClusterSpec, training: TrainingSpec,
                       d: Degrees, eff: Efficiency, *, tokens: Array, act_bytes: float
                       ) -> Array:
    """What selective recompute of an MoE layer redoes besides the experts' activation
    function (cost.moe_memory.selective_savings_bytes): the two norms (read and write each)
    and, with multi-head latent attention, the query and key/value up projections."""
    gpu = cluster.gpu
    hbm = gpu.hbm_bandwidth_bytes_per_s
    norms = memory_bound_s(4.0 * act_bytes * tokens * model.hidden / d.shard,
                           hbm_bytes_per_s=hbm, eff=eff)
    up: Value = 0.0
    for g in attention_gemms(model):
        if g.name in ("q_up", "kv_up"):
            k, n = g.per_gpu(d.tp)
            up = up + gemm_s(tokens, k, n, peak_flops_per_s=gpu.peak_for(training.precision),
                             hbm_bytes_per_s=hbm, element_bytes=act_bytes,
                             fraction=eff.gemm_fraction_for(gpu), eff=eff)
    return np.asarray(norms + up)


def stage_cost(model: MoEModelSpec, cluster: ClusterSpec, training: TrainingSpec, d: Degrees,
               eff: Efficiency) -> StageCost:
    """One micro-batch on the slowest stage: the fullest stage, or the last with its ends (the
    logits and loss, and the multi-token-prediction modules: an MoE layer, a 2h x h
    projection and the logits again each, DeepSeek-V3 report sec. 2.2) where that is slower,
    as cost.transformer_time.stage_cost (a stage's time the longer of its device and launch
    times); the layers split as cost.moe_layout says."""
    shape = moe_stage_shape(model, d)
    moe, ep_comm, wait = expert_layer_times(model, cluster, training, d, eff, shape=shape)
    dense = layer_times(model, cluster, training, d, eff, shape=shape)
    logits = logits_s(model, cluster, training, shape.tokens_per_micro_batch, d, eff)
    mtp = float(model.mtp_layers)
    ends = (1.0 + mtp) * logits + mtp * _mtp_projection_s(model, cluster, training, d, eff,
                                                          tokens=shape.tokens_per_micro_batch)

    def part(n_moe: Value, n_dense: Value, name: str) -> Array:
        if name == "ep_comm":
            return n_moe * ep_comm
        return n_moe * getattr(moe, name) + n_dense * getattr(dense, name)

    def busy(n_moe: Value, n_dense: Value) -> Array:
        return sum((part(n_moe, n_dense, f) for f in _PARTS), start=np.float64(0.0))

    one = busy(1.0, 0.0)
    full, last = balanced_layers(model, d, shape, end_layers=(ends + mtp * one) / one)
    full_moe, full_dense = stage_mix(model, full)
    last_moe, last_dense = stage_mix(model, last)
    last_moe = last_moe + mtp

    def launch_s(n_moe: Value, n_dense: Value) -> Array:
        """Host seconds to launch the stage's kernels."""
        layers = np.asarray(n_moe + n_dense, dtype=np.float64)
        return host_s(model, d, eff, layers) + _routing_host_s(
            model, d, eff, n_moe, precision=training.precision)

    # a stage takes the longer of running and launching its kernels, plus the GPU's waits for
    # the host (cost.schedule.launch_bound_s)
    last_launch, full_launch = launch_s(last_moe, last_dense), launch_s(full_moe, full_dense)
    last_busy, full_busy = busy(last_moe, last_dense) + ends, busy(full_moe, full_dense)
    last_slower = (np.maximum(last_busy + last_moe * wait, last_launch)
                   >= np.maximum(full_busy + full_moe * wait, full_launch))
    n_moe = np.where(last_slower, last_moe, full_moe)
    n_dense = np.where(last_slower, last_dense, full_dense)
    ends = np.where(last_slower, ends, 0.0)
    act = element_bytes(training.precision)["activation"]
    forward, backward = part(n_moe, n_dense, "forward_s"), part(n_moe, n_dense, "backward_s")
    return StageCost(
        compute_s=forward + backward + ends, recompute_s=part(n_moe, n_dense, "recompute_s"),
        tp_comm_s=part(n_moe, n_dense, "tp_comm_s"), cp_comm_s=part(n_moe, n_dense, "cp_comm_s"),
        forward_s=forward, backward_s=backward,
        bubble_unit_s=busy(n_moe, n_dense) + ends / d.pp,
        send_bytes=act * shape.tokens_per_micro_batch * model.hidden / d.tp,
        ep_comm_s=part(n_moe, n_dense, "ep_comm"), units=n_moe + n_dense,
        host_s=np.where(last_slower, last_launch, full_launch),
        host_wait_s=n_moe * wait,
        scale_up_forward_s=part(n_moe, n_dense, "scale_up_forward_s"),
        scale_up_backward_s=part(n_moe, n_dense, "scale_up_backward_s"))


ROUTING_FORWARD_KERNELS = 40.0
"""Kernels (PyTorch ops) an MoE layer's routing launches per micro-batch forward beyond a
dense layer, counted in Megatron-Core's TopKRouter and MoEAlltoAllTokenDispatcher with the
fused permutation: the router's GEMM and fp32 cast, top-k and softmax, the auxiliary loss and
its scaler and logging (about 12), force-balanced logits (2); the dispatcher's preprocess
(token counts per expert, splits, the all-gather of the counts and their reductions: about
9) and the device-to-host copies of the splits (4); the permutation, the two all-to-alls
(tokens and probabilities) and the sort by local expert, dispatch and combine (about 10)."""

ROUTING_BACKWARD_KERNELS = 22.0
"""The same backward: permutation, all-to-alls, sorts and unpermutation (about 10), the
router's top-k/softmax, auxiliary loss and GEMM gradients (about 12); the token counts need
none."""

EXPERT_GEMM_KERNELS = 6.0
"""GEMMs launched per local expert and micro-batch: the two expert GEMMs forward (fc1, fc2)
and their data and weight gradients backward. Transformer Engine's GroupedLinear
(Megatron-Core's TEGroupedMLP) issues one cuBLAS GEMM per expert (general_grouped_gemm)."""


QUANTIZE_KERNELS = {"delayed": 0.0, "current": 3.0, "mxfp8": 1.0, "blockwise": 1.0}
"""Kernels Transformer Engine launches to quantise one expert's GEMM operand, by fp8 recipe.
GroupedLinear (TE 2.8-2.17, module/grouped_linear.py; 2.17's grouped-tensor path is opt-in,
NVTE_GROUPED_LINEAR_USE_FUSED_GROUPED_GEMM) quantises the routed tokens with
`tex.split_quantize`, whose multi_tensor_quantize_impl (pytorch/csrc/extensions/cast.cpp) has
a fused multi-tensor kernel (nvte_multi_cast_transpose) for delayed-scaling quantizers only and
otherwise calls each expert's quantizer in turn (pytorch/csrc/quantizer.cpp): MXFP8Quantizer and
Float8BlockQuantizer one nvte_quantize_v2 each (row- and column-wise copies in one kernel);
Float8CurrentScalingQuantizer three (nvte_compute_amax_with_config,
nvte_compute_scale_from_amax, nvte_quantize_v2). Delayed scaling: 0 per expert, one kernel per
call (QUANTIZE_CALLS). Weights are quantised on a step's first micro-batch only (Megatron-Core's
schedules call set_is_first_microbatch and TE caches the fp8 weights). Not counted: MXFP8's
scale swizzles before each GEMM (TE 2.10 csrc/extensions/gemm.cpp, two per grouped GEMM),
which the dense layers' count lacks too."""

QUANTIZE_CALLS = 2.0
"""split_quantize calls of an MoE layer's experts per micro-batch, forward and again backward:
fc1's and fc2's inputs forward, fc2's and fc1's output gradients backward."""


def quantize_kernels(precision: str, eff: Efficiency, local_experts: Value) -> Array:
    """Kernels an MoE layer's experts launch per micro-batch to quantise their GEMM operands,
    forward (the backward launches as many): QUANTIZE_CALLS calls, each QUANTIZE_KERNELS per
    local expert, or one fused kernel under delayed scaling; none outside fp8 (an unknown
    recipe counts none, as cost.moe_time's cast bytes do)."""
    if precision != "fp8":
        return np.zeros(np.shape(local_experts))
    per_expert = QUANTIZE_KERNELS.get(eff.fp8_recipe, 0.0)
    per_call = np.asarray(local_experts) * per_expert if per_expert else np.ones(
        np.shape(local_experts))
    return QUANTIZE_CALLS * per_call


def _routing_host_s(model: MoEModelSpec, d: Degrees, eff: Efficiency,
                    moe_layers: Value, *, precision: str) -> Array:
    """Host seconds of the routing kernels, the per-expert GEMMs, the experts' fp8
    quantisation (quantize_kernels) and eager bias and clamp kernels
    (cost.moe_epilogue), forward and backward, of `moe_layers` layers (none with
    CUDA graphs, and none for a single expert, which routes nothing)."""
    if eff.cuda_graphs or not model.routes:
        return np.zeros(np.shape(moe_layers))
    local = model.experts / d.ep
    epilogue = epilogue_cost(model, eff, act_bytes=element_bytes(precision)["activation"],
                             etp=d.etp)
    kernels = (ROUTING_FORWARD_KERNELS + ROUTING_BACKWARD_KERNELS
               + EXPERT_GEMM_KERNELS * local + 2.0 * quantize_kernels(precision, eff, local)
               + epilogue.kernels(local, backward=False)
               + epilogue.kernels(local, backward=True))
    return np.asarray(moe_layers) * kernels * eff.launch_s


def sync_wait_s(model: MoEModelSpec, d: Degrees, eff: Efficiency, *, device_s: Array,
                precision: str) -> Array:
    """Seconds one MoE layer's forward leaves the GPU waiting for the host. Dropless routing
    reads the token counts per expert on the host before its all-to-all (the splits) and
    grouped GEMM (the rows per expert): a device-to-host copy that waits for every kernel
    queued before it, so the host cannot run ahead of the GPU past it (Megatron-Core's
    MoEAlltoAllTokenDispatcher `cuda_sync_point` 'before_ep_alltoall' when dropless with
    ep > 1 or several local experts; the static-shape modes, drop-and-pad and the flex
    dispatchers' worst-case budgets, remove it and are what full CUDA graphs capture). From
    one sync to the next the layer's forward then takes the longer of launching its kernels
    (the dense layer's, ROUTING_FORWARD_KERNELS, two GEMMs per local expert, the fp8
    quantisation of their inputs, quantize_kernels, and the eager bias and clamp kernels,
    cost.moe_epilogue) and running them (`device_s`): the wait is
    max(host - device, 0). None with CUDA graphs or one expert."""
    if eff.cuda_graphs or not model.routes:
        return np.zeros(np.shape(device_s))
    local = model.experts / d.ep
    epilogue = epilogue_cost(model, eff, act_bytes=element_bytes(precision)["activation"],
                             etp=d.etp)
    kernels = (forward_kernels(model, eff) + ROUTING_FORWARD_KERNELS
               + EXPERT_GEMM_KERNELS / 3.0 * local + quantize_kernels(precision, eff, local)
               + epilogue.kernels(local, backward=False))
    return np.maximum(kernels * eff.launch_s - device_s, 0.0)


_PARTS = ("forward_s", "backward_s", "recompute_s", "tp_comm_s", "cp_comm_s", "ep_comm")


def _mtp_projection_s(model: MoEModelSpec, cluster: ClusterSpec, training: TrainingSpec,
                      d: Degrees, eff: Efficiency, *, tokens: Array) -> Array:
    """A multi-token-prediction module's projection of the concatenated hidden state and
    next-token embedding (2h -> h, column-parallel), forward and backward."""
    gpu = cluster.gpu
    gemm = gemm_s(tokens, 2.0 * model.hidden, model.hidden / d.tp,
                  peak_flops_per_s=gpu.peak_for(training.precision),
                  hbm_bytes_per_s=gpu.hbm_bandwidth_bytes_per_s,
                  element_bytes=element_bytes(training.precision)["activation"],
                  fraction=eff.gemm_fraction_for(gpu), eff=eff)
    return 3.0 * gemm
