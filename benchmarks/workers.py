"""Trials per second of one study shared by 1, 2 and 4 `tuner worker` processes, on SQLite and
on PostgreSQL.

    python benchmarks/workers.py [--trials N] [--workers 1,2,4] [--sampler tpe] [--postgres URL]
    bash scripts/with_postgres python benchmarks/workers.py     # with a throwaway server

Each run makes a fresh study of the GPT-3 175B on 1024 A100 example (`tuner search --timeout
0`), starts the workers against it and times them from start to the last exit: the trial
target over that wall time, all workers counted. PostgreSQL is measured when --postgres (or
$TUNER_TEST_POSTGRES_URL, set by scripts/with_postgres) names a server; otherwise its rows
say why they are missing. The machine's cores bound what more workers can give: compare the
rows of one run.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import optuna
import yaml
from optuna.trial import TrialState

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from studies import open_storage  # noqa: E402

EXAMPLE = ROOT / "search_spaces" / "examples" / "gpt3-175b-1024-a100.yaml"
POSTGRES_VAR = "TUNER_TEST_POSTGRES_URL"


def make_study(folder: Path, url: str, sampler: str, trials: int) -> str:
    """A fresh study of the example with `trials` as its target and no trial run yet."""
    name = f"bench-{uuid.uuid4().hex[:8]}"
    data = yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))
    data["name"] = name
    data["search"] = {"sampler": sampler, "trials": trials, "seed": 0}
    spec = folder / f"{name}.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    subprocess.run([sys.executable, "-m", "tuner", "search", str(spec), "--timeout", "0",
                    "--storage", url, "--json"], cwd=ROOT, check=True, capture_output=True)
    return name


def run_workers(name: str, url: str, workers: int) -> float:
    """Seconds from starting `workers` worker processes to the last one's exit."""
    command = [sys.executable, "-m", "tuner", "worker", name, "--storage", url, "--json"]
    start = time.perf_counter()
    procs = [subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for _ in range(workers)]
    for proc in procs:
        _, err = proc.communicate()
        if proc.returncode:
            raise SystemExit(f"a worker exited {proc.returncode}: {err.strip()[-500:]}")
    return time.perf_counter() - start


def counts(name: str, url: str) -> tuple[int, int]:
    """(complete, failed) trials of the study."""
    store = open_storage(url, heartbeat_interval_s=None, create=False)
    found = optuna.load_study(study_name=name, storage=store).get_trials(deepcopy=False)
    return (sum(t.state == TrialState.COMPLETE for t in found),
            sum(t.state == TrialState.FAIL for t in found))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=200, help="trial target per run")
    parser.add_argument("--workers", default="1,2,4", help="worker counts, comma-separated")
    parser.add_argument("--sampler", default="tpe", help="the study's sampler")
    parser.add_argument("--postgres", default=os.environ.get(POSTGRES_VAR),
                        help=f"a PostgreSQL URL (default ${POSTGRES_VAR})")
    args = parser.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    counts_of_workers = [int(n) for n in args.workers.split(",")]
    print(f"{args.trials} trials of {EXAMPLE.stem} ({args.sampler}) per run, "
          f"{os.cpu_count()} cores")
    print(f"{'storage':<11} {'workers':>7} {'seconds':>8} {'trials/s':>9} {'vs 1':>6} "
          f"{'complete':>9} {'failed':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        storages = [("sqlite", f"sqlite:///{folder / 'bench.db'}"),
                    ("postgresql", args.postgres)]
        for label, url in storages:
            if not url:
                print(f"{label:<11} not measured: give --postgres URL or run under "
                      "scripts/with_postgres")
                continue
            single = None
            for workers in counts_of_workers:
                name = make_study(folder, url, args.sampler, args.trials)
                seconds = run_workers(name, url, workers)
                rate = args.trials / seconds
                single = single or rate
                complete, failed = counts(name, url)
                print(f"{label:<11} {workers:>7} {seconds:>8.1f} {rate:>9.1f} "
                      f"{rate / single:>5.2f}x {complete:>9} {failed:>7}")


if __name__ == "__main__":
    main()
