"""`tuner plan NAME --as ...` on a study of pools of several GPU types: the spec format
evaluates to the trial's step time; a pipeline across pools writes its uneven layer split
where the framework can state it (first and last stage; Megatron Core's layout for a split
uneven in the middle) and says which nodes hold which stages; what a framework cannot express
(balanced per-replica batches, a split uneven in the middle in torchtitan) is a comment."""

from __future__ import annotations

import dataclasses
import json
import shlex
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tuner.cli import main
from tuner.export.pools import PoolPart, end_split, pool_notes, stage_layers

from .specs import write
from .test_plan_export import MEGATRON_FLAGS, NEMO_ATTRIBUTES, TORCHTITAN_KEYS, _megatron_names


def _pools(name: str, **plan: Any) -> dict[str, Any]:
    return {"name": name, "model": "llama3-8b",
            "training": {"global_batch": 64, "tokens": 1e11, "precision": "bf16"},
            "cluster": {"pools": [{"name": "owned", "gpu": "a100-80gb", "nodes": 2,
                                   "price_per_gpu_hour": 0},
                                  {"name": "rented", "gpu": ["h100-80gb", "h200"],
                                   "nodes": [0, 1, 2]}],
                        "inter_pool_bandwidth": "200 Gbit/s"},
            "plan": {"tp": [2, 4, 8], "pp": [1, 2, 4], "micro_batch": [1, 2],
                     "recompute": ["none", "full"], "sequence_parallel": True, "zero": 1,
                     **plan},
            "search": {"sampler": "exhaustive"}}


