"""The decoder-only transformer (GPT/Llama style) as a workload (cost.workload.Workload).

Its time per micro-batch is in cost.transformer_time, its memory in cost.transformer_memory;
what it adds to the structural rules is here: tensor parallelism divides the attention heads,
pipeline chunks divide the layers (or the layers plus the embedding and the loss), context
parallelism divides the sequence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from . import transformer_memory, transformer_time
from .codec import PLAN_KNOBS
from .degrees import Degrees
from .efficiency import Efficiency
from .flops import has_linear_bias, model_flops_per_token, normalization, parameter_count
from .inputs import Array, ClusterSpec, TrainingSpec, Value
from .numerics import is_zero
from .precision import element_bytes
from .workload import Footprint, Rule, StageCost

if TYPE_CHECKING:
    from .layer_costs import LayerCosts
    from .mla import MLA

__all__ = ["ModelSpec", "architecture_defaults", "embedding_and_loss_split"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    """A decoder-only transformer (GPT/Llama style), per shared/SPEC.md `model`."""

    name: str
    layers: int
    hidden: int
    heads: int
    vocab: int
    seq_len: int
    kv_heads: int = 0  # 0: same as heads
    ffn_hidden: int = 0  # 0: 4 * hidden
    gated_mlp: bool = False
    tied_embeddings: bool = False
    dropout: bool = True  # hidden and attention dropout (GPT, Megatron's default); Llama: none
    head_dim: int = 0  # 0: hidden / heads (Qwen3 and GPT-OSS give their own)
    attention: MLA | None = None  # None: (grouped-query) multi-head attention
    # The architecture a launch builds and no cost term reads (tuner.export writes them as
    # Megatron-LM flags); "" / None: the family's default, architecture_defaults.
    normalization: str = ""  # layernorm | rmsnorm
    linear_bias: bool | None = None  # every dense linear layer adds a bias
    position_embedding: str = ""  # learned (absolute) | rope | alibi
    rotary_base: int = 0  # RoPE's base (theta); 0: 10000; none without rope
    qk_norm: bool = False  # queries and keys normalised per head before attention (Qwen3)
    norm_epsilon: float = 1e-5  # the norms' epsilon

    kind: ClassVar[str] = "transformer"
    unit: ClassVar[str] = "tokens"
    knobs: ClassVar[frozenset[str]] = frozenset(PLAN_KNOBS) - {"ep", "etp"}
    asynchronous_parameter_servers: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if self.kv_heads == 0:
            object.__setattr__(self, "kv_heads", self.heads)
        if self.ffn_hidden == 0:
            object.__setattr__(self, "ffn_hidden", 4 * self.hidden)
        if self.head_dim == 0:
            object.__setattr__(self, "head_dim", self.hidden // self.heads)
        for name, value in architecture_defaults(self).items():
            object.__setattr__(self, name, value)

    def parameters(self) -> int:
        """Every parameter (cost.flops.parameter_count)."""
        return parameter_count(self)

    def active_parameters(self) -> int:
        """Parameters one token passes through: all of them in a dense model."""
        return parameter_count(self)

    @property
    def kv_hidden(self) -> int:
        """Width of the K (or V) projection: kv_heads * head_dim."""
        return self.kv_heads * self.head_dim

    def describe(self) -> str:
        return f"{self.name}: heads={self.heads}, layers={self.layers}, seq_len={self.seq_len}"

    def rules(self, training: TrainingSpec) -> tuple[Rule, ...]:
        return transformer_rules(self)

    def stage_cost(self, cluster: ClusterSpec, training: TrainingSpec, d: Degrees,
                   eff: Efficiency) -> StageCost:
        return transformer_time.stage_cost(self, cluster, training, d, eff)

    def footprint(self, cluster: ClusterSpec, training: TrainingSpec, d: Degrees,
                  eff: Efficiency) -> Footprint:
        return transformer_memory.footprint(self, training, d, eff)

    def layer_costs(self, cluster: ClusterSpec, training: TrainingSpec, d: Degrees,
                    eff: Efficiency) -> LayerCosts | None:
        from .transformer_layers import layer_costs  # a split over pools of several GPU types

        return layer_costs(self, cluster, training, d, eff)

    def units_per_step(self, training: TrainingSpec) -> float:
        return float(training.global_batch * self.seq_len)

    def model_flops_per_step(self, training: TrainingSpec) -> float:
        return model_flops_per_token(self) * self.units_per_step(training)

    def palm_flops_per_step(self, training: TrainingSpec) -> float:
        return model_flops_per_token(self, causal=False) * self.units_per_step(training)

    def checkpoint_bytes(self, training: TrainingSpec) -> float:
        """Weights and the optimizer state (fp32 master copy and two Adam moments) of every
        parameter, as Megatron-LM and DeepSpeed save them."""
        sizes = element_bytes(training.precision)
        return float(parameter_count(self)) * (sizes["weight"] + sizes["optimizer"])


def architecture_defaults(model: ModelSpec) -> dict[str, object]:
    """The architecture fields a model leaves open, from its family: a gated (SwiGLU) MLP
    goes with RMSNorm, no biases and rotary position embeddings (Llama, Touvron et al. 2023
    sec. 2.2; Mistral, Qwen, DeepSeek); otherwise the GPT-2/3 layout of LayerNorm, biases and
    learned absolute positions (Radford et al. 2019 sec. 2.3, Brown et al. 2020 sec. 2.1),
    which are also Megatron-LM's defaults (arguments.py at core_v0.15.0: --normalization
    LayerNorm, add_bias_linear, --position-embedding-type learned_absolute). RoPE's base is
    10000 (Su et al. 2021 sec. 3.2.2; Megatron-LM's --rotary-base default) unless given, and
    none (0) without rotary positions."""
    llama = model.gated_mlp
    out: dict[str, object] = {}
    if not model.normalization:
        out["normalization"] = normalization(model)
    if model.linear_bias is None:
        out["linear_bias"] = has_linear_bias(model)
    position = model.position_embedding or ("rope" if llama or model.attention else "learned")
    out["position_embedding"] = position
    if position != "rope":
        out["rotary_base"] = 0
    elif model.rotary_base == 0:
        out["rotary_base"] = 10000
    return out


def embedding_and_loss_split(layers: int, pp: Value, vs: Value) -> Array:
    """1.0 where the pipeline counts the embedding and the loss as one layer each: pp·v does
    not divide the layers but divides layers + 2, each stage keeping two slots or more, so the
    first and the last stage each take one transformer layer fewer and keep at least one (a
    virtual chunk may hold the embedding or the loss alone: Megatron-Bridge's 405B on 16
    stages of 8 chunks)
    (Megatron-Core's --account-for-embedding-in-pipeline-split and
    --account-for-loss-in-pipeline-split; Llama 3 405B's 126 layers on 16 stages, BLOOM's 70
    on 12)."""
    chunks = np.maximum(np.multiply(pp, vs), 1.0)
    even = is_zero(np.mod(layers, chunks))
    plus_two = is_zero(np.mod(layers + 2.0, chunks)) & (2.0 * np.asarray(pp) <= layers + 2.0)
    return np.where(~even & plus_two & (np.asarray(pp) > 1), 1.0, 0.0)


def _divides(d: Value, n: Value) -> Array:
    return is_zero(np.mod(n, np.maximum(d, 1.0)))


def transformer_rules(model: ModelSpec) -> tuple[Rule, ...]:
    """tp divides the heads (query and key/value) and the MLP's width, pp·virtual_stages the
    layers or the layers plus two, 2·cp the sequence (context_rules)."""
    from .validity import passing_values

    def heads(d: Degrees) -> Array:
        return ~(_divides(d.tp, model.heads) & _divides(d.tp, model.kv_heads))

    def layers(d: Degrees) -> Array:
        split = embedding_and_loss_split(model.layers, d.pp, d.vs)
        return ~(_divides(d.pp * d.vs, model.layers) | (split > 0))

    def heads_text(d: Degrees) -> str:
        return (f"tp={_one(d.tp):g} does not divide heads={model.heads} and "
                f"kv_heads={model.kv_heads}; choose one of "
                f"{passing_values(heads, d, 'tp', range(1, model.heads + 1))}")

    def layers_text(d: Degrees) -> str:
        return (f"pp·virtual_stages = {_one(d.pp) * _one(d.vs):g} divides neither "
                f"layers={model.layers} nor layers + 2 (embedding and loss counted as "
                f"layers); choose pp from "
                f"{passing_values(layers, d, 'pp', range(1, model.layers + 3), vs=1.0)}")

    return (Rule("tp_heads", ("tp",), heads, heads_text),
            Rule("layers", ("pp", "virtual_stages"), layers, layers_text),
            *width_rules({"ffn_hidden": model.ffn_hidden}, heads),
            *context_rules(model.seq_len))


def width_rules(widths: dict[str, int], heads: Callable[[Degrees], Array]) -> tuple[Rule, ...]:
    """tp divides each MLP width it splits (named as the spec names it): Megatron-Core's
    column- and row-parallel linear layers divide their sharded dimension by tp and refuse a
    remainder (megatron/core/utils.py divide, 'is not divisible by'), so an ffn_hidden of
    16380 cannot run at tp 8. The values a message offers pass `heads` (the rule on the
    heads) too."""
    from .validity import passing_values

    def broken(d: Degrees) -> Array:
        return ~np.logical_and.reduce([_divides(d.tp, w) for w in widths.values()])

    def text(d: Degrees) -> str:
        tp = _one(d.tp)
        names = " and ".join(f"{name}={width}" for name, width in widths.items()
                             if width % tp)
        return (f"tp={tp:g} does not divide {names} (the MLP's tensor-parallel "
                "shards); choose tp from "
                f"{passing_values(lambda t: broken(t) | heads(t), d, 'tp', range(1, 129))}")

    if not widths:
        return ()
    return (Rule("tp_width", ("tp",), broken, text),)


def context_rules(seq_len: int) -> tuple[Rule, ...]:
    """Context parallelism cuts the sequence into 2·cp chunks (each rank a chunk from each
    end, balancing causal attention: Megatron-Core's get_batch_on_this_cp_rank views the
    sequence as 2·cp equal chunks; torchtitan's load balancer likewise), and sequence
    parallelism splits each rank's seq_len / cp tokens over the tp ranks (Megatron-Core's
    scatter_to_sequence_parallel_region: 'First dimension of the tensor should be divisible by
    tensor parallel size')."""
    from .validity import passing_values

    def chunks(d: Degrees) -> Array:
        return (d.cp > 1) & ~_divides(2.0 * d.cp, seq_len)

    def split(d: Degrees) -> Array:
        return (d.sp > 0) & ~_divides(d.tp * d.cp, seq_len)

    def chunks_text(d: Degrees) -> str:
        return (f"cp={_one(d.cp):g} cuts seq_len={seq_len} into 2·cp = {2 * _one(d.cp):g} "
                "chunks (causal load balancing), which must divide it; choose cp from "
                f"{passing_values(chunks, d, 'cp', range(1, 65))}")

    def split_text(d: Degrees) -> str:
        return (f"sequence parallelism splits each rank's seq_len / cp = {seq_len} / "
                f"{_one(d.cp):g} tokens over tp={_one(d.tp):g} ranks, which must divide "
                "them; choose tp·cp dividing seq_len, or sequence_parallel: false")

    return (Rule("cp_seq", ("cp",), chunks, chunks_text),
            Rule("sp_seq", ("tp", "cp", "sequence_parallel"), split, split_text))


def _one(value: Array) -> float:
    return float(np.ravel(value)[0])
