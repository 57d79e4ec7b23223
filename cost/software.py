"""What the training software does to a transformer layer beyond its FLOPs: how many kernels it
launches, how many times element-wise work streams the activations through HBM, which copies
it keeps for the backward pass, and how long the host takes to launch it all.

Three kernel styles (a spec's `stack.kernels`):
- "fused": Megatron-Core with Transformer Engine, the model's default: norms fused into the
  next GEMM (LayerNormLinear), fused bias-dropout-add, fused SwiGLU/GeLU, flash attention,
  vocabulary-parallel fp32 cross-entropy.
- "eager": plain PyTorch modules under autocast (shared/validation/gpu/measure.py): every
  norm, cast, add and activation its own kernel, the attention output copied by a reshape.
- "compiled": the same under torch.compile: element-wise chains fused by Inductor.
With `stack.cuda_graphs` the host replays captured graphs and launches nothing per kernel.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import named

if TYPE_CHECKING:
    from .efficiency import Efficiency
    from .inputs import Array

__all__ = ["KERNEL_STYLES", "LOSS_KERNELS", "KernelStyle", "held_logits_bytes", "kernel_style",
           "streamed_logits_bytes"]


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelStyle:
    """One software stack's layer, counted.

    forward_kernels, backward_kernels: kernels one layer launches per micro-batch (for a plain
    MLP; a gated MLP adds `gated_kernels` forward and twice that backward).
    hidden_passes, ffn_passes: activation-sized (tokens x hidden, tokens x ffn) HBM passes of
    element-wise work per layer forward, in units of the activation's element size (None: the
    Efficiency's own, calibrated values); a gated MLP adds `gated_passes` (the product of the
    two halves: two reads and a write).
    projection_copies: copies of the attention output kept for the backward pass.
    gated_copies: f-wide 16-bit tensors a gated MLP keeps beyond its GEMM inputs and the
    activation's input: eager `F.silu(a) * g` saves silu(a) for the product's backward (1);
    a fused SwiGLU kernel (Transformer Engine, Megatron's bias_swiglu) or Inductor's fusion
    recomputes it from the saved input (0).
    logits_bytes: bytes per token and vocabulary entry held at the loss.
    grads_reallocated: the training loop frees every parameter's gradient after the optimizer
    step and the next backward allocates it again, tensor by tensor, between the activations it
    frees: plain PyTorch's `optimizer.zero_grad()` (set_to_none=True, the default since PyTorch
    2.0; measure.py calls it so). The caching allocator then splits freed activation blocks
    for the gradients and strands the remainders (cost.memory.hbm_usable_bytes). Megatron-Core
    and NeMo keep gradients in one contiguous buffer allocated once (ParamAndGradBuffer,
    contiguous_grad_buffer): False.
    checkpoint_early_stop: full recompute stops before the MLP's output GEMM. PyTorch's
    non-reentrant torch.utils.checkpoint (what plain PyTorch, torchtitan and FSDP's
    checkpoint_wrapper use) re-runs the forward only until it has recomputed as many tensors
    as the forward saved, then raises _StopRecomputationError (torch/utils/checkpoint.py,
    "Rule 5. Stop recomputation as soon as we've recomputed the saved tensors we know we
    need"; set_checkpoint_early_stop, on by default); autograd saves a GEMM's inputs before
    running it, so the layer's last GEMM (the MLP's second) is never redone (nor the residual
    add after it, small and left in). Under torch.compile the partitioner recomputes only
    what the backward reads, to the same effect. Megatron's CheckpointFunction reruns the
    whole forward (False).
    sac_keeps_unread: per-op selective checkpointing keeps every output its policy marks
    must-save, also those no backward reads (cost.transformer_memory.op_sac_bytes_per_token):
    eager PyTorch's checkpoint caches them all (torch/utils/checkpoint.py
    _CachingTorchDispatchMode); under torch.compile the partitioner drops the saved values its
    backward graph does not read (torch/_functorch/partitioners.py _extract_fwd_bwd_modules):
    False."""

    forward_kernels: float
    backward_kernels: float
    gated_kernels: float
    hidden_passes: float | None
    ffn_passes: float | None
    gated_passes: float = 0.0
    projection_copies: float
    gated_copies: float = 0.0
    logits_bytes: float
    checkpoint_early_stop: bool = False
    grads_reallocated: bool = False
    sac_keeps_unread: bool = True


KERNEL_STYLES = {
    # TE LayerNormLinear (norm + GEMM: 2), RoPE, flash attention, projection, bias-dropout-add,
    # LayerNormLinear fc1, activation, fc2, bias-dropout-add; backward: dgrad + wgrad per GEMM,
    # norm backward, attention backward and its preprocessing, the activation's backward.
    "fused": KernelStyle(forward_kernels=11.0, backward_kernels=22.0, gated_kernels=0.0,
                         hidden_passes=None, ffn_passes=None, projection_copies=1.0,
                         logits_bytes=8.0),
    # measure.py's Block under autocast: 2 norms, 4 weight casts, 4 GEMMs (addmm), attention,
    # the reshape copy, 2 residual adds, the activation (16); backward: per GEMM dgrad, wgrad,
    # bias reduction, cast back and fp32 accumulation (20), 2 norm backwards (4), attention
    # (2), copy, activation, branch sums (4). Passes: the fp32 residual stream read and written
    # by 2 adds and 2 norms and cast for the GEMMs (24), the reshape copy (2); the activation
    # reads and writes its input (2). Logits: the forward holds the bf16 logits, their fp32
    # copy and the log-softmax (2 + 4 + 4); the backward only the log-softmax (saved by
    # LogSoftmaxBackward and NllLossBackward; the cast and the head's GEMM save no output, so
    # the other two die with the forward), the loss gradient and the log-softmax gradient, all
    # fp32 (4 + 4 + 4): the larger, 12.
    "eager": KernelStyle(forward_kernels=16.0, backward_kernels=30.0, gated_kernels=2.0,
                         hidden_passes=26.0, ffn_passes=2.0, gated_passes=3.0,
                         projection_copies=2.0, gated_copies=1.0,
                         logits_bytes=12.0, checkpoint_early_stop=True,
                         grads_reallocated=True),
    # Inductor fuses each chain of norm, cast and add into one kernel: 4 GEMMs, attention,
    # 3 fused kernels; backward the GEMMs' 8, attention's 2 and 4 fused. Passes: the residual
    # stream read and written once per fused kernel (8); the activation fused into its
    # neighbours (2). The loss stays eager (12): torchtitan compiles each TransformerBlock
    # apart (apply_compile), fms-fsdp computes the loss outside the compiled model; where the
    # loss is compiled too, `stack.cross_entropy: compiled` says so (LOSS_KERNELS).
    "compiled": KernelStyle(forward_kernels=8.0, backward_kernels=14.0, gated_kernels=0.0,
                            hidden_passes=8.0, ffn_passes=2.0, projection_copies=1.0,
                            logits_bytes=12.0, checkpoint_early_stop=True,
                            sac_keeps_unread=False),
}


def kernel_style(eff: Efficiency) -> KernelStyle:
    """The Efficiency's kernel style (CostModelError naming the choices if unknown)."""
    return named(KERNEL_STYLES, eff.kernels, field="stack.kernels")


