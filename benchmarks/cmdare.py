"""CM-DARE's cloud CNN training on our model: calibrate on half the measured runs of one
workload, predict the other half; then predict the mixed K80/P100/V100 clusters of ICAC'19,
which nothing is fitted on.

    python benchmarks/cmdare.py [--seed 0] [--holdout 0.5]
    python benchmarks/cmdare.py --server-defaults

Runs (benchmarks/cmdare_runs.csv, transcribed from the CM-DARE and ICAC'19 artifacts, source
and conversion in each row): TensorFlow 1.10 asynchronous parameter servers on Google Cloud,
one GPU per VM, 128 images per worker step; Tensor2Tensor's CIFAR ResNet-32 (catalog
resnet-32-t2t) on 1-8 K80, P100 or V100 workers with 1 or 2 servers (63 runs), ResNet-15
(27 runs), and three clusters mixing V100, P100 and K80 workers with one server.

Networks are not stated in the artifacts; the specs use Google Cloud's egress cap of 2 Gbit/s
per vCPU: 8 Gbit/s for the 4-vCPU K80 workers and the servers, 16 Gbit/s for the 8-vCPU
P100/V100 workers (cloud.google.com/compute/docs/network-bandwidth).

Default mode: `tuner calibrate`'s fit (each GPU's layers fraction, the per-step overhead, the
servers' rate and per-update time) on a seeded half of the ResNet-32 runs, the error on the
other half; then the profile fitted on every single-type ResNet-32 run predicts the ICAC
mixes and each mix's homogeneous parts, and the speed-up of the mix over its fastest part is
compared with the measured one (the parts measured in the same artifacts).
`--server-defaults` fits on the ResNet-15 runs instead: the shipped defaults of ps_update_s
and ps_bytes_per_s (cost.efficiency).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from cost import DEFAULT_EFFICIENCY, Efficiency, evaluate
from search_spaces import Space, parse_spec
from tuner.engine.calibrate import Measurement, errors, fit, measurement, split, summary

RUNS = Path(__file__).with_name("cmdare_runs.csv")
GPUS = {"k80": ("k80", "8 Gbit/s"), "p100": ("p100", "16 Gbit/s"),
        "v100": ("v100-16gb", "16 Gbit/s")}
"""CSV column prefix -> catalog GPU and the worker VM's egress (2 Gbit/s per vCPU)."""
SERVER_BANDWIDTH = "8 Gbit/s"
MIXES = {"icac_mixed_2v1p1k": ("icac_ps_1ps2v", "icac_p100_1w_spot", "icac_k80_ondemand_1w"),
         "icac_mixed_1v2p1k": ("icac_v100_1w_spot", "cmdare_size_res32_p100_2w_1ps",
                               "icac_k80_ondemand_1w"),
         "icac_mixed_1v1p2k": ("icac_v100_1w_spot", "icac_p100_1w_spot",
                               "icac_k80_ondemand_2w")}
"""Each ICAC mix and the measured runs of its homogeneous parts (V100s, P100s, K80s alone
with one server), as hetero.csv of the research notes pairs them."""


def read_runs() -> list[dict[str, str]]:
    with RUNS.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def workers(row: dict[str, str]) -> dict[str, int]:
    return {g: int(row[f"{g}_workers"]) for g in GPUS if int(row[f"{g}_workers"]) > 0}


def spec_data(row: dict[str, str], counts: dict[str, int] | None = None) -> dict[str, Any]:
    """The spec of a run (or of `counts` workers with the run's model and servers): one GPU
    per VM, 128 images per worker step, asynchronous parameter servers."""
    counts = counts or workers(row)
    batch = int(row["batch_per_worker"])
    pools = [{"name": g, "gpu": GPUS[g][0], "nodes": n, "gpus_per_node": 1,
              "scale_out_bandwidth": GPUS[g][1]} for g, n in counts.items()]
    cluster: dict[str, Any] = ({"pools": pools} if len(pools) > 1 else
                               {k: v for k, v in pools[0].items() if k != "name"})
    cluster["parameter_server_bandwidth"] = SERVER_BANDWIDTH
    return {"name": row["case"], "model": row["model"],
            "training": {"global_batch": batch * sum(counts.values()), "precision": "fp32"},
            "cluster": cluster,
            "plan": {"micro_batch": batch, "sync": "parameter_server",
                     "parameter_servers": int(row["parameter_servers"])}}


def measured(row: dict[str, str]) -> Measurement:
    """A run as `tuner calibrate` reads one: its spec and its step time (every worker's step
    once: workers x 128 images over the measured images/s)."""
    data = spec_data(row)
    seconds = data["training"]["global_batch"] / float(row["measured_images_per_s"])
    return measurement(Space.from_spec(parse_spec(data, name=row["case"])), seconds)


