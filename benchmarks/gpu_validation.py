"""The cost model against training steps measured on one GPU (../shared/validation/gpu/).

Each JSON line of h100-eager.jsonl and h100-compiled.jsonl is one decoder-only transformer
trained in plain PyTorch (measure.py there: bf16 autocast over fp32 weights, fused AdamW,
flash attention through scaled_dot_product_attention, full recompute through
torch.utils.checkpoint, eager or torch.compile). Each becomes the spec a user would write for
it: the model, one H100, the plan, and a `stack` saying what that software does (fp32 weights
under autocast, eager or compiled kernels). Printed per run: measured and predicted step time,
measured (allocated) and predicted peak memory, and whether the model agrees that it fit.

    python benchmarks/gpu_validation.py [--folder PATH] [--json] [--pairs]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import cost  # noqa: E402
from search_spaces import parse_spec  # noqa: E402

DEFAULT_FOLDER = ROOT.parent / "shared" / "validation" / "gpu"
FILES = ("h100-eager.jsonl", "h100-compiled.jsonl")
MODELS = {  # measure.py MODELS: layers, hidden, heads, kv_heads, ffn, vocab, gated
    "gpt-350m": (24, 1024, 16, 16, 4096, 51200, False),
    "gpt-760m": (24, 1536, 16, 16, 6144, 51200, False),
    "gpt-1.3b": (24, 2048, 16, 16, 8192, 51200, False),
    "gpt-2.7b": (32, 2560, 32, 32, 10240, 51200, False),
    "llama-1b": (16, 2048, 32, 8, 8192, 128256, True),
    "llama-3b": (28, 3072, 24, 8, 8192, 128256, True),
}
STACK = {"params": "fp32", "autocast": True, "main_grads": "fp32", "tp_overlap": 0.0}
"""What measure.py's PyTorch does: fp32 weights under bf16 autocast (their own master
copy), fp32 gradients, no Transformer Engine (no TP overlap: one GPU has none anyway)."""
COMPILED = {"kernels": "compiled", "cross_entropy": "compiled"}
"""measure.py's --compile: torch.compile(model), whose forward returns the loss, so the
cross-entropy is compiled with the layers."""
_GIB = float(2**30)


def run_spec(run: dict[str, Any]) -> dict[str, Any]:
    """The spec of one measured run."""
    layers, hidden, heads, kv, ffn, vocab, gated = MODELS[run["model"]]
    return {
        "name": f"{run['model']}-mb{run['micro_batch']}-{run['recompute']}",
        "model": {"name": run["model"], "layers": layers, "hidden": hidden, "heads": heads,
                  "kv_heads": kv, "ffn_hidden": ffn, "vocab": vocab, "seq_len": run["seq"],
                  "gated_mlp": gated, "dropout": False},
        "training": {"global_batch": run["global_batch"], "precision": "bf16"},
        "cluster": {"gpu": "h100-80gb", "nodes": 1, "gpus_per_node": 1},
        "plan": {"micro_batch": run["micro_batch"], "recompute": run["recompute"]},
        "stack": {**STACK, **(COMPILED if run["compiled"] else {"kernels": "eager"})},
    }


def predict(run: dict[str, Any]) -> dict[str, Any]:
    """Measured and predicted step time and peak memory of one run."""
    spec = parse_spec(run_spec(run))
    inputs = spec.to_cost_inputs()
    result = cost.plan_result(*inputs, cost.evaluate(*inputs, efficiency=spec.efficiency()))
    measured = run.get("step_s") or math.nan
    return {"run": spec.name, "compiled": run["compiled"], "micro_batch": run["micro_batch"],
            "measured_s": measured, "predicted_s": result.step_time_s,
            "error": result.step_time_s / measured - 1.0 if run.get("step_s") else math.nan,
            "measured_gib": run["peak_allocated_gib"],
            "predicted_gib": result.memory_total_bytes / _GIB,
            "fit": not run.get("oom"), "predicted_fit": result.feasible}


def load(folder: Path) -> list[dict[str, Any]]:
    runs = []
    for name in FILES:
        path = folder / name
        runs += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return runs


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    timed = [r for r in rows if r["fit"]]
    large = [r for r in timed if r["micro_batch"] >= 4]
    memory = [abs(r["predicted_gib"] / r["measured_gib"] - 1.0) for r in timed]
    return {
        "runs": len(rows), "timed": len(timed),
        "mean_abs_error": sum(abs(r["error"]) for r in timed) / len(timed),
        "max_abs_error": max(abs(r["error"]) for r in timed),
        "max_abs_error_mb4": max((abs(r["error"]) for r in large), default=0.0),
        "memory_mean_abs_error": sum(memory) / len(memory),
        "memory_max_abs_error": max(memory),
        "feasibility_disagreements": [r["run"] for r in rows if r["fit"] != r["predicted_fit"]],
    }


def pairs(runs: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Differences between two measured runs of one model, beside the model's own: eager less
    compiled at micro-batch 4 without recompute (what the compiled kernels and loss save), and
    micro-batch 4 less micro-batch 8 over the two extra micro-batches (what one micro-batch
    costs beside its tokens). Each difference isolates terms the step time mixes."""
    timed = {(r["model"], r["micro_batch"], r["recompute"], r["compiled"]): (r, p)
             for r, p in zip(runs, rows, strict=True) if r.get("step_s")}
    out = []
    for (model, mb, recompute, compiled), (run, row) in sorted(timed.items()):
        if mb == 4 and recompute == "none" and not compiled and (model, 4, "none", True) in timed:
            other, other_row = timed[(model, 4, "none", True)]
            out.append({"model": model, "pair": "eager - compiled, mb4",
                        "measured_s": run["step_s"] - other["step_s"],
                        "predicted_s": row["predicted_s"] - other_row["predicted_s"]})
        if mb == 4 and not compiled and (model, 8, recompute, False) in timed:
            other, other_row = timed[(model, 8, recompute, False)]
            out.append({"model": model, "pair": f"(mb4 - mb8) / 2, {recompute}",
                        "measured_s": (run["step_s"] - other["step_s"]) / 2.0,
                        "predicted_s": (row["predicted_s"] - other_row["predicted_s"]) / 2.0})
    return out


