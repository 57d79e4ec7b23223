"""`tuner plan --as megatron` writes a command that Megatron-LM's own argument checks accept,
not only flags it documents: the assertions of validate_args (megatron/training/arguments.py
at core_v0.15.0, commit 0d7e02bd26d3eb347ad8d1bef625002babfa6df7) and of OptimizerConfig's
__post_init__ (megatron/core/optimizer/optimizer_config.py, same commit) that the flags this
exporter writes can reach, restated below with their lines; NeMo's overrides, which set the
same OptimizerConfig, likewise."""

from __future__ import annotations

import dataclasses
import shlex

import pytest

from cost import PlanRecord, Recompute
from tuner.export import megatron, nemo

from .test_plan_export import MoEPlan, _launch, _plans


def _command(text: str) -> tuple[dict[str, str], list[str]]:
    """(the environment assignments before torchrun, the words from torchrun on)."""
    words = shlex.split(" ".join(line.rstrip(" \\") for line in text.splitlines()
                                 if not line.startswith("#")))
    at = words.index("torchrun")
    env = dict(w.split("=", 1) for w in words[:at])
    return env, words[at:]


def _value(words: list[str], flag: str) -> str | None:
    return words[words.index(flag) + 1] if flag in words else None


def validate_args_problems(env: dict[str, str], words: list[str]) -> list[str]:
    """The core_v0.15.0 checks the exporter's flags reach, on a GPU before Blackwell."""
    found = []
    has = set(words).__contains__
    fsdp = has("--use-megatron-fsdp")
    if has("--optimizer-cpu-offload") and not has("--use-precision-aware-optimizer"):
        found.append("arguments.py:1155 offload needs --use-precision-aware-optimizer")
    if has("--use-precision-aware-optimizer") and not has("--use-distributed-optimizer"):
        found.append("optimizer_config.py:222 precision-aware needs the distributed optimizer")
    if fsdp and _value(words, "--ckpt-format") != "fsdp_dtensor":
        found.append("arguments.py:718 Megatron FSDP needs --ckpt-format fsdp_dtensor")
    if fsdp and env.get("CUDA_DEVICE_MAX_CONNECTIONS") == "1":
        found.append("arguments.py:715 FSDP needs CUDA_DEVICE_MAX_CONNECTIONS > 1")
    if has("--overlap-param-gather") and not (has("--use-distributed-optimizer") or fsdp):
        found.append("arguments.py:626 --overlap-param-gather needs a sharded optimizer")
    if has("--tp-comm-overlap") and not has("--sequence-parallel"):
        found.append("arguments.py:931 --tp-comm-overlap needs --sequence-parallel")
    parallel = int(_value(words, "--tensor-model-parallel-size") or 1) > 1 or \
        int(_value(words, "--context-parallel-size") or 1) > 1
    if parallel and not fsdp and not has("--overlap-moe-expert-parallel-comm") and \
            env.get("CUDA_DEVICE_MAX_CONNECTIONS") != "1":
        found.append("arguments.py:959 tp or cp > 1 needs CUDA_DEVICE_MAX_CONNECTIONS=1")
    return found


@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_every_exported_plan_passes_megatrons_argument_checks(precision: str) -> None:
    plans = [*_plans(), PlanRecord(tp=1, pp=2, dp=128, micro_batch=1, zero=3),
             MoEPlan(tp=1, pp=4, dp=64, ep=8, micro_batch=1)]
    for plan in plans:
        env, words = _command(megatron.render(_launch(plan, precision=precision)))
        assert validate_args_problems(env, words) == [], plan


def test_nemo_offloads_the_optimizer_megatron_core_can_offload() -> None:
    """NeMo's recipe runs Megatron Core's OptimizerConfig: the offload on the precision-aware
    optimizer, which asserts the distributed optimizer (optimizer_config.py:222)."""
    for plan in _plans():
        values = dict(nemo.assignments(_launch(plan))[0])
        offload = plan.offload.value != "none"
        assert values.get("recipe.optim.config.use_precision_aware_optimizer", False) == offload
        if values.get("recipe.optim.config.use_precision_aware_optimizer"):
            assert values["recipe.optim.config.use_distributed_optimizer"] is True
        if values.get("recipe.trainer.strategy.fsdp") == "megatron":
            assert values["recipe.optim.config.use_distributed_optimizer"] is True


def transformer_config_problems(words: list[str]) -> list[str]:
    """TransformerConfig.__post_init__'s checks of the expert all-to-all overlap
    (megatron/core/transformer/transformer_config.py:1441-1480 at the same commit); a
    --pipeline-model-parallel-layout of one chunk a stage, or one virtual stage, is no
    virtual pipeline (arguments.py:554-556, 581-582)."""
    if "--overlap-moe-expert-parallel-comm" not in words:
        return []
    pp = int(_value(words, "--pipeline-model-parallel-size") or 1)
    layout = _value(words, "--pipeline-model-parallel-layout")
    chunks = int(_value(words, "--num-virtual-stages-per-pipeline-rank") or 1)
    if layout is not None:
        chunks = (layout.count("|") + 1) // pp
    elif "--num-layers-per-virtual-pipeline-stage" in words:
        chunks = 2  # written only where the interleaving has two chunks or more
    found = []
    if pp > 1 and chunks < 2:
        found.append("transformer_config.py:1446 pp > 1 needs a virtual pipeline")
    if int(_value(words, "--expert-model-parallel-size") or 1) < 2:
        found.append("transformer_config.py:1452 needs ep > 1")
    if _value(words, "--recompute-granularity") == "full":
        found.append("transformer_config.py:1460 no full recompute")
    if int(_value(words, "--mtp-num-layers") or 0) > 1:
        found.append("transformer_config.py:1478 one MTP layer at most")
    return found


