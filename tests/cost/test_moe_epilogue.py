"""The eager work of expert biases and a clamped gated activation (cost.moe_epilogue),
hand-counted on GPT-OSS's experts (hidden 2880, expert_ffn_hidden 2880, gated: the first
GEMM's output w = 5760 wide), and its place in an MoE layer's time."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from cost import ClusterSpec, Plan, TrainingSpec, evaluate
from cost.efficiency import DEFAULT_EFFICIENCY as EFF
from cost.errors import CostModelError
from cost.moe_epilogue import epilogue_cost
from search_spaces.catalog import gpu_catalog, model_catalog

GPT_OSS = model_catalog()["gpt-oss-120b"]


def cost(epilogue: str, *, flex: bool, model: object = GPT_OSS, etp: float = 1.0):
    return epilogue_cost(model, EFF.with_(expert_epilogue=epilogue, ep_dedup=flex),  # type: ignore[arg-type]
                         act_bytes=2.0, etp=np.float64(etp))


def test_the_catalog_gives_gpt_oss_its_biases_and_clamp() -> None:
    assert GPT_OSS.expert_bias and GPT_OSS.expert_clamp
    qwen = model_catalog()["qwen3-30b-a3b"]
    assert not qwen.expert_bias and not qwen.expert_clamp


def test_megatron_with_bf16_probabilities() -> None:
    """Clamp forward 4·2·5760 = 46,080 bytes, the second bias (2 + 5·2)·2880 = 34,560:
    80,640 per row; backward 5·2·5760 = 57,600 and (6·2 + 2·2)·2880 = 46,080: 103,680.
    Kernels: clamps and cat (3) and the pieces' cat (1), per expert product and add (2)
    forward; 3 + 1 and 4 per expert backward."""
    c = cost("megatron", flex=False)
    assert float(c.forward_bytes) == 80_640.0
    assert float(c.activation_bytes) == 46_080.0
    assert float(c.backward_bytes) == 103_680.0
    assert float(c.kernels(2.0, backward=False)) == 4.0 + 2.0 * 2.0
    assert float(c.kernels(2.0, backward=True)) == 4.0 + 2.0 * 4.0


def test_megatron_with_fp32_probabilities_behind_a_flex_dispatcher() -> None:
    """fp32 b·p: forward 46,080 + (2 + 20)·2880 + (4 + 2)·2880 (the cast back) = 126,720;
    backward 57,600 + (24 + 4)·2880 + 2·6·2880 (the two casts) = 172,800."""
    c = cost("megatron", flex=True)
    assert float(c.forward_bytes) == 126_720.0
    assert float(c.backward_bytes) == 172_800.0
    assert float(c.kernels(16.0, backward=False)) == 5.0 + 2.0 * 16.0
    assert float(c.kernels(16.0, backward=True)) == 6.0 + 4.0 * 16.0


def test_automodel_adds_the_first_bias_and_compiles_the_clamp() -> None:
    """First bias 4·2·5760 = 46,080 forward and 3·2·5760 = 34,560 backward beside the fp32
    second bias (80,640 and 115,200); no eager clamp."""
    c = cost("automodel", flex=True)
    assert float(c.forward_bytes) == 46_080.0 + 80_640.0
    assert float(c.activation_bytes) == 0.0
    assert float(c.backward_bytes) == 34_560.0 + 115_200.0


def test_expert_tensor_parallelism_narrows_the_clamp_per_row() -> None:
    c = cost("megatron", flex=False, etp=2.0)
    assert float(c.activation_bytes) == 46_080.0 / 2.0


@pytest.mark.parametrize("epilogue", ["megatron", "automodel", "fused"])
def test_nothing_without_biases_or_clamp(epilogue: str) -> None:
    plain = replace(GPT_OSS, expert_bias=False, expert_clamp=False)
    c = cost(epilogue, flex=True, model=plain)
    assert float(c.forward_bytes) == float(c.backward_bytes) == 0.0
    assert float(c.kernels(8.0, backward=False)) == float(c.kernels(8.0, backward=True)) == 0.0


def test_the_fused_stack_costs_nothing() -> None:
    c = cost("fused", flex=True)
    assert float(c.forward_bytes) == float(c.backward_bytes) == 0.0


def test_an_unknown_epilogue_is_refused() -> None:
    with pytest.raises(CostModelError, match="expert_epilogue"):
        cost("triton", flex=True)


def _step(model: object, epilogue: str) -> float:
    cluster = ClusterSpec.of(gpu_catalog()["h100-80gb"], nodes=1, gpus_per_node=8)
    plan = Plan(tp=np.array([1.0]), pp=np.array([1.0]), ep=np.array([8.0]),
                micro_batch=np.array([1.0]), recompute=np.array([0.0]))
    report = evaluate(model, cluster, TrainingSpec(global_batch=64, precision="bf16"), plan,
                      efficiency=EFF.with_(expert_epilogue=epilogue, cuda_graphs=True))
    return float(report.step_time_s[0])


def test_the_eager_epilogue_lengthens_the_step_and_the_fused_one_does_not() -> None:
    """GPT-OSS-20B on 8 H100s: the fused stack runs as the model without biases or clamp
    (but for the biases' own parameters, 0.01 % of the model, whose gradients and optimizer
    state the step still moves); Megatron-Core's eager work makes the step longer, by far
    more than those parameters."""
    model = model_catalog()["gpt-oss-20b"]
    plain = replace(model, expert_bias=False, expert_clamp=False)
    fused, unbiased = _step(model, "fused"), _step(plain, "megatron")
    assert unbiased < fused == pytest.approx(unbiased, rel=1e-4)
    assert _step(model, "megatron") - fused > 100 * (fused - unbiased)


def test_one_layer_adds_the_hand_counted_bytes_at_the_hbm_rate() -> None:
    """GPT-OSS-120B, micro-batch 1 of 4096 tokens on an H100 (3.35 TB/s at 0.85), ep 8, bf16
    probabilities: 4096·4 = 16,384 rows; forward 16,384·80,640 bytes = 0.464 ms more,
    backward 16,384·103,680 = 0.597 ms more than the fused stack."""
    from cost.degrees import degrees
    from cost.moe_layout import moe_stage_shape
    from cost.moe_time import expert_layer_times

    gpu = gpu_catalog()["h100-80gb"]
    cluster = ClusterSpec.of(gpu, nodes=8, gpus_per_node=8)
    training = TrainingSpec(global_batch=64, precision="bf16")
    plan = Plan(tp=np.array([1.0]), pp=np.array([1.0]), ep=np.array([8.0]),
                micro_batch=np.array([1.0]), recompute=np.array([0.0]))
    d = degrees(cluster, training, plan)
    shape = moe_stage_shape(GPT_OSS, d)

    def layer(epilogue: str) -> tuple[float, float]:
        eff = EFF.with_(expert_epilogue=epilogue, ep_dedup=False, cuda_graphs=True)
        times = expert_layer_times(GPT_OSS, cluster, training, d, eff, shape=shape)[0]
        return float(times.forward_s[0]), float(times.backward_s[0])

    rate = gpu.hbm_bandwidth_bytes_per_s * EFF.hbm_fraction
    (fwd, bwd), (fused_fwd, fused_bwd) = layer("megatron"), layer("fused")
    assert fwd - fused_fwd == pytest.approx(16_384 * 80_640 / rate)
    assert bwd - fused_bwd == pytest.approx(16_384 * 103_680 / rate)
