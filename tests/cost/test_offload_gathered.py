"""ZeRO-3 with its weights offloaded (ZeRO-Infinity) holds in HBM only the layers it gathers in
flight, counted once in the buffers (cost.memory.gathered_bytes), not the weights' shard too."""

from __future__ import annotations

import pytest

from cost import Plan, TrainingSpec, evaluate
from tests.factories import cluster, small_model

# small_model's layer by hand: attention 4 x 256^2 + 4 x 256 biases = 263,168; MLP
# 2 x 256 x 1,024 + 1,024 + 256 biases = 525,568; two layernorms 2 x 512 = 1,024.
_LAYER = 263_168 + 525_568 + 1_024  # 789,760
# four layers, input and output embeddings 2 x 1,000 x 256, the final layernorm 512
_PARAMS = 4 * _LAYER + 2 * 1_000 * 256 + 512  # 3,671,552


def test_offloaded_weights_under_zero3_leave_only_the_gathered_layers_in_hbm() -> None:
    """8 GPUs, dp 8, ZeRO-3, bf16: the weights' shard is 3,671,552 x 2 / 8 = 917,888 bytes,
    all of it in the expansion tier once weights are offloaded. HBM keeps the two layers in
    flight, gathered: 2 x 789,760 x (2 bytes of weight + half of a 4-byte gradient) =
    6,318,080 bytes of buffers, as without offload. Before, the shard was counted in HBM as
    well (917,888 bytes twice: in HBM and in the expansion tier)."""
    c, training = cluster(1), TrainingSpec(global_batch=8)
    optimizer, weights = (evaluate(small_model(), c, training, Plan(zero=3, offload=o)).memory
                          for o in (1, 2))
    shard = _PARAMS * 2 / 8
    assert float(optimizer.weights_bytes) == pytest.approx(917_888, rel=1e-12) == shard
    assert float(weights.weights_bytes) == 0.0
    assert float(weights.expansion_bytes) - float(optimizer.expansion_bytes) \
        == pytest.approx(shard, rel=1e-12)
    assert float(weights.buffers_bytes) == float(optimizer.buffers_bytes)
    assert float(optimizer.total_bytes) - float(weights.total_bytes) \
        == pytest.approx(shard, rel=1e-12)
    none = evaluate(small_model(), c, training, Plan(zero=3)).memory
    gathered = 2 * _LAYER * (2 + 0.5 * 4)  # 6,318,080
    assert gathered == 6_318_080
    assert float(none.buffers_bytes) - float(
        evaluate(small_model(), c, training, Plan(zero=2)).memory.buffers_bytes) \
        == pytest.approx(gathered, rel=1e-12)


def test_offloaded_weights_on_one_replica_keep_their_resident_layers() -> None:
    """tp 8 on 8 GPUs: one data-parallel rank, so ZeRO-3 gathers nothing, and the two
    layers streamed in from the expansion tier stay counted as weights: 2 x 789,760 / 8
    parameters x 2 bytes = 394,880 bytes."""
    c, training = cluster(1), TrainingSpec(global_batch=8)
    memory = evaluate(small_model(), c, training, Plan(tp=8, zero=3, offload=2)).memory
    assert float(memory.weights_bytes) == pytest.approx(2 * _LAYER / 8 * 2, rel=1e-12)
