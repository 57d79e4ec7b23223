import pytest

from cost import matmul_parameters, model_flops_per_token, parameter_count
from cost.flops import attention_core_flops, layer_parameters
from tests.factories import gpt, small_model


def test_layer_parameters_by_hand() -> None:
    # h=256, f=1024: QKV 256*768 + 768, out 256*256 + 256, MLP 2*256*1024 + 1024 + 256, norms 4*256
    assert layer_parameters(small_model()) == 196608 + 768 + 65536 + 256 + 525568 + 1024


def test_gqa_and_gated_mlp_change_the_layer() -> None:
    """A gated MLP's family (Llama) has no biases and RMSNorm (a weight, no bias); told
    otherwise, the layer has both."""
    h, kv, f = 256, 64, 512
    m = small_model(kv_heads=2, ffn_hidden=f, gated_mlp=True)
    attention = h * (h + 2 * kv) + h * h
    mlp = 2 * h * f + f * h
    assert layer_parameters(m) == attention + mlp + 2 * h
    biased = small_model(kv_heads=2, ffn_hidden=f, gated_mlp=True, linear_bias=True,
                         normalization="layernorm")
    assert layer_parameters(biased) == attention + (h + 2 * kv) + h + mlp + 2 * f + h + 4 * h


def test_qk_norm_adds_a_query_and_a_key_norm_over_one_head() -> None:
    plain = small_model(gated_mlp=True)
    assert layer_parameters(small_model(gated_mlp=True, qk_norm=True)) == (
        layer_parameters(plain) + 2 * 256 // 8)


@pytest.mark.parametrize(("name", "published"), [
    ("llama2-7b", 6_738_415_616),  # meta-llama/Llama-2-7b-hf, safetensors total
    ("llama3-8b", 8_030_261_248),  # meta-llama/Meta-Llama-3-8B
    ("llama3-70b", 70_553_706_496),  # meta-llama/Meta-Llama-3-70B
    ("llama3-405b", 405_853_388_800),  # meta-llama/Llama-3.1-405B
    ("mixtral-8x7b", 46_702_792_704),  # mistralai/Mixtral-8x7B-v0.1
    ("qwen3-30b-a3b", 30_532_122_624),  # Qwen/Qwen3-30B-A3B
])
def test_catalog_models_have_their_published_parameter_counts(name: str,
                                                              published: int) -> None:
    """The count every memory and FLOP figure starts from, against the totals the models'
    checkpoints publish (Hugging Face safetensors metadata): no bias where the model has
    none, RMSNorm's weight alone, QK-norm, the router."""
    from search_spaces.catalog import model_catalog

    assert model_catalog()[name].parameters() == published


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