def _cli(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.stderr
    return str(result.stdout)


def _study(tmp_path: Path, data: dict[str, Any]) -> str:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    _cli("search", str(write(tmp_path, data)), "--storage", url, "--json")
    return url


def test_a_pooled_plan_as_a_spec_evaluates_to_the_trials_step_time(tmp_path: Path) -> None:
    url = _study(tmp_path, _pools("pooled"))
    best = json.loads(_cli("best", "pooled", "--storage", url, "--json"))["best"][0]
    fixed = tmp_path / "fixed.yaml"
    fixed.write_text(_cli("plan", "pooled", "--as", "spec", "--storage", url), encoding="utf-8")
    evaluated = json.loads(_cli("evaluate", str(fixed), "--json"))
    assert evaluated["step_time_s"] == pytest.approx(best["step_time_s"], rel=1e-12)
    assert evaluated["plan"] == best["plan"] and evaluated["pools"] == best["pools"]
    assert evaluated["cluster"]["pools"] == best["cluster"]["pools"]


def test_a_pipeline_across_pools_writes_its_uneven_split(tmp_path: Path) -> None:
    url = _study(tmp_path, _pools("piped", placement="pipeline", pp=2))
    best = json.loads(_cli("best", "piped", "--storage", url, "--json"))["best"][0]
    layers = sorted((p for p in best["pools"] if p["role"] == "pipeline"),
                    key=lambda p: p["first_stage"])
    assert len(layers) == 2 and layers[0]["layers"] != layers[1]["layers"]
    text = _cli("plan", "piped", "--as", "megatron", "--storage", url)
    assert set(_megatron_names(text)) <= MEGATRON_FLAGS
    args = text.split()
    last = int(args[args.index("--decoder-last-pipeline-num-layers") + 1])
    assert 0 < last < 32 and last <= layers[1]["layers"]
    assert f"pool {layers[0]['name']}:" in text and "node ranks 0-1 (stage 0)" in text
    nemo = _cli("plan", "piped", "--as", "nemo", "--storage", url)
    names = {line.split(" = ")[0] for line in nemo.splitlines() if not line.startswith("#")}
    assert names <= NEMO_ATTRIBUTES
    assert f"recipe.model.config.num_layers_in_last_pipeline_stage = {last}" in nemo
    tomllib = pytest.importorskip("tomllib")
    par = tomllib.loads(_cli("plan", "piped", "--as", "torchtitan", "--storage", url))[
        "parallelism"]
    assert set(par) <= TORCHTITAN_KEYS["parallelism"]
    per_stage = par["pipeline_parallel_layers_per_stage"]
    assert per_stage - par["pipeline_parallel_last_stage_less_layers"] == last
    assert per_stage + last == 32


def test_a_split_uneven_in_the_middle_is_megatron_cores_layout(tmp_path: Path) -> None:
    """Two H200 stages then two A100 stages at 12, 12, 4, 4 layers: no first- and last-stage
    count states it, and Megatron-LM and NeMo were written with no split at all (an even 8 a
    stage, the A100s given twice the layers the model planned) and a note to 'set this split
    in the model's layer layout'. Megatron Core's pipeline layout states it."""
    data = _pools("piped4", placement="pipeline", pp=4)
    data["cluster"]["pools"][1].update(gpu="h200", nodes=2)
    url = _study(tmp_path, data)
    best = json.loads(_cli("best", "piped4", "--storage", url, "--json"))["best"][0]
    stages = sorted((p for p in best["pools"] if p["role"] == "pipeline"),
                    key=lambda p: p["first_stage"])
    assert [p["stages"] for p in stages] == [2, 2]
    megatron = _cli("plan", "piped4", "--as", "megatron", "--storage", url)
    args = shlex.split(megatron.replace("\\\n", " "), comments=True)
    layout = args[args.index("--pipeline-model-parallel-layout") + 1]
    chunks = layout.split("|")
    assert chunks[0].startswith("E") and chunks[-1].endswith("L")
    split = [int(c.strip("EL").removeprefix("t*")) for c in chunks]
    assert sum(split) == 32 and end_split(split) is None
    assert split[0] == split[1] and split[2] == split[3]  # each pool's stages alike
    for pool, layers in zip(stages, (split[0], split[2]), strict=True):
        assert 0 < layers <= pool["layers"]  # at most the layers the model gave the pool
    assert "--decoder-first-pipeline-num-layers" not in args
    assert set(_megatron_names(megatron)) <= MEGATRON_FLAGS
    assert "layers per stage" not in megatron
    nemo = _cli("plan", "piped4", "--as", "nemo", "--storage", url)
    assert f"recipe.trainer.strategy.pipeline_model_parallel_layout = '{layout}'" in nemo
    assert "layers per stage" not in nemo
    titan = _cli("plan", "piped4", "--as", "torchtitan", "--storage", url)
    assert f"layers per stage {split}" in titan  # torchtitan states no such split


def _part(name: str, role: str, **kw: Any) -> PoolPart:
    fields: dict[str, Any] = {"gpu": "a100-80gb", "nodes": 2, "gpus_per_node": 8,
                              "replicas": 4.0, "stages": 1, "first_stage": 0, "layers": 0,
                              "micro_batches": 8.0, "layer_s": 0.01}
    return PoolPart(name=name, role=role, **{**fields, **kw})


def test_a_split_uneven_in_the_middle_or_uneven_batches_are_notes() -> None:
    parts = (_part("a", "pipeline", stages=2, layers=6, layer_s=0.02),
             _part("b", "pipeline", gpu="h200", stages=2, first_stage=2, layers=12))
    split = stage_layers(parts, 32)
    assert split == [5, 5, 11, 11]  # 36 layers of room, the longest stages give 4 back
    assert end_split(split) is None
    assert any("layers per stage" in n for n in pool_notes(parts, "Megatron-LM", split))
    data = (_part("a", "data", micro_batches=6.0), _part("b", "data", micro_batches=10.0))
    notes = pool_notes(data, "NeMo", None)
    assert any("balanced shares" in n and "a 6, b 10" in n for n in notes)


def test_the_equal_shares_advised_for_a_launch_divide_the_batch() -> None:
    """8 H100 replicas x 62 micro-batches + 4 B200 replicas x 132 (a batch of 1,024 on dp 12):
    the note advised batch_shares: equal, which that dp refuses (dp·micro_batch = 12 does not
    divide global_batch=1024); it says the dp must divide the batch too."""
    data = (_part("h", "data", replicas=8.0, micro_batches=62.0),
            _part("b", "data", gpu="b200", replicas=4.0, micro_batches=132.0))
    note = next(n for n in pool_notes(data, "Megatron-LM", None) if "balanced" in n)
    assert "a dp that divides the batch's 1024 micro-batches (not 12)" in note
    even = (_part("h", "data", replicas=8.0, micro_batches=6.0),
            _part("b", "data", replicas=8.0, micro_batches=10.0))
    note = next(n for n in pool_notes(even, "Megatron-LM", None) if "balanced" in n)
    assert note.endswith("plan with batch_shares: equal to launch as written")


def test_unnamed_pools_give_each_pool_its_own_nodes(tmp_path: Path) -> None:
    """Pools need no name; a used pool beside an idle one, both unnamed, is written with its
    own node count (pools are matched by position: by name, the idle pool's 0 nodes were
    written for the used one)."""
    data = {"name": "unnamed", "model": "llama3-8b",
            "training": {"global_batch": 64, "tokens": 1e11, "precision": "bf16"},
            "cluster": {"pools": [{"gpu": "h100-80gb", "nodes": 2},
                                  {"gpu": "a100-80gb", "nodes": 0}]},
            "plan": {"tp": [2, 4], "pp": 1, "micro_batch": 1, "recompute": "none",
                     "sequence_parallel": True, "zero": 1},
            "search": {"sampler": "exhaustive"}}
    url = _study(tmp_path, data)
    text = _cli("plan", "unnamed", "--as", "megatron", "--storage", url)
    assert "trial 0: 2 x 8 h100-80gb" in text
    assert "torchrun --nnodes 2 --nproc-per-node 8" in text
    assert "# data parallel" in text and "follows from 16 GPUs" in text


def _torchtitan_stages(layers: int, per_stage: int, first_less: int, last_less: int
                       ) -> list[int]:
    """The transformer layers torchtitan v0.2.2 gives each stage of a 1F1B pipeline
    (pipeline_llm: ceil(effective / layers_per_stage) stages; generate_llm_fqn_per_model_part:
    effective // stages each, the first and last less their weights, refused past them)."""
    effective = layers + first_less + last_less
    stages = -(-effective // per_stage)
    each = effective // stages
    assert first_less <= each and last_less <= each and effective % stages == 0
    return [each - first_less, *[each] * (stages - 2), each - last_less]


@pytest.mark.parametrize("split", [[12, 68], [68, 12], [40, 40]])
def test_two_stages_across_pools_state_their_split_in_torchtitan(split: list[int]) -> None:
    """Two stages, the slower pool's first with fewer layers ([12, 68]): torchtitan was given
    no split and a note that its first and last stage 'may only take fewer layers than the
    others', though 68 a stage with the first 56 less states it."""
    from cost import PlanRecord
    from tuner.export import torchtitan

    from .test_plan_export import _launch

    tomllib = pytest.importorskip("tomllib")
    lp = dataclasses.replace(_launch(PlanRecord(tp=8, pp=2, dp=2, micro_batch=1,
                                                sequence_parallel=True)),
                             stage_split=split)
    text = torchtitan.render(lp)
    par = tomllib.loads(text)["parallelism"]
    assert _torchtitan_stages(80, par["pipeline_parallel_layers_per_stage"],
                              par["pipeline_parallel_first_stage_less_layers"],
                              par["pipeline_parallel_last_stage_less_layers"]) == split
    assert "layers per stage" not in text


def test_equal_balanced_shares_that_do_not_divide_the_batch_are_a_note(tmp_path: Path) -> None:
    """Two H100 pools of 8 and 12 replicas (dp 20) share a batch of 256 balanced: 13
    micro-batches a replica in each pool, 4 replicas one fewer. The launch gave every
    framework --global-batch-size 256 on dp 20, which each refuses (256 is not a multiple of
    20), and said nothing because both pools' counts were alike; the note now says so."""
    data = {"name": "twenty", "model": "llama3-8b",
            "training": {"global_batch": 256, "tokens": 1e10, "precision": "bf16"},
            "cluster": {"pools": [{"name": "h", "gpu": "h100-80gb", "nodes": 2},
                                  {"name": "a", "gpu": "h100-80gb", "nodes": 3,
                                   "scale_out_bandwidth": "200 Gbit/s"}]},
            "plan": {"tp": 2, "pp": 1, "micro_batch": 1, "zero": 1, "placement": "data"}}
    url = _study(tmp_path, data)
    pools = json.loads(_cli("best", "twenty", "--storage", url, "--json"))["best"][0]["pools"]
    assert [(p["replicas"], p["micro_batches"]) for p in pools] == [(8, 13), (12, 13)]
    for framework in ("megatron", "nemo", "torchtitan"):
        out = _cli("plan", "twenty", "--as", framework, "--storage", url)
        note = next(line for line in out.splitlines() if "balanced shares" in line)
        assert "h 13, a 13 (4 of the 20 replicas one fewer: 256 in all)" in note, note
        assert "a dp that divides the batch's 256 micro-batches (not 20)" in note, note


def test_one_whole_replica_is_singular() -> None:
    one = (_part("a", "data", replicas=1.0), _part("b", "data", replicas=3.0))
    notes = pool_notes(one, "Megatron-LM", None)
    assert any("(1 whole replica)" in n for n in notes)
    assert any("(3 whole replicas)" in n for n in notes)
