"""Efficiency parameters: how close real kernels and collectives come to datasheet peaks.

These are the model's only free parameters. Defaults were fitted by least squares to the
published Megatron-LM runs in shared/validation (see benchmarks/accuracy.py); `tuner calibrate`
fits them to a user's own measurements.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .inputs import GPUSpec

__all__ = ["DEFAULT_EFFICIENCY", "FALLBACK_GEMM_FRACTION", "Efficiency"]

FALLBACK_GEMM_FRACTION = 0.6
"""GEMM fraction of a GPU with no calibrated value: conservative, below every fitted value of
the catalog (V100, A100, H100), as a new part's kernels are rarely as tuned at first."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Efficiency:
    """Fractions of peak and overheads; each field documents its role and unit."""

    gemm_fraction: float | None = None
    """Fraction of dense peak FLOP/s a large GEMM sustains in training; None: the GPU's own
    (GPUSpec.gemm_fraction, from the catalog), else FALLBACK_GEMM_FRACTION."""
    gemm_fraction_by_gpu: tuple[tuple[str, float], ...] = ()
    """(GPU name, GEMM fraction) pairs of a calibration profile; they win over the rest."""
    gemm_half_dim: float = 256.0
    """A GEMM dimension d runs at d / (d + gemm_half_dim) of the large-GEMM rate (tiles, waves)."""
    attention_fraction: float = 0.55
    """Fraction of dense peak the attention core (QK^T, softmax-weighted V) sustains."""
    flash_attention: bool = True
    """Fused causal attention (scores never stored, masked half skipped), as in every current
    stack; False models the unfused softmax of Megatron-LM before 2023."""
    elementwise_passes_hidden: float = 10.0
    """Activation-sized (tokens x hidden) HBM passes per layer forward: two norms (read, write)
    and two fused bias-dropout-add kernels (three reads, one write each)."""
    elementwise_passes_ffn: float = 4.0
    """Tokens x ffn_hidden HBM passes per layer forward: bias and activation function."""
    softmax_passes: float = 4.0
    """Score-matrix HBM passes per layer forward of unfused attention (0 with flash attention)."""
    hbm_fraction: float = 0.85
    """Fraction of datasheet HBM bandwidth that memory-bound kernels reach."""
    network_fraction: float = 0.80
    """Fraction of link bandwidth that NCCL collectives reach (bus bandwidth / link rate)."""
    message_overhead_s: float = 1e-6
    """Seconds a rank spends posting one message of a one-shot (direct) collective."""
    dp_overlap: float = 1.0
    """Share of the pass next to it that hides data-parallel traffic: gradient buckets reduce
    during the last backward, weight gathers during the first forward (Megatron-Core, DeepSpeed
    and PyTorch DDP/FSDP all overlap so; 0 models Megatron-LM before 2022)."""
    dp_bucket_params: float | None = None
    """Parameters per data-parallel gradient bucket (ZeRO 0-2): each bucket is a collective of
    its own (its gradients' reduce-scatter or all-reduce, its weights' all-gather) and pays the
    ring's latency, (n - 1) message steps, once. None: Megatron-Core's default bucket,
    max(4e7, 1e6 x dp x cp) parameters ("larger DP sizes need larger buckets to ensure
    collectives do not become latency-bound", DistributedDataParallelConfig.bucket_size;
    the data-parallel group with context parallel, pg_collection.dp_cp). 0: one collective
    per model chunk (no bucketing: Megatron without overlap_grad_reduce). DeepSpeed's ZeRO buckets
    5e8 elements (reduce_bucket_size, allgather_bucket_size)."""
    overlap_slowdown: float = 0.15
    """Seconds of compute lost per second of communication hidden behind it: NCCL kernels take
    SMs and HBM bandwidth from the GEMMs they overlap (a few of 108-132 SMs, and their copies)."""
    tp_overlap: float = 0.8
    """Share of sequence-parallel all-gathers and reduce-scatters hidden behind the GEMMs they
    feed, inside an NVLink domain: Transformer Engine's userbuffers overlap
    (Megatron-Core's --tp-comm-overlap) pipelines them in chunks, and the first or last chunk
    stays exposed; 0 for stacks before 2023. 0.8 fits the Megatron-Core runs of
    shared/validation best among 0.5-0.9 with the H100 GEMM fraction refitted."""
    expert_imbalance: float = 1.0
    """Tokens the busiest expert rank receives over the mean (>= 1): 1.0 for the
    force-balanced benchmarks frameworks publish (Megatron-Core's
    --moe-router-force-load-balancing); natural routing with an auxiliary balancing loss runs
    above it (a mixture of experts only)."""
    ep_overlap: float = 0.0
    """Share of the expert-parallel all-to-alls hidden behind the compute of another
    micro-batch (Megatron-Core's --overlap-moe-expert-parallel-comm, DeepSeek's DualPipe); 0:
    the all-to-alls stay exposed, as by default."""
    ep_overlap_schedule: str = "megatron"
    """Which pipeline schedule pairs one micro-batch's forward with another's backward for
    that overlap (cost.moe_time.overlap_runs): "megatron" (Megatron-Core's combined 1F1B, which
    refuses plans without expert parallelism, a pipeline without virtual stages, full
    recompute or more than one MTP layer) or "dualpipe" (DeepSeek's DualPipe, arXiv
    2412.19437 sec. 3.2.1, which pairs the chunks of a plain pipeline)."""
    ep_dedup: bool = True
    """A token crosses to each remote scale-up domain once and is fanned out to its experts
    there over NVLink (DeepEP, Megatron-Core's HybridEP; DeepSeek-V3 report sec. 3.2.2);
    False: every routed copy crosses on its own (NCCL all-to-all)."""
    expert_epilogue: str = "megatron"
    """How the stack runs the experts' biases and clamped activation where a model has them
    (cost.moe_epilogue.EPILOGUES): "megatron" (Megatron-Core's TEGroupedMLP: the second
    GEMM's bias and the clamp as eager kernels), "automodel" (NeMo Automodel: both biases
    eager, the clamp compiled) or "fused" (Transformer Engine's operation fuser)."""
    layers_fraction: float | None = None
    """Fraction of dense peak FLOP/s the convolutions (implicit GEMMs) and dense layers of a
    layers model sustain at large shapes; None: the GPU's own (GPUSpec.layers_fraction, from
    the catalog), else its GEMM fraction (gemm_fraction_for). Small channel counts and batches
    are discounted further by `layers_half_dim`."""
    layers_fraction_by_gpu: tuple[tuple[str, float], ...] = ()
    """(GPU name, layers fraction) pairs of a calibration profile; they win over the rest."""
    layers_half_dim: float = 128.0
    """A convolution's implicit-GEMM dimension d (batch x output pixels, output channels,
    input channels x kernel area) runs at d / (d + layers_half_dim) of the large-shape rate
    on tensor cores: cuDNN's and CUTLASS's tensor-core convolution tiles are 64-256 wide with
    a K step of 32 (CUTLASS generator.py, GenerateSM70_TensorOp_884 and later: threadblocks
    256x128x32 down to 64x64x32), half the 256-wide tiles of large transformer GEMMs."""
    layers_half_dim_simt: float = 32.0
    """The same half dimension where the convolution runs on CUDA cores (SIMT: fp32 on GPUs
    without TF32 tensor cores, K80/P100/V100): their FMA units need a quarter of the tile a
    tensor core needs to stay busy, and the SIMT kernels come as narrow as the CIFAR
    networks' 16-64 channels (CUTLASS generator.py, GenerateSM50_Simt: threadblocks
    128x128x8, 128x64x8, 64x64x8, 128x32x8, 32x128x8; cuDNN's Maxwell/Pascal kernels
    `scudnn_128x32`, `scudnn_128x64`, `scudnn_128x128`), so 32 channels lose half the rate,
    not the five sixths a 128-wide tile would."""
    layers_winograd: float = 1.08
    """How much faster fp32 convolutions run on GPUs without tensor cores for fp32 (before
    Ampere's TF32) than their FLOPs at the layers fraction and the SIMT shape discount say:
    cuDNN picks Winograd and FFT algorithms for 3x3 convolutions there, which need fewer
    multiply-adds (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", CVPR
    2016: 2.25x fewer for F(2x2, 3x3), 4x for F(4x4, 3x3)) but add the transforms' passes
    through memory, and a ResNet-50 spends half its FLOPs in 1x1 convolutions no Winograd
    algorithm takes. 1.08 fits V100 FP32 ResNet-50 v1.5 to NVIDIA's DeepLearningExamples
    (1 GPU, batch 256: 16 GB 367 img/s, -1.6%; 32 GB 356 img/s, +1.4%) with the V100's GEMM
    fraction and layers_half_dim_simt."""
    layers_forward_passes: float = 5.0
    """Output-sized HBM passes per layer forward besides the convolution: batch norm in
    training reads its input for the statistics, reads it again and writes the output (cuDNN's
    two-kernel batch norm), ReLU (in place) reads and writes it."""
    layers_backward_passes: float = 8.0
    """Output-sized HBM passes per layer backward: the ReLU gradient (read gradient and output,
    write), batch norm's backward (read gradient and input for the reductions, read both again
    and write the input gradient)."""
    layer_overhead_s: float = 130e-6
    """Host (framework) seconds to issue one layer's forward kernels (conv, batch norm,
    activation, residual add); the backward takes twice as long. The device waits for the host
    where the host is slower (launch-bound: small layers, small batches). 130 us: eager
    PyTorch 2.11 on the H100 host of shared/validation/gpu, where a CIFAR ResNet-32 at batch
    128 takes 13.2 ms for 34 layers, whatever the batch and precision (launch-bound)."""
    step_overhead_s: float = 0.0
    """Host seconds per optimizer step that nothing overlaps: a TensorFlow session.run with
    its parameter-server RPCs, input pipeline hand-off (0 for eager PyTorch, where the next
    step's launches overlap the last one's kernels); `tuner calibrate` fits it (CM-DARE)."""
    workspace_bytes: float = 64 * 2**20
    """HBM a layers model's framework holds besides tensors: cuBLAS (32 MiB on Hopper) and
    cuDNN convolution workspaces, allocated through PyTorch's caching allocator (bytes)."""
    ps_update_s: float = 2.4e-3
    """Seconds a parameter server spends per update request beside the bytes it moves: the
    RPC, deserialising the request, scheduling the update (TensorFlow's gRPC servers). Fitted
    with ps_bytes_per_s to CM-DARE's 27 ResNet-15 runs (K80, P100, V100 workers, one and two
    servers; `python benchmarks/cmdare.py --server-defaults`)."""
    ps_bytes_per_s: float = 0.86e9
    """Bytes per second one parameter server (a CPU process) applies and serves: gradients
    received plus weights sent per update, whichever of this and its link is slower. A
    parameter server saturates on this rate before its network is full (CM-DARE: one server
    caps ResNet-32 at about 45 updates/s, 0.7 GB/s, on an 8 Gbit/s VM)."""
    optimizer_bytes_per_param: float = 40.0
    """HBM bytes read and written per local parameter by a fused Adam step (fp32 state)."""
    params: str | None = None
    """What the weights live in on the GPU: "bf16" (16-bit weights, fp32 master copy in the
    optimizer: Megatron), "fp32" (PyTorch autocast: fp32 weights, no master copy), "fp8" (fp8
    primary weights); None: the training precision's (cost.precision.state_bytes)."""
    master_weights: str = "fp32"
    """How the optimizer keeps the fp32 master copy of 16-bit weights: "fp32" (4 bytes per
    parameter: Megatron's distributed optimizer) or "remainders" (only the 16 low bits that the
    bf16 weight lacks, 2 bytes: Apex DistributedFusedAdam's store_param_remainders, which NeMo 1
    sets for bf16 models, and Megatron-Core's precision-aware optimizer,
    OptimizerConfig.store_param_remainders) or "none" (no master copy: the optimizer updates
    the bf16 weights and keeps Adam's moments in bf16, as plain torch.optim.Adam does over bf16
    parameters: 4 bytes) or "none_fp32_moments" (no master copy, Adam's moments in fp32: 8
    bytes; Transformer Engine's FusedAdam with its defaults master_weights=False,
    exp_avg_dtype=exp_avg_sq_dtype=float32, over bf16 parameters, as NeMo AutoModel runs it).
    Weights that are not bf16 keep fp32 masters."""
    autocast: bool = False
    """Computation in 16 bits by torch.autocast over fp32 weights (plain PyTorch AMP): every
    forward casts the weights, the residual stream stays fp32. False: the weights are 16-bit
    (Megatron) or cast once when FSDP gathers them (FSDP2's MixedPrecisionPolicy)."""
    main_grads: str | None = None
    """Precision of the gradient buffer that accumulates and reduces: "fp32" (Megatron's
    default main grads) or "bf16"; None: fp32 for bf16/fp8 training, fp16 for fp16."""
    fp8_recipe: str = "delayed"
    """How fp8 GEMM inputs are scaled (Transformer Engine recipes): "delayed" (per-tensor
    scale from an amax history, fused into the producing kernel), "current" (per-tensor scale
    of the tensor itself: one more pass to find its amax), "mxfp8" (Blackwell microscaling,
    one scale per 32 elements, row- and column-wise copies), "blockwise" (DeepSeek-style
    1x128 / 128x128 blocks)."""
    kernels: str = "fused"
    """The kernel style of the software (cost.software): "fused" (Megatron-Core with
    Transformer Engine), "eager" (plain PyTorch modules) or "compiled" (torch.compile)."""
    cuda_graphs: bool = False
    """The host replays captured CUDA graphs: no per-kernel launch cost (Megatron-Core's
    --cuda-graph-impl, MLPerf's full-iteration graphs)."""
    selective_recompute: str = "attention"
    """What `recompute: selective` redoes (cost.transformer_memory.op_sac_bytes_per_token):
    "attention" (Megatron-LM, Korthikanti et al. MLSys'23 sec. 5: the attention core only) or
    "op" (PyTorch per-op selective activation checkpointing as torchtitan applies it: GEMM and
    attention outputs kept except every second GEMM's, element-wise work recomputed)."""
    tensor_parallel: str = "megatron"
    """How tensor parallelism keeps a column-parallel GEMM's input under sequence parallelism
    (cost.transformer_memory.head_input_bytes): "megatron" (Megatron-Core saves the
    sequence-sharded input and all-gathers it again in the backward) or "dtensor" (PyTorch's
    torch.distributed.tensor.parallel, as torchtitan applies it: the input is redistributed
    to Replicate before the GEMM and saved gathered)."""
    attention_kernel: str = "fused"
    """The flash-attention kernel: "fused" (cuDNN's fused attention or FlashAttention-3, what
    Transformer Engine runs on Hopper and Blackwell: `attention_fraction`) or "flash2"
    (FlashAttention-2, PyTorch's scaled_dot_product_attention flash backend, which uses none
    of Hopper's warpgroup MMA or TMA: 35% of an H100's peak where FlashAttention-3 reaches 75%,
    Shah et al., "FlashAttention-3", 2024, sec. 1; the model scales `attention_fraction` by
    35/75). The ratio is Hopper's: on Ampere, where FlashAttention-2 is the fast kernel, keep
    "fused"."""
    context_parallel: str = "megatron"
    """How context parallelism exchanges keys and values (cost.transformer_time._cp_comm_s):
    "megatron" (Megatron-Core / Transformer Engine ring attention: the unrepeated GQA keys and
    values pass to the next rank while each step's attention runs) or "torch_allgather"
    (torch.distributed.tensor.experimental.context_parallel as torchtitan runs it: the
    default rotate method ALL_GATHER gathers every rank's keys and values once, hidden only
    behind the first ring step; keys and values repeated to the query heads before SDPA;
    each further step's output merged by logsumexp in fp32 and its gradients accumulated in
    fp32, `_ContextParallelOptions(convert_to_f32=True, enable_load_balance=True,
    rotate_method=ALL_GATHER)` in torch/distributed/tensor/experimental/_attention.py)."""
    reshard_after_forward: bool | str = True
    """ZeRO-3 / FSDP frees each layer's gathered weights after its forward and gathers them
    again for its backward, every micro-batch (FSDP's FULL_SHARD, FSDP2's default). False:
    FSDP's SHARD_GRAD_OP over a step of micro-batches that accumulate their gradients without
    syncing (FSDP's no_sync): the weights gathered at the first forward stay gathered until
    the step's last backward and the gradients accumulate unsharded and reduce-scatter once,
    i.e. the traffic and memory of ZeRO-1 with the optimizer state sharded (PyTorch FSDP
    docs, ShardingStrategy.SHARD_GRAD_OP and no_sync; the Llama 3 paper, arXiv:2407.21783,
    sec. 3.3.2 "we do not reshard after forward computation" and sec. 3.3.4 "FP32 gradient
    accumulation ... over multiple micro-batches"). "unless_pipelined": False where the plan
    has pipeline stages, True where not (torchtitan's apply_fsdp: "For PP, do not reshard after
    forward to avoid per-microbatch all-gathers"; torch.distributed.pipelining's stages run
    every micro-batch but the last without gradient sync or resharding)."""
    launch_s: float = 33e-6
    """Host seconds per kernel a layer launches (framework dispatch, autograd, launch): the
    GPU waits when a micro-batch's kernels take less time than launching them. Fitted on the
    micro-batch 1 runs of shared/validation/gpu (eager PyTorch on one H100, benchmarks/
    gpu_validation.py)."""
    checkpoint_host_factor: float = 4.7
    """Host work of recomputing a layer, in multiples of launching its forward kernels once:
    the forward again plus the checkpoint's saved-tensor hooks and autograd re-entry. Fitted
    (least squares on the log error) on the six full-recompute micro-batch 1 runs of
    shared/validation/gpu, after their device time lost the GEMM that torch.utils.checkpoint
    never recomputes (4.0 before)."""
    expandable_segments: bool = False
    """PyTorch's caching allocator maps physical pages into growing segments
    (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True, which NeMo's performance scripts and
    torchtitan's launch script set): a freed block's pages serve any later size, so
    fragmentation no longer strands memory and tensors can fill what `usable_fraction` keeps
    back (PyTorch CUDA semantics docs, "Optimizing memory usage with
    PYTORCH_CUDA_ALLOC_CONF")."""
    activation_offload_layers: float = 0.0
    """Layers per stage whose saved activations Megatron-Core moves to host memory after their
    forward and brings back for their backward (--cpu-offloading-num-layers, set by
    Megatron-Bridge's Megatron-FSDP recipes on GB200/GB300): their HBM holds only the layer in
    transit (cost.transformer_memory.offloaded_activation_bytes)."""
    offload_modules: tuple[str, ...] = ()
    """What Megatron-Core's fine-grained activation offloading (--fine-grained-activation-
    offloading --offload-modules: TransformerConfig.offload_modules, "offload the input of the
    expert fc1 part" / "of the moe act part"; Megatron-LM PR 3219, used by Megatron-MoE-
    ModelZoo's Qwen3 GB200 MXFP8 recipe) moves to host memory after each layer's forward and
    brings back for its backward: "expert_fc1" (the routed copies' input to the first expert
    GEMM) and/or "moe_act" (the activation function's input). Only the layer in transit keeps
    them in HBM (cost.moe_memory.offloaded_routed_bytes); the copies overlap compute on the
    host link (not timed)."""
    cross_entropy: str = "megatron"
    """The loss kernel: "megatron" (Megatron-Core's vocabulary-parallel cross-entropy: fp32
    logits kept for the backward and an fp32 gradient, the kernel style's `logits_bytes`) or
    "te" (Transformer Engine's parallel_cross_entropy, cross_entropy_fusion_impl="te": it
    computes the fp32 softmax in registers and writes the gradient into the 16-bit logits in
    place, so the loss holds only the 2-byte logits) or "compiled" (the loss inside
    torch.compile's graph: bf16 logits and their bf16 gradient, no fp32 copy) or
    "loss_parallel" (PyTorch's torch.distributed.tensor.parallel.loss_parallel, run eagerly
    on vocabulary-sharded logits where tp > 1: its decomposed log-softmax and fused
    nll/log-softmax backward hold 16 bytes per logit; at tp = 1 the kernel style's own loss;
    cost.software.LOSS_KERNELS)."""
    reserved_bytes: float = 1.0 * 2**30
    """HBM no tensor gets: the CUDA context and the GEMM libraries' workspaces (bytes)."""
    nccl_bytes: float = 1.5 * 2**30
    """HBM NCCL's communicators and channel buffers take when the job has more than one GPU
    (bytes)."""
    usable_fraction: float = 0.96
    """Fraction of the rest that the caching allocator can fill before fragmentation stops it:
    the one-GPU runs of shared/validation/gpu ran out of memory at 73.8-75.8 GiB allocated of
    an H100's 79.6 GiB, the largest that fit peaked at 72.9 GiB."""
    reallocated_usable_fraction: float = 0.95
    """`usable_fraction` where the training loop reallocates every gradient in each backward
    (cost.software.KernelStyle.grads_reallocated: plain PyTorch) without expandable segments:
    the allocator carves the gradients out of freed activation blocks and the remainders stay
    reserved but unusable. Measured in shared/validation/gpu (peak reserved less peak
    allocated, torch.cuda.max_memory_reserved/max_memory_allocated) on the runs nearest the
    limit: 2.96 GiB stranded at llama-1b micro-batch 8's 72.9 GiB peak, 2.95 GiB at llama-3b
    micro-batch 1's 69.1 GiB, 4.18 GiB when gpt-2.7b micro-batch 4 ran out at 73.8 GiB
    allocated (78.0 GiB reserved): about 3.9 GiB of the 78.6 GiB left, (78.6 - 3.9) / 78.6 =
    0.95."""

    def as_dict(self) -> dict[str, Any]:
        """Builtin types only: the GPU pairs as a mapping, name tuples as lists, numbers as
        floats."""
        out: dict[str, Any] = {}
        for k, v in asdict(self).items():
            if k.endswith("_by_gpu"):
                out[k] = {name: float(f) for name, f in v}
            elif isinstance(v, tuple):
                out[k] = list(v)
            else:
                out[k] = v if v is None or isinstance(v, (bool, str)) else float(v)
        return out

    def gemm_fraction_for(self, gpu: GPUSpec) -> float:
        """The GEMM fraction for `gpu`: this profile's for that GPU (gemm_fraction_by_gpu), else
        this profile's for all, else the GPU's catalog value, else FALLBACK_GEMM_FRACTION."""
        by_gpu = dict(self.gemm_fraction_by_gpu)
        if gpu.name in by_gpu:
            return by_gpu[gpu.name]
        if self.gemm_fraction is not None:
            return self.gemm_fraction
        return FALLBACK_GEMM_FRACTION if gpu.gemm_fraction is None else gpu.gemm_fraction

    def layers_fraction_for(self, gpu: GPUSpec) -> float:
        """A layers model's fraction of peak on `gpu`: this profile's for that GPU
        (layers_fraction_by_gpu), else this profile's for all, else the GPU's catalog value,
        else its GEMM fraction (gemm_fraction_for)."""
        by_gpu = dict(self.layers_fraction_by_gpu)
        if gpu.name in by_gpu:
            return by_gpu[gpu.name]
        if self.layers_fraction is not None:
            return self.layers_fraction
        return self.gemm_fraction_for(gpu) if gpu.layers_fraction is None \
            else gpu.layers_fraction

    def with_(self, **changes: Any) -> Efficiency:
        return replace(self, **changes)

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


DEFAULT_EFFICIENCY = Efficiency()
