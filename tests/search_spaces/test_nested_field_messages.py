"""Messages for fields inside the model's nested sections: a misspelt key of
`model.attention` or of a layers model (or one of its layers) names the field it likely meant
and the fields there are, and a `kind` the model does not take stands alone."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from search_spaces import SpecError, SpecErrors, parse_spec
from tests.hostile_specs import VALID

_MLA = {"kind": "mla", "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_head_dim": 128,
        "qk_rope_head_dim": 64, "v_head_dim": 128}
_LAYER = {"name": "a", "forward_flops": 1e9, "params": 1e6, "activation_bytes": 1e6}


def _lines(model: Any) -> list[str]:
    data = {**copy.deepcopy(VALID), "model": model}
    with pytest.raises(SpecError) as caught:
        parse_spec(data, file="s.yaml")
    err = caught.value
    return [str(e) for e in (err.errors if isinstance(err, SpecErrors) else (err,))]


@pytest.mark.parametrize(("model", "field", "meant", "known"), [
    ({"base": "deepseek-v3", "attention": {**_MLA, "kv_lora_rnk": 512}},
     "model.attention.kv_lora_rnk", "kv_lora_rank",
     "kind, q_lora_rank, kv_lora_rank, qk_head_dim, qk_rope_head_dim, v_head_dim"),
    ({"name": "x", "kind": "layers", "layers": [{**_LAYER, "output": 3}]},
     "model.layers[0].output", "outputs",
     "known fields: name, forward_flops, params, activation_bytes, outputs"),
    ({"name": "x", "kind": "layers", "layers": [_LAYER], "nmae": "y"},
     "model.nmae", "name", "known fields: name, kind, layers"),
])
def test_a_misspelt_nested_field_names_what_it_meant(model: Any, field: str, meant: str,
                                                     known: str) -> None:
    lines = _lines(model)
    line = next(x for x in lines if x.startswith(f"s.yaml: {field}: "))
    assert f"did you mean {meant!r}" in line and line.endswith(known), line


def test_a_misspelt_required_field_of_attention_is_one_line() -> None:
    """`kv_lora_rnk` for `kv_lora_rank`: the unknown key's line says the field is missing,
    with no second line asking to add kv_lora_rank."""
    attention = {k: v for k, v in _MLA.items() if k != "kv_lora_rank"} | {"kv_lora_rnk": 512}
    lines = _lines({"base": "deepseek-v3", "attention": attention})
    assert lines == ["s.yaml: model.attention.kv_lora_rnk: unknown field 'kv_lora_rnk' under "
                     "model.attention; did you mean 'kv_lora_rank' (required, and missing)? "
                     "known fields: kind, q_lora_rank, kv_lora_rank, qk_head_dim, "
                     "qk_rope_head_dim, v_head_dim"]


def test_a_misspelt_optional_field_of_attention_is_not_called_required() -> None:
    """`q_lora_rnk` for `q_lora_rank`, which latent attention without a query latent leaves
    out (DeepSeek-V2-Lite): the line names what was meant and says nothing is missing."""
    attention = {k: v for k, v in _MLA.items() if k != "q_lora_rank"} | {"q_lora_rnk": 1536}
    lines = _lines({"base": "deepseek-v3", "attention": attention})
    assert lines == ["s.yaml: model.attention.q_lora_rnk: unknown field 'q_lora_rnk' under "
                     "model.attention; did you mean 'q_lora_rank'? "
                     "known fields: kind, q_lora_rank, kv_lora_rank, qk_head_dim, "
                     "qk_rope_head_dim, v_head_dim"]


def test_an_unknown_model_kind_stands_alone() -> None:
    """`kind: cnn`: the line naming the kinds, not five more asking for a transformer's
    layers, hidden, heads, vocab and seq_len (which `kind: layers` does not take)."""
    lines = _lines({"name": "x", "kind": "cnn"})
    assert len(lines) == 1 and lines[0].startswith("s.yaml: model.kind: kind 'cnn' is unknown")
