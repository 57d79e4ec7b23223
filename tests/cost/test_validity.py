import numpy as np
import pytest

from cost import Plan, evaluate, plan_violations
from cost.degrees import degrees
from cost.price import price
from cost.transformer_time import stage_shape
from tests.factories import cluster, gpt, run


def violations(**plan: float) -> list[str]:
    return plan_violations(gpt(), cluster(8), run(64), Plan(**plan))


def test_a_good_plan_has_none() -> None:
    assert violations(tp=8, pp=8, virtual_stages=3) == []


def test_tp_must_divide_heads_and_the_message_says_which_to_choose() -> None:
    (msg,) = violations(tp=5, pp=1, dp=12, cp=1)[:1]
    assert "tp=5" in msg and "heads=96" in msg and "[1, 2, 3, 4, 6, 8" in msg


def test_degrees_must_fill_the_cluster() -> None:
    assert any("64 GPUs" in m for m in violations(tp=8, pp=2, dp=2))


def test_pipeline_must_divide_layers_and_batch_must_divide() -> None:
    assert any("layers=96" in m for m in violations(tp=8, pp=5, dp=1))
    (batch,) = [m for m in violations(tp=2, pp=2, micro_batch=3) if "global_batch=64" in m]
    assert "pools" not in batch  # one GPU type: the pools' balanced-share rule is not in play


def test_interleaving_needs_a_pipeline() -> None:
    assert any("virtual_stages=2" in m for m in violations(tp=8, pp=1, virtual_stages=2))


def test_precision_the_gpu_lacks() -> None:
    msgs = plan_violations(gpt(), cluster(8), run(64, precision="fp8"), Plan(tp=8, pp=8))
    assert any("fp8" in m for m in msgs)


def test_invalid_plans_are_flagged_in_a_batch() -> None:
    report = evaluate(gpt(), cluster(8), run(64), Plan(tp=np.array([8.0, 5.0]), pp=8))
    assert report.valid.tolist() == [True, False]


def test_price_by_hand() -> None:
    p = price(cluster(8), gpus=np.array(64.0), tokens_per_s=np.array(1e6), tokens=3.6e9,
              checkpoint_bytes=1e12)
    assert float(p.cost_per_hour_usd) == 128.0
    assert float(p.time_to_train_s) == 3600.0
    assert float(p.cost_to_train_usd) == 128.0
    assert float(p.revocation_overhead) == 0.0


def test_young_daly_overhead_by_hand() -> None:
    # 8 nodes x 0.5 revocations per node-hour: M = 900 s; checkpoint 1e12 B at 8 x 2e9 B/s
    c = cluster(8, revocations_per_node_hour=0.5, restart_s=600.0, pricing="spot")
    p = price(c, gpus=np.array(64.0), tokens_per_s=np.array(1e6), tokens=3.6e9,
              checkpoint_bytes=1e12)
    write_s, mtbf_s = 1e12 / 16e9, 900.0
    overhead = (2 * write_s / mtbf_s) ** 0.5 + 600.0 / mtbf_s
    assert float(p.revocation_overhead) == pytest.approx(overhead)
    assert float(p.checkpoint_interval_s) == pytest.approx((2 * write_s * mtbf_s) ** 0.5)
    assert float(p.time_to_train_s) == pytest.approx(3600.0 * (1 + overhead))
    on_demand = price(c.with_(pricing="on_demand"), gpus=np.array(64.0),
                      tokens_per_s=np.array(1e6), tokens=3.6e9, checkpoint_bytes=1e12)
    assert float(on_demand.revocation_overhead) == 0.0  # on-demand servers are not revoked


def test_spot_without_revocations_is_on_demand_at_the_spot_price() -> None:
    on_demand = cluster(8, price_usd_per_gpu_hour=1.0)
    spot = cluster(8, price_usd_per_gpu_hour=1.0, pricing="spot", revocations_per_node_hour=0.0)
    a = evaluate(gpt(), on_demand, run(64, tokens=1e9), Plan(tp=8, pp=8))
    b = evaluate(gpt(), spot, run(64, tokens=1e9), Plan(tp=8, pp=8))
    assert float(a.price.cost_to_train_usd) == float(b.price.cost_to_train_usd)
    assert float(a.price.time_to_train_s) == float(b.price.time_to_train_s)


