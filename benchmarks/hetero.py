"""Published runs on clusters of several GPU types, predicted by the model and never fitted on.

    python benchmarks/hetero.py

benchmarks/hetero_runs.csv holds the heterogeneous runs the research for issue 17 found, each
with its source and whether and how it is used here (most publish ratios against other
planners only). Two are usable beyond the ICAC'19 CNN mixes of benchmarks/cmdare.py:

- Sailor (Strati et al., SOSP'25, Fig. 1 c3): OPT-350M on 16 A100-40GB plus 16 V100-16GB in
  one Google Cloud zone trains 1.15x as fast as on the 16 A100 alone. The model's best plan
  on each cluster (exhaustive over tp, pp, micro-batch, recompute, ZeRO and placement) gives
  its speed-up. The batch is not stated for Fig. 1; Sailor's evaluation uses 2048 sequences of
  2048 tokens. Networks: a2-highgpu-8g (8 A100, 100 Gbit/s) and n1 VMs of 4 V100
  (32 Gbit/s), fp16 (V100 has no bf16).
- AMP (Li et al., NeurIPS'22): GPT-2 medium (24 layers, batch 32) on 3 AWS p3.8xlarge (4 V100,
  NVLink, 10 Gbit/s) and one g4dn.12xlarge (4 T4, 50 Gbit/s): the best measured plan is
  dp 2, pp 8, micro-batch 1 (1.28 s a step), stages across both node types, on Megatron-LM
  1.1.5's software. The model evaluates that layout and searches its own; the one found must
  be no worse under the model.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cost import PlanResult
from search_spaces import Space, parse_spec
from tuner.engine.evaluation import result_of
from tuner.engine.exhaustive import sweep

OPT_350M = {"name": "opt-350m", "layers": 24, "hidden": 1024, "heads": 16, "vocab": 50272,
            "seq_len": 2048}
GPT2_MEDIUM = {"name": "gpt2-medium", "layers": 24, "hidden": 1024, "heads": 16,
               "vocab": 52256, "seq_len": 1024}
SAILOR_PLAN = {"tp": [1, 2, 4, 8], "pp": [1, 2, 4, 8], "micro_batch": [1, 2, 4, 8],
               "recompute": ["none", "selective", "full"], "zero": [0, 1]}


def best(data: dict[str, Any]) -> PlanResult:
    """The fastest feasible plan of a spec (exhaustive)."""
    space = Space.from_spec(parse_spec(data, name=data["name"]))
    summary = sweep(space)
    return result_of(space, summary.best[0][0])


def sailor(v100_nodes: int) -> dict[str, Any]:
    pools = [{"name": "a100", "gpu": "a100-40gb", "nodes": 2, "gpus_per_node": 8,
              "scale_out_bandwidth": "12.5 Gbit/s"},
             {"name": "v100", "gpu": "v100-16gb", "nodes": v100_nodes, "gpus_per_node": 4,
              "scale_out_bandwidth": "8 Gbit/s"}]
    return {"name": f"sailor-c3-{v100_nodes}", "model": OPT_350M,
            "training": {"global_batch": 2048, "precision": "fp16"},
            "cluster": {"pools": pools}, "plan": SAILOR_PLAN, "objective": "throughput"}


def amp(plan: dict[str, Any]) -> dict[str, Any]:
    pools = [{"name": "p3.8xlarge", "gpu": "v100-16gb", "nodes": 3, "gpus_per_node": 4,
              "scale_out_bandwidth": "2.5 Gbit/s"},
             {"name": "g4dn.12xlarge", "gpu": "t4", "nodes": 1, "gpus_per_node": 4,
              "scale_out_bandwidth": "12.5 Gbit/s"}]
    return {"name": "amp", "model": GPT2_MEDIUM,
            "training": {"global_batch": 32, "precision": "fp16"},
            "cluster": {"pools": pools, "inter_pool_bandwidth": "2.5 Gbit/s"}, "plan": plan,
            "stack": AMP_STACK}


AMP_STACK = {"flash_attention": False, "dp_overlap": 0.0, "tp_overlap": 0.0}
"""AMP ran Megatron-LM 1.1.5 (2020) under DeepSpeed: unfused attention, gradients reduced after
the backward pass, no tensor-parallel overlap (as benchmarks/sources.yaml models that era)."""


AMP_PUBLISHED = {"tp": 1, "pp": 8, "micro_batch": 1, "placement": "pipeline"}
AMP_SPACE = {"tp": [1, 2, 4], "pp": [1, 2, 4, 8], "micro_batch": [1, 2, 4, 8],
             "recompute": ["none", "full"], "zero": [0, 1]}


def main() -> int:
    mixed, alone = best(sailor(4)), best(sailor(0))
    speedup = mixed.tokens_per_s / alone.tokens_per_s
    print("Sailor Fig. 1 c3: OPT-350M, 16 A100-40GB + 16 V100-16GB vs 16 A100-40GB")
    print(f"  best on the mix     {mixed.tokens_per_s:10,.0f} tokens/s  "
          f"{_plan(mixed)}")
    print(f"  best on the A100    {alone.tokens_per_s:10,.0f} tokens/s  {_plan(alone)}")
    print(f"  speed-up: predicted {speedup:.2f}, published 1.15 "
          f"({100 * (speedup / 1.15 - 1):+.1f}%)")
    published = best(amp(AMP_PUBLISHED))
    found = best(amp(AMP_SPACE))
    print("AMP: GPT-2 medium on 12 V100 (3 p3.8xlarge) + 4 T4 (g4dn.12xlarge), batch 32")
    print(f"  published layout    {published.step_time_s:6.3f} s predicted (1.28 s measured) "
          f"{_plan(published)}")
    print(f"  layout found        {found.step_time_s:6.3f} s predicted "
          f"{_plan(found)}")
    print(f"  found / published   {found.step_time_s / published.step_time_s:.3f} "
          "(<= 1: no worse)")
    fp32 = amp(AMP_PUBLISHED)
    fp32["training"] = {**fp32["training"], "precision": "fp32"}
    print(f"  the published layout in fp32 (AMP's logs do not state the precision): "
          f"{best(fp32).step_time_s:.3f} s predicted")
    return 0


def _plan(result: PlanResult) -> str:
    p = result.plan
    roles = ", ".join(f"{u['name']}: {u['role']}" for u in result.pools)
    return (f"tp={p.tp} pp={p.pp} dp={p.dp} mb={p.micro_batch} recompute={p.recompute.value} "
            f"zero={p.zero} placement={p.placement.value} [{roles}]")


if __name__ == "__main__":
    raise SystemExit(main())
