import pytest

from cost import matmul_parameters, model_flops_per_token, parameter_count
from cost.flops import attention_core_flops, layer_parameters
from tests.factories import gpt, small_model


def test_layer_parameters_by_hand() -> None:
    # h=256, f=1024: QKV 256*768 + 768, out 256*256 + 256, MLP 2*256*1024 + 1024 + 256, norms 4*256
    assert layer_parameters(small_model()) == 196608 + 768 + 65536 + 256 + 525568 + 1024


def test_gqa_and_gated_mlp_change_the_layer() -> None:
    h, kv, f = 256, 64, 512
    m = small_model(kv_heads=2, ffn_hidden=f, gated_mlp=True)
    attention = h * (h + 2 * kv) + (h + 2 * kv) + h * h + h
    mlp = 2 * h * f + 2 * f + f * h + h
    assert layer_parameters(m) == attention + mlp + 4 * h


def test_gpt3_175b_has_175b_parameters() -> None:
    assert parameter_count(gpt()) == pytest.approx(175e9, rel=0.01)


def test_tied_embeddings_count_once() -> None:
    untied, tied = small_model(), small_model(tied_embeddings=True)
    assert parameter_count(untied) - parameter_count(tied) == 1000 * 256


def test_model_flops_are_6n_plus_attention() -> None:
    m = small_model()
    n = m.layers * layer_parameters(m) + m.vocab * m.hidden
    assert matmul_parameters(m) == n
    assert model_flops_per_token(m) == 6 * n + 6 * m.layers * m.hidden * m.seq_len
    assert model_flops_per_token(m, causal=False) == 6 * n + 12 * m.layers * m.hidden * m.seq_len


def test_attention_core_flops() -> None:
    assert attention_core_flops(small_model(), 10, 128) == 4 * 10 * 128 * 256
