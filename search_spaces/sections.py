"""Spec sections that hold no choices: model, training, objective, constraints, search."""

# Annotations evaluated as written (no `from __future__ import annotations`): pydantic would
# otherwise compile and evaluate each field's annotation from its string when the class is
# made, 4 ms of every start with the spec sections (issue 14).

import dataclasses
from collections.abc import Collection
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

from pydantic import BeforeValidator, Field, WithJsonSchema, field_validator, model_validator

from cost import Efficiency, ModelSpec, TrainingSpec

from .catalog import model_catalog, unknown_name_message
from .errors import SpecError
from .fields import (
    MAX_SEED,
    Bytes,
    Count,
    Frozen,
    PositiveNumber,
    PositiveUsd,
    Seconds,
    Size,
    TokenCount,
)
from .headroom import Headroom

if TYPE_CHECKING:  # at run time imported where used: a dense model needs no cost.layers or .mla
    from cost import MLA, LayersModel

__all__ = [
    "OBJECTIVES",
    "Constraints",
    "LayersSection",
    "ModelSection",
    "Objective",
    "SearchSection",
    "StackSection",
    "TrainingSection",
    "resolve_model",
]

OBJECTIVES = ("throughput", "time_to_train", "cost")
ObjectiveName = Literal["throughput", "time_to_train", "cost"]


Whole = Annotated[int, Field(strict=True, ge=0, le=10**9)]


class MLASection(Frozen):
    """Multi-head latent attention (shared/SPEC.md `model.attention`, DeepSeek-V3)."""

    kind: Literal["mla"]
    q_lora_rank: Size | None = None
    """Left out (or null, as DeepSeek-V2-Lite's and Moonlight's configs say): queries are
    projected straight from the hidden state, with no latent."""
    kv_lora_rank: Size
    qk_head_dim: Size
    qk_rope_head_dim: Size
    v_head_dim: Size

    def to_mla(self) -> "MLA":
        from cost import MLA

        return MLA(**{**_fields(self), "q_lora_rank": self.q_lora_rank or 0})


def _fields(section: Frozen, *, exclude: Collection[str] = ()) -> dict[str, Any]:
    """The section's fields by name, as they are (model_dump's values for sections of plain
    fields; the caller converts a nested section). Not model_dump: that builds the section's
    own serializer (and validator) on first use, ~2 ms of `tuner evaluate`, where the spec's
    validator built the section's schema already, inside StudySpec's."""
    return {name: value for name, value in section if name not in exclude}


_MOE_FIELDS = ("top_k", "expert_ffn_hidden", "shared_experts", "dense_layers", "moe_layer_freq",
               "mtp_layers", "expert_groups", "group_top_k", "expert_bias", "expert_clamp")


