"""Properties that hold for every plan: checked on arrays of random plans."""

import importlib

import numpy as np
import pytest

from cost import ClusterSpec, Plan, evaluate, model_flops_per_token, plan_violations
from tests.factories import a100, cluster, gpt, run

N = 4000


def random_plans(seed: int = 0) -> Plan:
    rng = np.random.default_rng(seed)

    def pick(values: list[float]) -> np.ndarray:
        return rng.choice(np.asarray(values, dtype=float), N)

    return Plan(tp=pick([1, 2, 4, 8]), pp=pick([1, 2, 4, 8]), virtual_stages=pick([1, 2, 3]),
                micro_batch=pick([1, 2, 4]), recompute=pick([0, 1, 2]),
                sequence_parallel=pick([0, 1]), zero=pick([0, 1, 2, 3]), cp=pick([1, 2]))


@pytest.mark.parametrize("field", ["scale_up_bandwidth_bytes_per_s",
                                   "scale_out_bandwidth_bytes_per_s"])
def test_more_network_bandwidth_never_slows_a_step(field: str) -> None:
    base = cluster(16)
    faster = base.with_(**{field: 2 * getattr(base, field)})
    plans = random_plans()
    slow = evaluate(gpt(), base, run(512), plans).step_time_s
    fast = evaluate(gpt(), faster, run(512), plans).step_time_s
    assert np.all(fast <= slow * (1 + 1e-12))
    assert np.any(fast < slow)


def test_more_hbm_bandwidth_never_slows_a_step() -> None:
    gpu = a100()
    faster_gpu = a100(hbm_bandwidth_bytes_per_s=2 * gpu.hbm_bandwidth_bytes_per_s)
    plans = random_plans(1)
    slow = evaluate(gpt(), ClusterSpec.of(gpu, nodes=16), run(512), plans).step_time_s
    fast = evaluate(gpt(), ClusterSpec.of(faster_gpu, nodes=16), run(512), plans).step_time_s
    assert np.all(fast <= slow * (1 + 1e-12))


def test_model_flops_are_6n_per_token_plus_attention() -> None:
    report = evaluate(gpt(), cluster(8), run(64), Plan(tp=8, pp=8))
    tokens = 64 * 2048
    assert report.model_flops_per_step == pytest.approx(model_flops_per_token(gpt()) * tokens)
    assert float(report.model_flops_per_gpu) == pytest.approx(
        report.model_flops_per_step / float(report.step_time_s) / 64)


def test_a_batch_equals_plan_by_plan() -> None:
    plans = random_plans(2)
    batch = evaluate(gpt(), cluster(16), run(512), plans)
    for i in range(0, N, 397):
        one = Plan(**{k: float(np.asarray(getattr(plans, k))[i]) if np.ndim(getattr(plans, k))
                      else getattr(plans, k) for k in plans.__dataclass_fields__})
        single = evaluate(gpt(), cluster(16), run(512), one)
        assert float(single.step_time_s) == pytest.approx(float(batch.step_time_s[i]))
        assert float(single.memory.total_bytes) == pytest.approx(
            float(batch.memory.total_bytes[i]))
        assert bool(single.valid) == bool(batch.valid[i])
        assert bool(single.valid) == (plan_violations(gpt(), cluster(16), run(512), one) == [])


def test_chunked_evaluation_equals_one_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    module = importlib.import_module("cost.evaluate")

    plans = random_plans(3)
    whole = evaluate(gpt(), cluster(16), run(512), plans)
    monkeypatch.setattr(module, "CHUNK", 1000)
    chunked = evaluate(gpt(), cluster(16), run(512), plans)
    assert np.array_equal(whole.step_time_s, chunked.step_time_s)
    assert np.array_equal(whole.memory.total_bytes, chunked.memory.total_bytes)
    assert np.array_equal(whole.feasible, chunked.feasible)
    assert chunked.step_time_s.shape == (N,)
