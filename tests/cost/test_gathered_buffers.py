"""ZeRO-3 holds gathered copies only of the parameters it shards: a replica group of one rank
keeps its weights whole and gathers nothing (cost.memory.gathered_bytes)."""

from __future__ import annotations

import pytest

from cost import DEFAULT_EFFICIENCY, MoEModelSpec, Plan, TrainingSpec, evaluate
from cost.degrees import degrees
from cost.memory import gathered_bytes
from tests.factories import cluster, small_model


def test_zero3_on_one_replica_holds_what_zero2_holds() -> None:
    """tp 8 on 8 GPUs: one data-parallel rank, so ZeRO-3 shards nothing and gathers nothing;
    its memory is ZeRO-2's (before, two layers' gathered copies were added on top)."""
    c, training = cluster(1), TrainingSpec(global_batch=8)
    two, three = (evaluate(small_model(), c, training, Plan(tp=8, zero=z)).memory
                  for z in (2, 3))
    assert float(three.buffers_bytes) == float(two.buffers_bytes)
    assert float(three.total_bytes) == float(two.total_bytes)


def test_moe_gathers_only_its_sharded_dense_part_by_hand() -> None:
    """8 experts over ep 8 on 8 GPUs: each expert has one replica (nothing to gather), the
    attention and norms 8 (gathered). One layer's dense part: 4 x 256^2 attention + 2 x 256
    RMSNorm = 262,656 parameters; two layers at 2 bytes gathered and half of a 4-byte
    gradient: 2 x 262,656 x 4 = 2,101,248 bytes. With its expert (3 x 256 x 512 = 393,216)
    counted too, it was 5,246,976."""
    model = MoEModelSpec(name="moe", layers=4, hidden=256, heads=8, vocab=1000, seq_len=128,
                         experts=8, top_k=2, expert_ffn_hidden=512, gated_mlp=True,
                         dropout=False)
    c, training = cluster(1), TrainingSpec(global_batch=8)
    d = degrees(c, training, Plan(tp=1, ep=8, zero=3))
    assert float(d.edp) == 1.0 and float(d.dp) == 8.0
    held = model.footprint(c, training, d, DEFAULT_EFFICIENCY)
    assert held.state.weight == 2.0 and held.state.gradient == 4.0
    assert float(gathered_bytes(held, d)) == pytest.approx(2_101_248, rel=1e-12)