class ModelSection(Frozen):
    """A decoder-only transformer (shared/SPEC.md `model`), a mixture of experts where
    `experts` is given."""

    name: str = "custom"
    kind: str = "transformer"
    layers: Size
    hidden: Size
    heads: Size
    kv_heads: Size | None = None
    ffn_hidden: Size | None = None
    vocab: Size
    seq_len: Size
    gated_mlp: bool = Field(default=False, strict=True)
    tied_embeddings: bool = Field(default=False, strict=True)
    dropout: bool = Field(default=True, strict=True)
    """Hidden and attention dropout in training (Megatron's GPT default); Llama-style models
    train without (their dropout masks are not stored)."""
    head_dim: Size | None = None
    attention: MLASection | None = None
    experts: Size | None = None
    top_k: Size | None = None
    expert_ffn_hidden: Size | None = None
    shared_experts: Whole = 0
    dense_layers: Whole = 0
    moe_layer_freq: Size = 1
    mtp_layers: Whole = 0
    expert_groups: Size = 1
    """Groups the routed experts fall into for group-limited routing (DeepSeek-V3's n_group;
    Megatron-Core's --moe-router-num-groups); 1: none."""
    group_top_k: Size = 1
    """Groups a token's experts are chosen from (DeepSeek-V3's topk_group;
    --moe-router-group-topk)."""
    expert_bias: bool = Field(default=False, strict=True)
    """Both expert GEMMs add a bias (GPT-OSS's mlp1_bias and mlp2_bias)."""
    expert_clamp: bool = Field(default=False, strict=True)
    """The experts' gated activation clamps its two halves (GPT-OSS's swiglu, limit 7.0)."""
    normalization: Literal["layernorm", "rmsnorm"] | None = None
    linear_bias: bool | None = Field(default=None, strict=True)
    position_embedding: Literal["learned", "rope", "alibi"] | None = None
    rotary_base: Annotated[int, Field(strict=True, ge=0, le=10**12)] | None = None
    qk_norm: bool = Field(default=False, strict=True)
    norm_epsilon: Annotated[float, Field(gt=0, lt=1, allow_inf_nan=False)] = 1e-5
    """The architecture a launch builds and the cost model does not read (README, model
    fields): left out, the family's (cost.transformer.architecture_defaults: a gated MLP
    has RMSNorm, no biases and RoPE of base 10000; otherwise GPT-3's LayerNorm, biases and
    learned positions)."""

    @field_validator("kind")
    @classmethod
    def _transformer_only(cls, kind: str) -> str:
        if kind != "transformer":
            raise ValueError(f"kind {kind!r} is unknown: use `kind: layers` with a list of "
                             "{name, forward_flops, params, activation_bytes}, or leave kind "
                             "out for a decoder-only transformer")
        return kind

    @model_validator(mode="after")
    def _shape(self) -> "ModelSection":
        if self.head_dim is None and self.attention is None and self.hidden % self.heads:
            raise SpecError(f"hidden={self.hidden} is not a multiple of heads={self.heads}; "
                            "change one of them", field="heads")
        if self.kv_heads is not None and self.heads % self.kv_heads:
            raise SpecError(f"kv_heads={self.kv_heads} does not divide heads={self.heads}; "
                            "choose a divisor", field="kv_heads")
        self._experts()
        self._architecture()
        return self

    def _architecture(self) -> None:
        """Latent attention has one key and value head per query head (expanded from its
        latent; DeepSeek-V3 inference/model.py, MLA) and carries RoPE in its
        qk_rope_head_dim."""
        if self.attention is not None and self.kv_heads not in (None, self.heads):
            raise SpecError(f"kv_heads={self.kv_heads} with multi-head latent attention "
                            "(attention.kind: mla), which has no key/value groups; leave "
                            f"kv_heads out or set it to heads={self.heads}", field="kv_heads")
        if self.attention is not None and self.position_embedding not in (None, "rope"):
            raise SpecError(f"position_embedding={self.position_embedding} with multi-head "
                            "latent attention, whose qk_rope_head_dim is rotary; leave it out "
                            "or set rope", field="position_embedding")

    def _experts(self) -> None:
        """A mixture of experts names its experts, top_k and expert width; a dense model
        none of the expert fields."""
        if self.experts is None:
            given = [k for k in _MOE_FIELDS if k in self.model_fields_set
                     and (getattr(self, k) is True or getattr(self, k) not in (None, 0, 1))]
            if given:
                raise SpecError(f"{given[0]} applies to a mixture of experts only; give "
                                "`experts` (routed experts per MoE layer) or leave it out",
                                field=given[0])
            return
        for key in ("top_k", "expert_ffn_hidden"):
            if getattr(self, key) is None:
                raise SpecError(f"a mixture of experts needs {key}; give it beside `experts`",
                                field=key)
        if self.top_k is not None and self.top_k > self.experts:
            raise SpecError(f"top_k={self.top_k} is more than experts={self.experts}; "
                            "choose top_k <= experts", field="top_k")
        self._groups()
        if self.dense_layers >= self.layers:
            raise SpecError(f"dense_layers={self.dense_layers} leaves no MoE layer of "
                            f"layers={self.layers}; choose fewer", field="dense_layers")
        self._moe_layer_freq()

    def _moe_layer_freq(self) -> None:
        """Layer i has experts when i >= dense_layers and i % moe_layer_freq == 0 (cost.moe.
        moe_layers): a frequency that no layer past the dense ones meets leaves none."""
        freq, first = self.moe_layer_freq, self.dense_layers
        first_moe = -(-first // freq) * freq  # the first multiple of freq at or past first
        if first_moe >= self.layers:
            raise SpecError(f"moe_layer_freq={freq} with dense_layers={first} leaves no MoE "
                            f"layer of layers={self.layers} (a layer i has experts where "
                            f"i >= dense_layers and i % moe_layer_freq == 0); choose "
                            f"moe_layer_freq <= {self.layers - first} (layers - dense_layers)"
                            " or fewer dense_layers",
                            field="moe_layer_freq")

    def _groups(self) -> None:
        """Group-limited routing: the groups split the experts evenly and hold the top_k."""
        experts, groups, chosen = self.experts or 1, self.expert_groups, self.group_top_k
        if experts % groups:
            raise SpecError(f"expert_groups={groups} does not divide experts={experts}; "
                            "choose a divisor", field="expert_groups")
        if chosen > groups:
            raise SpecError(f"group_top_k={chosen} is more than expert_groups={groups}; "
                            "choose group_top_k <= expert_groups", field="group_top_k")
        if groups > 1 and (self.top_k or 1) > chosen * experts // groups:
            raise SpecError(f"top_k={self.top_k} is more than the {chosen * experts // groups} "
                            f"experts of group_top_k={chosen} groups; raise group_top_k",
                            field="group_top_k")

    def to_model_spec(self) -> ModelSpec:
        """A ModelSpec, or a MoEModelSpec where `experts` is given."""
        values = _fields(self, exclude={"kind", "experts", *_MOE_FIELDS})
        values["kv_heads"] = self.kv_heads or 0
        values["ffn_hidden"] = self.ffn_hidden or 0
        values["head_dim"] = self.head_dim or 0
        values["attention"] = self.attention.to_mla() if self.attention else None
        values["normalization"] = self.normalization or ""
        values["position_embedding"] = self.position_embedding or ""
        values["rotary_base"] = self.rotary_base or 0
        if self.experts is None:
            return ModelSpec(**values)
        from cost import MoEModelSpec

        moe = {k: getattr(self, k) for k in _MOE_FIELDS}
        return MoEModelSpec(**values, experts=self.experts, **moe)


class LayerEntry(Frozen):
    """One layer of a layers model, per sample: FLOPs, parameters, the bytes it keeps for the
    backward pass in fp32, and (optionally) its output elements."""

    name: str
    forward_flops: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    params: Annotated[float, Field(ge=0, allow_inf_nan=False)]
    activation_bytes: Bytes
    outputs: Annotated[float, Field(ge=0, allow_inf_nan=False)] = 0.0


class LayersSection(Frozen):
    """A network given by its layers (shared/SPEC.md `kind: layers`), trained data-parallel."""

    name: str = "custom"
    kind: Literal["layers"]
    layers: Annotated[tuple[LayerEntry, ...], Field(min_length=1, max_length=100_000)]

    def to_model_spec(self) -> "LayersModel":
        from cost import Layer, LayersModel

        return LayersModel(name=self.name, layers=tuple(
            Layer(name=x.name, forward_flops=x.forward_flops, params=x.params,
                  activation_bytes=x.activation_bytes, outputs=x.outputs)
            for x in self.layers))


def _known_names() -> dict[str, None]:
    """The names of both catalogs, models first (the message lists them; no entry is built)."""
    from .networks import network_catalog

    return dict.fromkeys([*model_catalog(), *network_catalog()])


def resolve_model(value: Any) -> Any:
    """A catalog name or `{base: NAME, ...overrides}` as the mapping of a ModelSection (or of
    a LayersSection for the built-in networks)."""
    catalog = model_catalog()
    if isinstance(value, str):
        if value in catalog:  # no network has a model's name (tests/search_spaces/test_catalog.py)
            return dataclasses.asdict(catalog[value])
        from .networks import network_catalog  # built, with cost.layers, for other names only

        networks = network_catalog()
        if value in networks:
            return {"kind": "layers", **dataclasses.asdict(networks[value])}
        raise ValueError(unknown_name_message("model", value, _known_names()))
    if isinstance(value, dict) and "base" in value:
        base = value["base"]
        if base not in catalog:
            raise SpecError(unknown_name_message("model", base, catalog), field="base")
        overrides = {k: v for k, v in value.items() if k != "base"}
        return {**dataclasses.asdict(catalog[base]), **overrides}
    if isinstance(value, dict) and value.get("name") in catalog and not {
            "layers", "hidden"} <= set(value):
        name = value["name"]
        raise SpecError(f"{name} is a catalog model; to change some of its fields write "
                        f"`model: {{base: {name}, ...}}` (a mapping with `name` is a model of "
                        "your own, every field given)", field="name")
    return value


class TrainingSection(Frozen):
    """What is trained: batch (sequences per step), tokens, number format, optimizer."""

    global_batch: Size
    tokens: TokenCount = 0.0
    precision: Literal["bf16", "fp16", "fp8", "fp32"] = "bf16"
    optimizer: Literal["adam", "adamw"] = "adam"

    def to_training_spec(self) -> TrainingSpec:
        return TrainingSpec(global_batch=self.global_batch, precision=self.precision,
                            tokens=self.tokens, optimizer=self.optimizer)


def _as_list(value: Any) -> Any:
    """One name as a list of one; a number or a mapping is neither (not 'must be a list',
    the lesser half of what the field takes)."""
    names = get_args(ObjectiveName)
    if isinstance(value, str):
        if value not in names:  # its own line: 'objective', not 'objective[0]' of a list
            import difflib  # on this error only: the module starts every command

            close = difflib.get_close_matches(value, list(names), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"give one of {', '.join(names)} (got {value!r}){hint}")
        return [value]
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"give one of {', '.join(names)}, or a list of two of them for a Pareto "
                         f"search, e.g. [time_to_train, cost] (got {value!r})")
    return value


