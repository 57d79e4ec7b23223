"""`tuner calibrate` on the published runs of shared/validation: fit on one half, report the
error on the other.

    python benchmarks/calibration.py [--cases PATH] [--seed 0] [--holdout 0.5]

Each case becomes a spec and a row of a measurements CSV in a temporary folder: its blank plan
fields as choices (the prediction is the fastest plan that fits, as the validation README
says), or filled as the sources state them (benchmarks/sources.yaml), each on its own software
(sources.yaml `stack`, a spec's `stack` section). Then the same code as `tuner calibrate` fits
a profile on half of the rows, starting either from an uncalibrated model (every GPU at the
fallback GEMM fraction, as for a GPU the catalog has not calibrated: the situation of a user
with a new cluster) or from the shipped catalog, and reports the error before and after on
both halves.
"""

from __future__ import annotations

import argparse
import csv
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.cases import case_spec, stated  # noqa: E402
from cost import DEFAULT_EFFICIENCY, FALLBACK_GEMM_FRACTION, Efficiency  # noqa: E402
from tuner.engine.calibrate import (  # noqa: E402
    Measurement,
    errors,
    fit,
    read_measurements,
    split,
    summary,
)

DEFAULT_CASES = ROOT.parent / "shared" / "validation" / "cases.csv"


def write_measurements(cases: Path, folder: Path, *, as_stated: bool) -> Path:
    with cases.open(newline="") as f:
        rows = [stated(r) if as_stated else r for r in csv.DictReader(f)]
    out = folder / "measurements.csv"
    with out.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["spec", "measured_step_time_s"])
        for row in rows:
            name = f"case-{row['case']}.yaml"
            (folder / name).write_text(yaml.safe_dump(case_spec(row), sort_keys=False))
            writer.writerow([name, row["measured_step_time_s"]])
    return out


def _run(rows: list[Measurement], start: Efficiency, holdout: float, seed: int) -> str:
    fitted_rows, held = split(rows, holdout, seed)
    profile = fit(fitted_rows, start)
    lines = [f"    fitted {profile.as_dict()['gemm_fraction_by_gpu']}, network_fraction "
             f"{profile.network_fraction}"]
    for name, part in (("fit", fitted_rows), ("held out", held)):
        before, after = summary(errors(part, start)), summary(errors(part, profile))
        lines.append(f"    {name:<8} {before['rows']:>2} runs: mean |error| "
                     f"{100 * before['mean_abs_error']:5.1f}% -> "
                     f"{100 * after['mean_abs_error']:5.1f}%, largest "
                     f"{100 * before['max_abs_error']:5.1f}% -> "
                     f"{100 * after['max_abs_error']:5.1f}%")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", type=Path, default=DEFAULT_CASES)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--holdout", type=float, default=0.5)
    args = parser.parse_args(argv)
    starts = {"uncalibrated": DEFAULT_EFFICIENCY.with_(gemm_fraction=FALLBACK_GEMM_FRACTION),
              "shipped": DEFAULT_EFFICIENCY}
    for as_stated in (False, True):
        with tempfile.TemporaryDirectory() as tmp:
            rows = read_measurements(write_measurements(args.cases, Path(tmp),
                                                        as_stated=as_stated))
        print(f"plans: {'as the sources state them' if as_stated else 'blank fields searched'}"
              f" ({len(rows)} runs, seed {args.seed}, {args.holdout:.0%} held out)")
        for name, start in starts.items():
            print(f"  from the {name} model:")
            print(_run(rows, start, args.holdout, args.seed))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