def images_per_s(data: dict[str, Any], eff: Efficiency) -> float:
    spec = parse_spec(data, name=data["name"])
    return float(evaluate(*spec.to_cost_inputs(), efficiency=spec.stack.apply(eff))
                 .tokens_per_s)


def homogeneous(rows: list[dict[str, str]], model: str, limit: int = 0
                ) -> list[dict[str, str]]:
    """The single-type runs of `model` (every `len // limit`-th of them with `limit`)."""
    out = [r for r in rows if r["model"] == model and len(workers(r)) == 1]
    return out[::max(1, len(out) // limit)][:limit] if limit else out


def calibration(rows: list[dict[str, str]], *, holdout: float, seed: int, limit: int = 0
                ) -> tuple[Efficiency, dict[str, Any]]:
    """Fit on one part of the ResNet-32 runs, the error on the other."""
    runs = [measured(r) for r in homogeneous(rows, "resnet-32-t2t", limit)]
    train, held = split(runs, holdout, seed)
    fitted = fit(train, DEFAULT_EFFICIENCY)
    report = {name: {"before": summary(errors(part, DEFAULT_EFFICIENCY)),
                     "after": summary(errors(part, fitted))}
              for name, part in (("fit", train), ("held_out", held))}
    return fitted, report


def mixes(rows: list[dict[str, str]], eff: Efficiency) -> list[dict[str, Any]]:
    """Each ICAC mix: measured and predicted images/s of the mix and of its parts, and the
    speed-up of the mix over its fastest part."""
    by_case = {r["case"]: r for r in rows}
    out = []
    for case, parts in MIXES.items():
        row = by_case[case]
        measured_parts = [float(by_case[p]["measured_images_per_s"]) for p in parts]
        predicted_parts = [images_per_s(spec_data(row, {g: n}), eff)
                           for g, n in workers(row).items()]
        mixed = images_per_s(spec_data(row), eff)
        out.append({
            "case": case, "measured": float(row["measured_images_per_s"]), "predicted": mixed,
            "measured_speedup": float(row["measured_images_per_s"]) / max(measured_parts),
            "predicted_speedup": mixed / max(predicted_parts),
            "measured_parts": measured_parts, "predicted_parts": predicted_parts})
    return out


def _line(name: str, part: dict[str, Any]) -> str:
    b, a = part["before"], part["after"]
    return (f"  {name:<9} {b['rows']:>3} runs: mean |error| {100 * b['mean_abs_error']:5.1f}% -> "
            f"{100 * a['mean_abs_error']:4.1f}%, largest {100 * b['max_abs_error']:5.1f}% -> "
            f"{100 * a['max_abs_error']:4.1f}%")


def _profile(eff: Efficiency) -> str:
    fractions = ", ".join(f"{g} {f:.3g}" for g, f in eff.layers_fraction_by_gpu)
    return (f"  layers fraction {fractions}; step overhead {1e3 * eff.step_overhead_s:.1f} ms; "
            f"server {eff.ps_bytes_per_s / 1e9:.2f} GB/s, {1e3 * eff.ps_update_s:.2f} ms/update")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--holdout", type=float, default=0.5)
    parser.add_argument("--server-defaults", action="store_true")
    parser.add_argument("--limit", type=int, default=0,
                        help="use this many of the runs (a quick check)")
    args = parser.parse_args(argv)
    rows = read_runs()
    if args.server_defaults:
        fitted = fit([measured(r) for r in homogeneous(rows, "resnet-15-t2t")],
                     DEFAULT_EFFICIENCY)
        print("ResNet-15, all 27 runs fitted:")
        print(_profile(fitted))
        return 0
    fitted, report = calibration(rows, holdout=args.holdout, seed=args.seed, limit=args.limit)
    print(f"ResNet-32 (CM-DARE, ICAC'19), seed {args.seed}: calibrated on one half, "
          "predicting the other")
    print(_line("fit", report["fit"]))
    print(_line("held out", report["held_out"]))
    print(_profile(fitted))
    runs = homogeneous(rows, "resnet-32-t2t", args.limit)
    every = fit([measured(r) for r in runs], DEFAULT_EFFICIENCY)
    print(f"\nICAC'19 mixed clusters (never fitted), profile fitted on all {len(runs)} "
          "single-type runs:")
    print(f"  {'mix':<18} {'measured':>9} {'predicted':>9} {'speed-up measured':>18} "
          f"{'predicted':>9} {'error':>7}")
    for m in mixes(rows, every):
        error = m["predicted_speedup"] / m["measured_speedup"] - 1.0
        print(f"  {m['case'][11:]:<18} {m['measured']:9.0f} {m['predicted']:9.0f} "
              f"{m['measured_speedup']:18.2f} {m['predicted_speedup']:9.2f} {100 * error:+6.1f}%")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