_OBJECTIVE_NAME = {"type": "string", "enum": list(get_args(ObjectiveName))}
Objective = Annotated[
    tuple[ObjectiveName, ...], BeforeValidator(_as_list), Field(min_length=1, max_length=2),
    WithJsonSchema({"anyOf": [_OBJECTIVE_NAME, {  # one name, or two for a Pareto front
        "type": "array", "items": _OBJECTIVE_NAME, "minItems": 1, "maxItems": 2}]}),
]


class Constraints(Frozen):
    """Limits a plan must meet besides memory: USD to train, days, GPUs, USD per hour, and
    HBM to leave free on each GPU (search_spaces.headroom)."""

    max_cost: PositiveUsd | None = None
    max_days: PositiveNumber | None = None
    max_gpus: Count | None = None
    max_hourly_cost: PositiveUsd | None = None
    memory_headroom: Headroom | None = None


class SearchSection(Frozen):
    """How to search: sampler, trial count, seed, time limit (seconds), and the time an
    exhaustive sweep may take for `auto` to choose it (seconds, estimated from the plans of
    the space and the cost model's measured rate)."""

    sampler: Literal["auto", "tpe", "nsga2", "gp", "random", "exhaustive"] = "auto"
    trials: Annotated[int, Field(strict=True, ge=1, le=10**7)] = 100
    seed: Annotated[int, Field(strict=True, ge=0, le=MAX_SEED)] | None = None
    timeout: Seconds | None = None
    exhaustive_budget: Seconds = 30.0