@pytest.mark.parametrize(("pp", "vs", "recompute"), [
    (2, 1, "none"), (1, 1, "full"), (8, 1, "selective"), (4, 2, "none")])
def test_the_expert_overlap_is_written_only_where_megatron_core_runs_it(
        pp: int, vs: int, recompute: str) -> None:
    """DeepSeek-V3 with the all-to-all overlap assumed (stack.ep_overlap): left out, with a
    note, where TransformerConfig would refuse it; written where it runs."""
    plan = MoEPlan(tp=1, pp=pp, dp=256 // pp, ep=32, virtual_stages=vs, micro_batch=1,
                   recompute=Recompute(recompute))
    lp = dataclasses.replace(_launch(plan, model="deepseek-v3"), ep_overlap=True)
    _, words = _command(megatron.render(lp))
    assert transformer_config_problems(words) == []
    blocked = lp.ep_overlap_blocked is not None
    assert ("--overlap-moe-expert-parallel-comm" in words) is not blocked
    assert blocked is ((pp > 1 and vs < 2) or recompute == "full")
    assert any("all-to-all overlap" in n for n in megatron.flags(lp)[1]) is blocked
    values = dict(nemo.assignments(lp)[0])
    assert values["recipe.model.config.overlap_moe_expert_parallel_comm"] is not blocked


def test_the_note_says_what_the_predicted_step_assumed() -> None:
    """Under Megatron-Core's schedule the cost model hides nothing where Megatron Core refuses
    the overlap (cost.moe_time.overlap_runs), so the prediction stands; under DualPipe's it
    hid the all-to-alls, which Megatron-LM will not."""
    plan = MoEPlan(tp=1, pp=2, dp=128, ep=32, virtual_stages=1, micro_batch=1,
                   recompute=Recompute("none"))
    lp = dataclasses.replace(_launch(plan, model="deepseek-v3"), ep_overlap=True)
    (note,) = [n for n in megatron.flags(lp)[1] if "all-to-all overlap" in n]
    assert note.endswith("counts the all-to-alls as exposed too"), note
    dual = dataclasses.replace(lp, ep_overlap_schedule="dualpipe")
    (note,) = [n for n in megatron.flags(dual)[1] if "all-to-all overlap" in n]
    assert "expect it slower" in note, note


def expert_problems(words: list[str]) -> list[str]:
    """core_v0.15.0's checks of an expert layout: validate_args refuses expert parallelism in
    fp16 (arguments.py:1041); TransformerConfig refuses biases (on unless
    --disable-bias-linear, arguments.py:2191) in experts split by etp > 1
    (transformer_config.py:1301)."""
    has = set(words).__contains__
    found = []
    if int(_value(words, "--expert-model-parallel-size") or 1) > 1 and has("--fp16"):
        found.append("arguments.py:1041 Expert parallelism is not supported with fp16")
    if int(_value(words, "--expert-tensor-parallel-size") or 1) > 1 and \
            not has("--disable-bias-linear"):
        found.append("transformer_config.py:1301 Bias in Moe is only supported when ETP==1")
    return found


@pytest.mark.parametrize("model", ["deepseek-v3", "qwen3-235b-a22b", "mixtral-8x22b",
                                   "gpt-oss-120b"])
@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_an_expert_layout_megatron_refuses_is_a_note(model: str, precision: str) -> None:
    """Experts without biases are written without them (Megatron-LM's linear layers have
    biases by default, which TransformerConfig refuses at etp > 1); what Megatron-LM refuses
    of the plan as the model evaluated it (GPT-OSS's biased experts at etp 2, any ep in fp16)
    is a note, never a silent command that stops at start-up."""
    plan = MoEPlan(tp=2, pp=1, dp=128, ep=8, etp=2, micro_batch=1, sequence_parallel=True)
    lp = _launch(plan, model=model, precision=precision)
    _, words = _command(megatron.render(lp))
    notes = megatron.flags(lp)[1]
    biased = model.startswith("gpt-oss")
    assert ("--disable-bias-linear" in words) is not biased
    expected = (["arguments.py:1041 Expert parallelism is not supported with fp16"]
                if precision == "fp16" else []) + \
        (["transformer_config.py:1301 Bias in Moe is only supported when ETP==1"]
         if biased else [])
    assert expert_problems(words) == expected
    assert any("refuses expert parallelism in fp16" in n for n in notes) is (precision == "fp16")
    assert any("experts with biases at etp 1 only" in n for n in notes) is biased