LOSS_KERNELS = {
    # Megatron-Core's vocabulary-parallel cross-entropy: the kernel style's fp32 logits and
    # gradient held, 16 bytes streamed per logit forward and backward.
    "megatron": (None, 16.0),
    # Transformer Engine's parallel_cross_entropy: fp32 softmax in registers, the gradient
    # written into the 16-bit logits in place.
    "te": (2.0, 16.0),
    # The loss inside torch.compile's graph (measure.py's model returns its loss): AOTAutograd's
    # min-cut partitioner (torch/_functorch/partitioners.py,
    # min_cut_rematerialization_partition) saves the bf16 logits, not their fp32 upcast (a
    # fusible convert_element_type it recomputes in the backward), and Inductor fuses upcast,
    # log-softmax and the loss gradient into reductions that never write fp32: it holds the
    # bf16 logits and their bf16 gradient (2 + 2) and streams them: read forward, read again
    # and write the gradient backward (2 + 2 + 2).
    "compiled": (4.0, 6.0),
    # PyTorch's loss_parallel (torch.distributed.tensor.parallel.loss, which torchtitan enters
    # whenever tp > 1 and calls eagerly on the vocabulary-sharded DTensor logits), counted from
    # its decomposition. Forward: the caller's `.float()` copy (4) beside the bf16 logits (2),
    # then _log_softmax's `shifted = x - x_max` (4) and `torch.exp(shifted)` (4): 14 bytes
    # live. Backward: _nll_loss_and_log_softmax_backward keeps the saved log-softmax x (4), a
    # `torch.zeros_like(x)` gradient (4) and evaluates `(grad_input + torch.exp(x)) *
    # grad_output`: exp(x) (4) and the sum (4), then the sum and the product: 16 bytes live at
    # its peak. Streamed: forward cast 2 + 4, amax 4, subtract 8, exp 8, sum 4, subtract 8;
    # backward zeros 4, exp 8, add 12, multiply 8, the cast back 4 + 2: 76.
    "loss_parallel": (16.0, 76.0),
}
"""Loss kernels (`stack.cross_entropy`): (bytes held per token and vocabulary entry at the
loss, None for the kernel style's `logits_bytes`; HBM bytes streamed per entry)."""

_VOCAB_SHARDED = "loss_parallel"
"""The loss kernel that runs only on vocabulary-sharded logits: with tp = 1 there is no
DTensor to dispatch on and the kernel style's own loss runs (torchtitan's ParallelDims:
loss_parallel_enabled = tp > 1 and enable_loss_parallel)."""


def _loss_kernel(eff: Efficiency) -> tuple[float | None, float]:
    return named(LOSS_KERNELS, eff.cross_entropy, field="stack.cross_entropy")


def _by_tp(eff: Efficiency, sharded: float, unsharded: float, tp: Any) -> Array | float:
    if eff.cross_entropy != _VOCAB_SHARDED:
        return sharded
    return np.where(np.asarray(tp, dtype=np.float64) > 1, sharded, unsharded)


def held_logits_bytes(eff: Efficiency, *, tp: Any = 1.0) -> Array | float:
    """Bytes per token and vocabulary entry held at the loss (cost.transformer_memory) of a
    plan with `tp` tensor-parallel ranks."""
    held = _loss_kernel(eff)[0]
    style = kernel_style(eff).logits_bytes
    return _by_tp(eff, style if held is None else held, style, tp)


def streamed_logits_bytes(eff: Efficiency, *, tp: Any = 1.0) -> Array | float:
    """HBM bytes per token and vocabulary entry the loss streams, forward and backward, at
    `tp` tensor-parallel ranks."""
    return _by_tp(eff, _loss_kernel(eff)[1], LOSS_KERNELS["megatron"][1], tp)