Fraction = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]


class StackSection(Frozen):
    """The training software's features, which a calibration profile (fitted hardware
    efficiency) does not decide: left out, the profile's value (a current stack) stands.

    - flash_attention: fused attention (FlashAttention, cuDNN); false for stacks before 2022
      (Megatron-LM until 2023), whose softmax streams the s x s scores through HBM and keeps
      them for the backward pass;
    - dp_overlap: share of the backward (forward) pass that hides data-parallel gradient
      reductions (weight gathers); 0 for a stack that reduces after the backward pass;
    - dp_bucket_params: parameters per data-parallel gradient bucket, each reduced (and
      gathered) by a collective of its own that pays the ring's latency (Megatron's
      --ddp-bucket-size; left out: Megatron-Core's max(4e7, 1e6 x dp x cp); 0: no buckets,
      one collective per model chunk; cost.schedule.dp_buckets);
    - tp_overlap: share of tensor-parallel traffic hidden behind GEMMs (Transformer Engine's
      userbuffers overlap); 0 without it;
    - params: what the weights live in: bf16 (Megatron: fp32 master copy in the optimizer),
      fp32 (PyTorch autocast, FSDP2's fp32 sharded parameters), fp8 (fp8 primary weights);
    - autocast: 16-bit compute by torch.autocast over fp32 weights (plain PyTorch AMP);
    - main_grads: the gradient buffer's precision, fp32 (Megatron's default) or bf16;
    - master_weights: fp32 (the optimizer's 4-byte master copy), remainders (the 16 low bits
      a bf16 weight lacks: Apex's store_param_remainders, Megatron-Core's precision-aware
      optimizer), none (the optimizer updates the bf16 weights, moments in bf16: plain
      torch.optim over bf16 parameters) or none_fp32_moments (no master, fp32 moments:
      Transformer Engine's FusedAdam defaults);
    - fp8_recipe: how fp8 tensors are scaled: delayed, current (tensor-wise), mxfp8
      (Blackwell block scaling), blockwise (cost.efficiency.Efficiency.fp8_recipe);
    - kernels: fused (Megatron-Core with Transformer Engine, the default), eager (plain
      PyTorch modules) or compiled (torch.compile): kernel launches, element-wise HBM passes
      and saved copies per layer (cost.software);
    - cuda_graphs: the host replays captured CUDA graphs (no per-kernel launch cost);
    - selective_recompute: what `recompute: selective` redoes: attention (Megatron-LM: the
      attention core) or op (torchtitan's per-op policy: every second GEMM and the
      element-wise work, cost.efficiency.Efficiency.selective_recompute);
    - tensor_parallel: megatron (a column-parallel GEMM saves its sequence-sharded input and
      gathers it again in the backward) or dtensor (PyTorch's DTensor tensor parallelism,
      torchtitan's: the input is saved all-gathered, cost.transformer_memory.head_input_bytes);
    - expandable_segments: PyTorch's allocator runs with expandable segments (NeMo's
      performance scripts, torchtitan): no fragmentation, tensors fill the usable HBM;
    - activation_offload_layers: layers per stage whose saved activations go to host memory
      between their forward and backward (Megatron-Core's --cpu-offloading-num-layers);
    - offload_modules: what fine-grained activation offloading moves to the host between a
      layer's forward and backward (Megatron-Core's --offload-modules): expert_fc1 (the routed
      tokens' input to the first expert GEMM), moe_act (the activation function's input);
    - cross_entropy: megatron (fp32 logits and gradient) or te (Transformer Engine's
      in-place cross-entropy: only the 16-bit logits stay) or compiled (the loss inside
      torch.compile's graph: bf16 logits and gradient) or loss_parallel (PyTorch's eager
      loss_parallel on vocabulary-sharded logits where tp > 1, torchtitan's: 16 bytes per
      logit at its backward; cost.software.LOSS_KERNELS);
    - attention_kernel: fused (cuDNN fused attention / FlashAttention-3, Transformer Engine's)
      or flash2 (FlashAttention-2, PyTorch's scaled_dot_product_attention on Hopper: 35/75 of
      the fused rate, cost.efficiency.Efficiency.attention_kernel);
    - context_parallel: megatron (ring attention passing the keys and values beside each
      step) or torch_allgather (PyTorch's context_parallel as torchtitan runs it: one exposed
      all-gather of the repeated keys and values, fp32 logsumexp merges,
      cost.efficiency.Efficiency.context_parallel);
    - reshard_after_forward: ZeRO-3/FSDP frees each layer's gathered weights after its forward
      (true, the default) or keeps them gathered through the step's micro-batches, whose
      gradients accumulate before one reduce-scatter (false: FSDP's SHARD_GRAD_OP with
      no_sync, ZeRO-1's traffic and memory; unless_pipelined: false where pp > 1, as
      torchtitan; cost.efficiency.Efficiency.reshard_after_forward);
    - ep_overlap: share of a mixture of experts' token all-to-alls hidden behind another
      micro-batch's compute (Megatron-Core's --overlap-moe-expert-parallel-comm, DualPipe);
    - ep_overlap_schedule: the schedule that pairs the micro-batches for that overlap:
      megatron (Megatron-Core's combined 1F1B: ep > 1, virtual stages where pp > 1, no full
      recompute, at most one MTP layer; plans without them hide nothing) or dualpipe
      (DeepSeek's DualPipe: any pipeline);
    - ep_dedup: tokens cross to each remote NVLink domain once (DeepEP, HybridEP); false for
      NCCL's all-to-all dispatcher;
    - expert_imbalance: the busiest expert rank's tokens over the mean (1.0: force-balanced
      routing, as published benchmarks run);
    - expert_epilogue: how experts' biases and clamped activation run where the model has
      them: megatron (Megatron-Core's grouped MLP, eager clamp and second bias), automodel
      (NeMo Automodel: both biases eager) or fused (Transformer Engine's operation fuser),
      cost.moe_epilogue."""

    flash_attention: bool | None = Field(default=None, strict=True)
    dp_overlap: Fraction | None = None
    dp_bucket_params: Annotated[int, Field(strict=True, ge=0, le=10**13)] | None = None
    tp_overlap: Fraction | None = None
    params: Literal["bf16", "fp32", "fp8"] | None = None
    autocast: bool | None = Field(default=None, strict=True)
    main_grads: Literal["fp32", "bf16"] | None = None
    master_weights: Literal["fp32", "remainders", "none", "none_fp32_moments"] | None = None
    fp8_recipe: Literal["delayed", "current", "mxfp8", "blockwise"] | None = None
    kernels: Literal["fused", "eager", "compiled"] | None = None
    cuda_graphs: bool | None = Field(default=None, strict=True)
    selective_recompute: Literal["attention", "op"] | None = None
    tensor_parallel: Literal["megatron", "dtensor"] | None = None
    reshard_after_forward: Literal[True, False, "unless_pipelined"] | None = None
    attention_kernel: Literal["fused", "flash2"] | None = None
    context_parallel: Literal["megatron", "torch_allgather"] | None = None
    expandable_segments: bool | None = Field(default=None, strict=True)
    activation_offload_layers: Annotated[int, Field(strict=True, ge=0, le=10**4)] | None = None
    offload_modules: tuple[Literal["expert_fc1", "moe_act"], ...] | None = None
    cross_entropy: Literal["megatron", "te", "compiled", "loss_parallel"] | None = None
    ep_overlap: Fraction | None = None
    ep_overlap_schedule: Literal["megatron", "dualpipe"] | None = None
    ep_dedup: bool | None = Field(default=None, strict=True)
    expert_imbalance: Annotated[float, Field(ge=1, le=64, allow_inf_nan=False)] | None = None
    expert_epilogue: Literal["megatron", "automodel", "fused"] | None = None

    def apply(self, efficiency: Efficiency) -> Efficiency:
        """`efficiency` with the fields this stack names."""
        given = {k: v for k, v in self if v is not None}
        return efficiency.with_(**given) if given else efficiency