def test_more_revocations_never_lower_expected_time() -> None:
    rates = np.array([0.0, 0.001, 0.01, 0.1, 1.0, 5.0])
    c = cluster(8, revocations_per_node_hour=rates, pricing="spot")
    report = evaluate(gpt(), c, run(64, tokens=1e9), Plan(tp=8, pp=8))
    days = report.price.time_to_train_s
    assert np.all(np.diff(days) > 0)


def test_a_pipeline_may_count_the_embedding_and_the_loss_as_layers() -> None:
    """pp·v dividing layers + 2 is valid (Megatron-Core's account-for-embedding/loss split:
    Llama 3 405B's 126 layers on 16 stages): 14 layers on the middle stages of GPT-3's 96 on
    7 stages, 13 beside the embedding and the loss; one layer more than an even split costs."""
    model, c, training = gpt(layers=96), cluster(7), run(56)
    assert plan_violations(model, c, training, Plan(tp=8, pp=7, dp=1)) == []
    r = stage_shape(model, degrees(c, training, Plan(tp=8, pp=7, dp=1)))
    assert (float(r.layers_per_stage), float(r.last_stage_layers)) == (14.0, 13.0)
    uneven = evaluate(model, c, training, Plan(tp=8, pp=7, dp=1))
    even = evaluate(gpt(layers=98), c, training, Plan(tp=8, pp=7, dp=1))
    assert bool(uneven.valid) and float(uneven.step_time_s) <= float(even.step_time_s)
    assert float(uneven.step_time_s) >= 96 / 98 * float(even.step_time_s)


def test_the_split_leaves_every_stage_a_transformer_layer() -> None:
    """98 stages for 96 layers would leave the first and last stage nothing but the embedding
    and the loss: refused."""
    assert any("layers=96" in m for m in plan_violations(gpt(), cluster(98, gpus_per_node=1),
                                                         run(98), Plan(tp=1, pp=98, dp=1)))


def test_tp_must_divide_the_mlp_width() -> None:
    """Megatron-Core's parallel linear layers refuse a width tp leaves a remainder of (an
    ffn_hidden of 16380 at tp 8: 2047.5 columns a rank)."""
    model = gpt(ffn_hidden=16380)
    (msg,) = [m for m in plan_violations(model, cluster(8), run(64), Plan(tp=8, pp=8))
              if "ffn_hidden" in m]
    assert "tp=8 does not divide ffn_hidden=16380" in msg and "[1, 2, 3, 4, 6, 12]" in msg
    assert plan_violations(model, cluster(8), run(64), Plan(tp=4, pp=16)) == []


def test_context_parallelism_cuts_the_sequence_into_2_cp_chunks() -> None:
    """cp=2 on 2050 tokens: 4 causal load-balancing chunks of 512.5 tokens."""
    model = gpt(seq_len=2050)
    msgs = plan_violations(model, cluster(8), run(64), Plan(tp=8, pp=4, cp=2))
    assert any("2·cp = 4 chunks" in m and "seq_len=2050" in m for m in msgs)
    assert plan_violations(model, cluster(8), run(64), Plan(tp=2, pp=32, cp=1,
                                                           sequence_parallel=True)) == []


def test_sequence_parallelism_splits_each_ranks_tokens_over_tp() -> None:
    """2052 tokens at cp 1 split over tp 8: 256.5 a rank; without sequence parallelism every
    rank holds them all."""
    model = gpt(seq_len=2052)
    plan = dict(tp=8, pp=8, cp=1)
    msgs = plan_violations(model, cluster(8), run(64), Plan(**plan, sequence_parallel=True))
    assert any("sequence parallelism" in m and "tp=8" in m for m in msgs)
    assert plan_violations(model, cluster(8), run(64), Plan(**plan)) == []
