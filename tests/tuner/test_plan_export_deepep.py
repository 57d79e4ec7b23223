"""DeepEP where it runs (cost.deepep, from DeepEP v1.2.1's README: SM80 inside an NVLink
domain, SM90 and newer across domains): the exports write NCCL's all-to-all with a note
elsewhere, the cost model deduplicates a token's crossings only where DeepEP's internode
dispatch runs, and a spec that states ep_dedup on a GPU without it is refused."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cost import DEFAULT_EFFICIENCY, ClusterSpec, Plan, TrainingSpec
from cost.degrees import degrees
from cost.moe_time import dispatch_bytes
from search_spaces import SpecError, gpu_catalog, model_catalog, parse_spec
from tuner.cli import main
from tuner.export import megatron, nemo, torchtitan

from .specs import write
from .test_plan_export import MoEPlan, _launch

_CC = {"a100-80gb": 8.0, "v100-32gb": 7.0, "h100-80gb": 9.0}


def _on(gpu: str, ep: int, *, dedup: bool = True) -> Any:
    plan = MoEPlan(tp=1, pp=1, dp=32, ep=ep, micro_batch=1)
    return dataclasses.replace(_launch(plan, model="mixtral-8x7b"), ep_dedup=dedup,
                               gpu_name=gpu, compute_capability=_CC[gpu], scale_up_domain=8)


def _dispatch(lp: Any) -> tuple[str, bool, str]:
    items, _ = megatron.flags(lp)
    values = dict(nemo.assignments(lp)[0])
    backend = torchtitan.render(lp).split("expert_parallel_comm_backend = ")[1].split()[0]
    return (items[items.index("--moe-token-dispatcher-type") + 1],
            values["recipe.model.config.moe_enable_deepep"], backend.strip('"'))


@pytest.mark.parametrize(("gpu", "ep", "runs"), [
    ("h100-80gb", 32, True), ("h100-80gb", 8, True),
    ("a100-80gb", 8, True),  # DeepEP's NVLink kernels run on SM80
    ("a100-80gb", 16, False),  # its internode kernels need SM90
    ("v100-32gb", 8, False)])  # nothing below SM80
def test_deepep_is_written_only_where_it_runs(gpu: str, ep: int, runs: bool) -> None:
    lp = _on(gpu, ep)
    assert _dispatch(lp) == (("flex", True, "deepep") if runs
                             else ("alltoall", False, "standard"))
    for notes in (megatron.flags(lp)[1], nemo.assignments(lp)[1]):
        assert any("NCCL's all-to-all is set instead of DeepEP" in n for n in notes) is not runs
    assert ("# note: token dispatch:" in torchtitan.render(lp)) is not runs
    if not runs:
        assert "--moe-enable-deepep" not in megatron.render(lp)


def test_a_stack_without_deepep_has_no_note() -> None:
    lp = _on("a100-80gb", 16, dedup=False)
    assert _dispatch(lp) == ("alltoall", False, "standard")
    assert not any("token dispatch" in n for n in megatron.flags(lp)[1])


def _bytes(gpu: str, *, dedup: bool) -> float:
    """Bytes one rank sends over the NIC per token, ep 32 over four 8-GPU domains."""
    cluster = ClusterSpec.of(gpu_catalog()[gpu], nodes=4)
    model = model_catalog()["mixtral-8x7b"]
    d = degrees(cluster, TrainingSpec(global_batch=64), Plan(tp=1, pp=1, ep=32))
    sent = dispatch_bytes(model, cluster, d, tokens=1.0, act_bytes=2.0,  # type: ignore[arg-type]
                          eff=DEFAULT_EFFICIENCY.with_(ep_dedup=dedup))
    return float(sent.remote_bytes)


def test_the_cost_model_deduplicates_only_where_deepep_runs_internode() -> None:
    """DeepEP's default (ep_dedup) saves NIC bytes on H100; on A100, whose DeepEP runs inside
    a node only, the token's copies cross as NCCL's all-to-all sends them."""
    assert _bytes("h100-80gb", dedup=True) < _bytes("h100-80gb", dedup=False)
    assert _bytes("a100-80gb", dedup=True) == _bytes("a100-80gb", dedup=False)


def _spec(gpu: Any, *, stack: dict[str, Any] | None = None, model: str = "mixtral-8x7b"
          ) -> dict[str, Any]:
    return {"model": model, "training": {"global_batch": 64},
            "cluster": {"gpu": gpu, "nodes": 4}, "plan": {"tp": 1, "pp": 1},
            **({"stack": stack} if stack else {})}


@pytest.mark.parametrize("gpu", ["a100-80gb", ["h100-80gb", "v100-32gb"],
                                 {"base": "a100-40gb", "name": "mine"}])
def test_ep_dedup_on_a_gpu_without_deepep_internode_is_refused(gpu: Any) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec(_spec(gpu, stack={"ep_dedup": True}), file="s.yaml")
    line = str(err.value)
    assert line.startswith("s.yaml: stack.ep_dedup:") and "SM90" in line
    assert len(line.splitlines()) == 1


def test_ep_dedup_is_accepted_where_it_runs_or_says_nothing() -> None:
    parse_spec(_spec("h100-80gb", stack={"ep_dedup": True}))
    parse_spec(_spec("a100-80gb"))  # the default: no deduplication counted there
    parse_spec(_spec("a100-80gb", stack={"ep_dedup": False}))
    parse_spec(_spec("a100-80gb", stack={"ep_dedup": True}, model="llama3-8b"))  # no experts


def test_a_study_on_a100_launches_nccl_all_to_alls(tmp_path: Path) -> None:
    """End to end: a mixture of experts over two A100 nodes, ep 16: the plan's GPU reaches the
    export, which writes the alltoall dispatcher with its note."""
    spec = {"name": "a100-moe", "training": {"global_batch": 64, "precision": "bf16"},
            "model": {"name": "small-moe", "layers": 4, "hidden": 512, "heads": 8, "vocab": 1000,
                      "seq_len": 512, "gated_mlp": True, "experts": 16, "top_k": 2,
                      "expert_ffn_hidden": 256},
            "cluster": {"gpu": "a100-80gb", "nodes": 2, "gpus_per_node": 8},
            "plan": {"tp": 1, "ep": 16, "micro_batch": 1}}
    storage = f"sqlite:///{tmp_path / 'studies.db'}"
    runner = CliRunner()
    done = runner.invoke(main, ["search", str(write(tmp_path, spec)), "--storage", storage,
                                "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout)["best"][0]["plan"]["ep"] == 16
    text = runner.invoke(main, ["plan", "a100-moe", "--as", "megatron", "--storage",
                                storage]).output
    assert "--moe-token-dispatcher-type alltoall" in text
    assert "# note: token dispatch: DeepEP runs inside an NVLink domain only on a100-80gb" \
        in text


def test_experts_on_one_rank_are_not_dispatched_by_deepep() -> None:
    """ep = etp = 1: Megatron Core's flex dispatcher asserts 'Flex token dispatcher requires
    TPxEP > 1' (token_dispatcher.py, its tp the expert tensor-parallel group), so Megatron-LM
    and NeMo refused the flex dispatcher the exports wrote for such a plan at start-up."""
    lp = _on("h100-80gb", 1)
    items = megatron.flags(lp)[0]
    assert items[items.index("--moe-token-dispatcher-type") + 1] == "alltoall"
    assert "--moe-enable-deepep" not in megatron.render(lp)
    values = dict(nemo.assignments(lp)[0])
    assert values["recipe.model.config.moe_token_dispatcher_type"] == "alltoall"
    assert values["recipe.model.config.moe_enable_deepep"] is False
    assert _dispatch(_on("h100-80gb", 2)) == ("flex", True, "deepep")
    etp2 = dataclasses.replace(lp, plan=MoEPlan(tp=2, pp=1, dp=16, ep=1, etp=2, micro_batch=1,
                                                sequence_parallel=True))
    assert "--moe-enable-deepep" in megatron.render(etp2)
