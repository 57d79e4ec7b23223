"""Every `python benchmarks/NAME.py` the README names is run: the same script on a reduced
workload (fewer cases, trials, seeds or plans), so that a broken benchmark fails the tests
while the full runs stay a command away. A benchmark the README names must have an entry."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "validation"
CASES = SHARED / "cases.csv"
READS_SHARED = {"benchmarks/cnn_h100.py", "benchmarks/gpu_validation.py"}
"""The benchmarks that read ../shared/validation/ themselves (the rest get {cases} or nothing)."""


def named_in_readme() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return sorted(set(re.findall(r"python (benchmarks/[a-z_]+\.py)", text)))


def few_cases(tmp_path: Path) -> str:
    """Six validation cases (two per GPU) as a CSV of the same columns."""
    with CASES.open(newline="") as f:
        rows = list(csv.DictReader(f))
    chosen = [r for gpu in ("a100-80gb", "h100-80gb", "v100-32gb")
              for r in [x for x in rows if x["gpu"] == gpu][:2]]
    out = tmp_path / "cases.csv"
    with out.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(chosen)
    return str(out)


QUICK: dict[str, tuple[list[str], str]] = {
    # script: (arguments, a phrase its output must contain)
    "benchmarks/accuracy.py": (["--cases", "{cases}"], "mean absolute error"),
    "benchmarks/calibration.py": (["--cases", "{cases}"], "held out"),
    # two runs, one fitted and one held out, then the mixes: every step of the script in
    # about 4 s (--limit 8, eight runs fitted twice over, took 30-40 s on 2 cores)
    "benchmarks/cmdare.py": (["--limit", "2"], "mixed clusters"),
    "benchmarks/cnn_h100.py": ([], "largest step error"),
    "benchmarks/comet_case_study.py": ([], "spread at one budget"),
    "benchmarks/gpu_validation.py": ([], "peak memory"),
    "benchmarks/moe_accuracy.py": (["--limit", "6"], "mean absolute error"),
    "benchmarks/hetero.py": ([], "no worse"),
    "benchmarks/pareto_quality.py": (["--trials", "12", "--seeds", "1", "--samplers", "tpe"],
                                     "hypervolume"),
    "benchmarks/search_quality.py": (["--trials", "12", "--seeds", "1", "--no-flat",
                                      "--examples", "llama3-405b-2048-h100"], "of optimum"),
    "benchmarks/speed.py": (["--plans", "100000"], "plans/s"),
    "benchmarks/startup.py": (["--repeats", "1"], "tuner evaluate SPEC"),
    "benchmarks/sweep.py": (["--repeats", "1"], "end to end"),
    "benchmarks/default_search.py": (["--repeats", "1", "--examples", "llama3-70b-256-h100"],
                                     "same answer as the exhaustive sweep: True"),
    "benchmarks/large_space.py": (["--small", "--seeds", "1", "--trials", "10"],
                                  "default search"),
    "benchmarks/sync.py": ([], "textbook checks"),
    # one row per storage (two workers: the shared study), not a row per worker count: each
    # row is a new study and new worker processes, and a second row runs the same lines
    "benchmarks/workers.py": (["--trials", "8", "--workers", "2", "--sampler", "random"],
                              "trials/s"),
    "benchmarks/serve_load.py": (["--clients", "2", "--requests", "40"], "requests/s"),
}


def test_every_benchmark_the_readme_names_has_a_quick_run() -> None:
    assert named_in_readme() and set(named_in_readme()) <= set(QUICK)


@pytest.mark.parametrize("script", sorted(QUICK))
def test_benchmark_runs(script: str, tmp_path: Path) -> None:
    args, phrase = QUICK[script]
    if "{cases}" in args:
        if not CASES.is_file():
            pytest.skip("../shared/validation/cases.csv is not beside the checkout")
        args = [a.replace("{cases}", few_cases(tmp_path)) for a in args]
    if script in READS_SHARED and not (SHARED / "gpu").is_dir():
        pytest.skip("../shared/validation/gpu/ is not beside the checkout")
    result = subprocess.run([sys.executable, str(ROOT / script), *args], cwd=tmp_path,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert phrase in result.stdout
