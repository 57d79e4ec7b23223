"""How PyTorch's checkpointing and torch.compile change what a layer recomputes and keeps."""

from __future__ import annotations

import numpy as np
import pytest

from cost import DEFAULT_EFFICIENCY, ModelSpec, Plan
from cost.degrees import Degrees, degrees
from cost.precision import state_bytes
from cost.transformer_memory import activation_bytes_per_layer, activation_sizes, footprint
from cost.transformer_time import layer_times, logits_s
from tests.factories import cluster, gpt, run


def test_torch_checkpoint_stops_before_the_mlp_output_gemm() -> None:
    """GPT-3 175B at tp 8, micro-batch 1 (2048 tokens), eager PyTorch: full recompute redoes
    the forward except the MLP's second GEMM (2048 x 6144 x 12288 per GPU), whose inputs are
    the last tensors the layer saves. On an A100 (312 TFLOP/s, fraction 0.7) with the shape
    discount d / (d + 256) per dimension that GEMM takes
    2·2048·6144·12288 / (312e12 · 0.7 · (2048/2304)(6144/6400)(12288/12544)) = 1.6939 ms.
    Megatron's fused stack reruns the whole forward."""
    d = degrees(cluster(8), run(64), Plan(tp=8, pp=8, recompute=np.array([2.0])))
    eager = layer_times(gpt(), cluster(8), run(64), d, DEFAULT_EFFICIENCY.with_(kernels="eager"))
    fused = layer_times(gpt(), cluster(8), run(64), d, DEFAULT_EFFICIENCY)
    skipped = float(eager.forward_s[0] - eager.recompute_s[0])
    assert skipped == pytest.approx(1.6939e-3, rel=1e-3)
    assert float(fused.recompute_s[0]) == pytest.approx(float(fused.forward_s[0]))


def _one_gpu_mb1() -> Degrees:
    return degrees(cluster(1, gpus_per_node=1), run(8), Plan(tp=1, pp=1))


def test_compiled_loss_keeps_bf16_logits_and_their_bf16_gradient() -> None:
    """GPT-3's 51200-entry vocabulary, one micro-batch of 2048 tokens on one GPU: eager PyTorch
    holds 12 bytes per logit at the loss, and so do compiled layers with an eager loss
    (torchtitan); a compiled loss 2 + 2: 8 · 2048 · 51200 = 838,860,800 bytes fewer."""
    d = _one_gpu_mb1()
    eager = footprint(gpt(), run(8), d, DEFAULT_EFFICIENCY.with_(kernels="eager"))
    layers = footprint(gpt(), run(8), d, DEFAULT_EFFICIENCY.with_(kernels="compiled"))
    compiled = footprint(gpt(), run(8), d, DEFAULT_EFFICIENCY.with_(
        kernels="compiled", cross_entropy="compiled"))
    assert float(eager.buffers_bytes) == pytest.approx(float(layers.buffers_bytes))
    assert float(eager.buffers_bytes - compiled.buffers_bytes) == pytest.approx(838_860_800)


def test_compiled_loss_streams_six_bytes_per_logit() -> None:
    """Megatron's fused cross-entropy streams 16 bytes per logit, the compiled one 6: on an
    A100 (2.039 TB/s at 0.85) 10 · 2048 · 51200 bytes take 1.048576e9 / 1.73315e12 = 0.6050 ms
    less."""
    d = _one_gpu_mb1()
    tokens = np.array([2048.0])
    fused = logits_s(gpt(), cluster(1, gpus_per_node=1), run(8), tokens, d, DEFAULT_EFFICIENCY)
    compiled = logits_s(gpt(), cluster(1, gpus_per_node=1), run(8), tokens, d,
                        DEFAULT_EFFICIENCY.with_(cross_entropy="compiled"))
    assert float(fused[0] - compiled[0]) == pytest.approx(0.6050e-3, rel=1e-3)


def test_full_recompute_rebuilds_a_layer_after_the_loss_has_freed_its_logits() -> None:
    """One GPU, full recompute, eager: the loss holds 12 · 2048 · 51200 = 1,258,291,200 bytes
    of logits; rebuilding one GPT-3 layer later needs fewer, so the buffers are the logits
    alone (plus autocast's 16-bit weight copies, none here), not their sum."""
    d = degrees(cluster(1, gpus_per_node=1), run(8), Plan(tp=1, pp=1, recompute=np.array([2.0])))
    eff = DEFAULT_EFFICIENCY.with_(kernels="eager")
    held = footprint(gpt(), run(8), d, eff)
    assert float(held.buffers_bytes[0]) == pytest.approx(12 * 2048 * 51200)


def test_fused_adam_without_master_weights_keeps_fp32_moments() -> None:
    """Transformer Engine's FusedAdam with its defaults over bf16 parameters (NeMo AutoModel):
    2-byte weights, bf16 gradients, no master copy and two fp32 moments, 2 + 2 + 8 bytes."""
    eff = DEFAULT_EFFICIENCY.with_(params="bf16", main_grads="bf16",
                                  master_weights="none_fp32_moments")
    s = state_bytes("bf16", eff)
    assert (s.weight, s.gradient, s.optimizer) == (2.0, 2.0, 8.0)


def test_eager_gated_mlp_keeps_the_silu_output_too() -> None:
    """Llama-style MLP of width 8192, one micro-batch of 2048 tokens, no recompute: eager
    `F.silu(a) * g` saves silu(a), 2 bytes · 8192 · 2048 = 33,554,432 bytes per layer more
    than a fused SwiGLU; a GELU MLP keeps the same in both."""
    d = degrees(cluster(1, gpus_per_node=1), run(8), Plan(tp=1, pp=1))
    def per_layer(model: ModelSpec, kernels: str) -> float:
        sizes = activation_sizes(run(8), DEFAULT_EFFICIENCY.with_(kernels=kernels))
        sizes["projection_copies"] = 1.0
        return float(activation_bytes_per_layer(model, d, **sizes))
    llama = gpt(hidden=2048, heads=32, kv_heads=8, ffn_hidden=8192, gated_mlp=True)
    plain = gpt(hidden=2048, heads=32, ffn_hidden=8192)
    assert per_layer(llama, "eager") - per_layer(llama, "fused") == pytest.approx(33_554_432)
    assert per_layer(plain, "eager") == pytest.approx(per_layer(plain, "fused"))
