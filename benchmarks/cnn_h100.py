"""CNN training steps measured on one H100 (shared/validation/gpu, h100-cnn-*.jsonl) against
the layers model: step time and peak memory.

    python benchmarks/cnn_h100.py [--fit]

The runs: torchvision's ResNet-50 (v1.5, bf16 autocast, channels-last, SGD with momentum) at
batch 64-256 and a CIFAR-10 ResNet-32 (He et al. sec. 4.2 with 1x1 projection shortcuts, as
measure.py builds it) at batch 128 and 512 in fp32 and bf16, eager and under torch.compile,
on PyTorch 2.11. Models: the catalog's resnet-50-v1.5 and search_spaces.networks.resnet_cifar
(projection=True). A run is launch-bound when its model runs 4x the batch in less than twice
the time (the CIFAR ResNet-32: 13-15 ms at batch 128 and 512): the target is 10% on step time,
20% where launch-bound, and 10% on peak memory (PyTorch's max_memory_allocated).

The H100's layers fraction (0.355, gpus.yaml) is fitted to the three eager ResNet-50 runs
(`--fit` prints the least-squares value); every other run is predicted.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cost import DEFAULT_EFFICIENCY, ClusterSpec, Efficiency, LayersModel, Plan, TrainingSpec
from cost import evaluate as cost_evaluate
from search_spaces import gpu_catalog
from search_spaces.networks import network_catalog, resnet_cifar

RUNS = Path(__file__).resolve().parents[2] / "shared" / "validation" / "gpu"
PRECISION = {"float32": "fp32", "bfloat16": "bf16"}


def networks() -> dict[str, LayersModel]:
    return {"resnet-50": network_catalog()["resnet-50-v1.5"],
            "resnet-32": resnet_cifar("resnet-32", 32, projection=True)}


def read(folder: Path = RUNS) -> list[dict[str, Any]]:
    """The measured runs, each with `file` (eager or compiled)."""
    out = []
    for kind in ("eager", "compiled"):
        with (folder / f"h100-cnn-{kind}.jsonl").open(encoding="utf-8") as f:
            out += [{**json.loads(line), "file": kind} for line in f if line.strip()]
    return out


def launch_bound(run: dict[str, Any], runs: list[dict[str, Any]]) -> bool:
    """The run's model takes less than twice the time at 4x the batch (same file and
    precision): the host, not the device, sets its pace."""
    same = [r for r in runs if r["model"] == run["model"] and r["file"] == run["file"]
            and r["precision"] == run["precision"]]
    small, large = min(same, key=lambda r: r["micro_batch"]), max(same,
                                                                    key=lambda r: r["micro_batch"])
    return large["micro_batch"] >= 4 * small["micro_batch"] and \
        large["step_s"] < 2 * small["step_s"]


def predict(run: dict[str, Any], eff: Efficiency = DEFAULT_EFFICIENCY) -> tuple[float, float]:
    """(step seconds, peak bytes) of one run on one H100, with the stack the run declares
    (`stack.kernels`: eager, or compiled for torch.compile)."""
    cluster = ClusterSpec.of(gpu_catalog()["h100-80gb"], nodes=1, gpus_per_node=1,
                             scale_up_domain_gpus=1)
    training = TrainingSpec(global_batch=run["global_batch"],
                            precision=PRECISION[run["precision"]])
    stack = eff.with_(kernels="compiled" if run["compiled"] else "eager")
    report = cost_evaluate(networks()[run["model"]], cluster, training,
                           Plan(micro_batch=run["micro_batch"]), efficiency=stack)
    return float(report.step_time_s), float(report.memory.total_bytes)


def rows(runs: list[dict[str, Any]], eff: Efficiency = DEFAULT_EFFICIENCY
         ) -> list[dict[str, Any]]:
    out = []
    for run in runs:
        step, memory = predict(run, eff)
        out.append({**run, "predicted_step_s": step, "predicted_peak_gib": memory / 2**30,
                    "step_error": step / run["step_s"] - 1.0,
                    "memory_error": memory / 2**30 / run["peak_allocated_gib"] - 1.0,
                    "launch_bound": launch_bound(run, runs)})
    return out


def fit_fraction(runs: list[dict[str, Any]]) -> float:
    """The H100 layers fraction minimising the squared log error of the eager ResNet-50 runs."""
    chosen = [r for r in runs if r["model"] == "resnet-50" and r["file"] == "eager"]

    def loss(x: float) -> float:
        eff = DEFAULT_EFFICIENCY.with_(layers_fraction_by_gpu=(("h100-80gb", x),))
        return sum(math.log(predict(r, eff)[0] / r["step_s"]) ** 2 for r in chosen)

    return min((x / 1000 for x in range(200, 801, 5)), key=loss)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--fit", action="store_true")
    parser.add_argument("--runs", type=Path, default=RUNS)
    args = parser.parse_args(argv)
    runs = read(args.runs)
    if args.fit:
        print(f"H100 layers fraction fitted to the eager ResNet-50 runs: {fit_fraction(runs)}")
    print(f"{'run':<44} {'step ms':>8} {'model':>7} {'error':>7} {'peak GiB':>9} {'model':>7} "
          f"{'error':>7}")
    worst_step = worst_memory = 0.0
    for r in rows(runs):
        name = (f"{r['file']} {r['model']} {PRECISION[r['precision']]} b{r['micro_batch']}"
                + (" (launch-bound)" if r["launch_bound"] else ""))
        print(f"{name:<44} {1e3 * r['step_s']:8.1f} {1e3 * r['predicted_step_s']:7.1f} "
              f"{100 * r['step_error']:+6.1f}% {r['peak_allocated_gib']:9.2f} "
              f"{r['predicted_peak_gib']:7.2f} {100 * r['memory_error']:+6.1f}%")
        worst_step = max(worst_step, abs(r["step_error"]))
        worst_memory = max(worst_memory, abs(r["memory_error"]))
    print(f"largest step error {100 * worst_step:.1f}%, largest memory error "
          f"{100 * worst_memory:.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