def _print_pairs(found: list[dict[str, Any]]) -> None:
    print(f"{'model':<10} {'pair':<28} {'measured s':>10} {'predicted':>9}")
    for p in found:
        print(f"{p['model']:<10} {p['pair']:<28} {p['measured_s']:>10.4f} "
              f"{p['predicted_s']:>9.4f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--folder", type=Path, default=DEFAULT_FOLDER)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--pairs", action="store_true",
                        help="print measured and predicted differences between paired runs")
    args = parser.parse_args(argv)
    runs = load(args.folder)
    rows = [predict(r) for r in runs]
    if args.pairs:
        _print_pairs(pairs(runs, rows))
        return 0
    s = summary(rows)
    if args.json:
        print(json.dumps({"summary": s, "runs": rows}, indent=1))
        return 0
    print(f"{'run':<24} {'compiled':>8} {'measured s':>10} {'predicted':>9} {'error':>7} "
          f"{'meas GiB':>8} {'pred GiB':>8} {'fits':>5} {'pred':>5}")
    for r in rows:
        err = f"{100 * r['error']:+6.1f}%" if math.isfinite(r["error"]) else "    -  "
        print(f"{r['run']:<24} {r['compiled']!s:>8} {r['measured_s']:>10.4f} "
              f"{r['predicted_s']:>9.4f} {err:>7} {r['measured_gib']:>8.1f} "
              f"{r['predicted_gib']:>8.1f} {r['fit']!s:>5} {r['predicted_fit']!s:>5}")
    print()
    print(f"step time: mean absolute error {100 * s['mean_abs_error']:.1f}%, largest "
          f"{100 * s['max_abs_error']:.1f}% ({100 * s['max_abs_error_mb4']:.1f}% with "
          f"micro-batch >= 4), {s['timed']} runs; peak memory: mean absolute error "
          f"{100 * s['memory_mean_abs_error']:.1f}%, largest "
          f"{100 * s['memory_max_abs_error']:.1f}%; feasibility disagrees on "
          f"{len(s['feasibility_disagreements'])} of {s['runs']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
