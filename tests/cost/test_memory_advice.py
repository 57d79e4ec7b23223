"""A plan over HBM is told what of it can still move on its cluster (cost.memory_advice), not
one fixed line per workload: a plan at full recompute and ZeRO-3 on one GPU was still told
"raise tp/pp, recompute or zero"."""

from __future__ import annotations

from typing import Any

from cost import MoEModelSpec, Plan, TrainingSpec, evaluate, plan_result
from cost.inputs import ClusterSpec
from tests.factories import a100, small_model

_TINY_HBM = a100(hbm_capacity_bytes=2**30)  # 1 GiB: the small model does not fit


def _advice(model: Any, cluster: ClusterSpec, plan: Plan) -> str:
    """The text after 'usable: ' of the plan's HBM violation (there must be one)."""
    training = TrainingSpec(global_batch=64)
    result = plan_result(model, cluster, training, plan, evaluate(model, cluster, training, plan))
    over = [v for v in result.violations if "GiB usable: " in v]
    assert len(over) == 1 and not result.feasible, result.violations
    return over[0].split("GiB usable: ", 1)[1]


def test_one_gpu_at_full_recompute_and_zero3_is_told_the_model_does_not_fit() -> None:
    one = ClusterSpec.of(_TINY_HBM, nodes=1, gpus_per_node=1)
    advice = _advice(small_model(layers=64), one, Plan(recompute=2, zero=3))
    assert advice == ("nothing left to change in the plan: the model does not fit this "
                      "cluster; use more GPUs, a GPU with more memory or a cluster.expansion "
                      "tier to offload to")
    assert "raise" not in advice and "recompute" not in advice and "zero" not in advice


def test_one_gpu_offloading_all_to_its_tier_is_told_more_gpus_or_memory() -> None:
    one = ClusterSpec.of(_TINY_HBM, nodes=1, gpus_per_node=1,
                         expansion_capacity_bytes=2**40, expansion_bandwidth_bytes_per_s=50e9)
    advice = _advice(small_model(layers=64), one, Plan(recompute=2, zero=3, offload=2))
    assert advice == ("nothing left to change in the plan: the model does not fit this "
                      "cluster; use more GPUs or a GPU with more memory")


def test_one_gpu_with_a_tier_is_told_to_offload_and_what_of_the_cluster_else() -> None:
    one = ClusterSpec.of(_TINY_HBM, nodes=1, gpus_per_node=1,
                         expansion_capacity_bytes=2**40, expansion_bandwidth_bytes_per_s=50e9)
    advice = _advice(small_model(layers=64), one, Plan(micro_batch=2, recompute=1, zero=3))
    assert advice == ("recompute=full, lower micro_batch or offload=optimizer; or more GPUs "
                      "or a GPU with more memory")


def test_a_plan_with_data_parallel_ranks_to_spare_is_told_to_raise_tp() -> None:
    """8 GPUs at tp 1 (dp 8): tp, pp and cp can grow; ZeRO-3 and full recompute are already
    on, so neither is named, nor more GPUs."""
    eight = ClusterSpec.of(_TINY_HBM, nodes=1, gpus_per_node=8)
    advice = _advice(small_model(layers=64), eight, Plan(recompute=2, zero=3))
    assert advice == "raise tp/pp/cp; or a cluster.expansion tier to offload to"


def test_zero_is_named_only_with_ranks_to_shard_over() -> None:
    """tp 8 on 8 GPUs: one data-parallel rank, nothing for ZeRO to shard; tp and pp cannot
    grow on these GPUs either."""
    eight = ClusterSpec.of(_TINY_HBM, nodes=1, gpus_per_node=8)
    advice = _advice(small_model(layers=512, hidden=512, heads=8), eight,
                     Plan(tp=8, sequence_parallel=True, recompute=2))
    assert "zero" not in advice and "raise" not in advice
    assert advice.startswith("nothing left to change in the plan")
    two = _advice(small_model(layers=512, hidden=512, heads=8), eight,
                  Plan(tp=4, sequence_parallel=True, recompute=2))
    assert two.startswith("raise tp/pp/cp or zero=3;"), two


def test_a_mixture_of_experts_is_told_ep_while_its_experts_allow() -> None:
    """8 experts on 8 GPUs: ep 1 can grow (and tp with sequence parallelism, which a mixture
    of experts needs for tp > 1); at ep 8 every expert has its own rank and ep is not named."""
    model = MoEModelSpec(name="moe", layers=32, hidden=512, heads=8, vocab=1000, seq_len=128,
                         experts=8, top_k=2, expert_ffn_hidden=1024, gated_mlp=True,
                         dropout=False)
    eight = ClusterSpec.of(_TINY_HBM, nodes=1, gpus_per_node=8)
    low = _advice(model, eight, Plan(ep=1, recompute=2, zero=3))
    assert low.startswith("raise ep/tp/pp"), low
    full = _advice(model, eight, Plan(ep=8, recompute=2, zero=3))
    assert not full.startswith("raise ep") and "ep/" not in full, full
