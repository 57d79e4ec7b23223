"""The default search on the shipped examples, as a user runs it: `tuner search SPEC` in a new
process with a fresh SQLite file, timed from process start to exit, and its answer compared
with the exhaustive optimum (every valid plan, computed in this process).

    python benchmarks/default_search.py [--examples a,b] [--repeats N] [--json]

The must-show case is llama3-70b-256-h100 (Llama 3 70B on 256 H100 with every usual knob
open): the default sampler (auto) must return the exhaustive optimum within 5 s wall.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from search_spaces import Space, load_spec  # noqa: E402
from tuner.engine.exhaustive import sweep  # noqa: E402

EXAMPLES = ("llama3-70b-256-h100", "gpt3-175b-1024-a100", "llama3-70b-64-h100",
            "llama3-405b-2048-h100", "llama3-70b-budget-codesign")


def _values(best: list[dict[str, Any]], objectives: tuple[str, ...]) -> list[list[float]]:
    """Each reported plan's objective values, in the objectives' units (as a sweep keeps
    them: tokens/s, days, USD), rounded to 1e-6."""
    keys = {"throughput": "tokens_per_s", "time_to_train": "time_to_train_days",
            "cost": "cost_to_train_usd"}
    return [[round(b[keys[o]], 6) for o in objectives] for b in best]


def run_one(name: str, *, repeats: int, folder: Path) -> dict[str, Any]:
    path = ROOT / "search_spaces" / "examples" / f"{name}.yaml"
    spec = load_spec(path)
    optimum = sweep(Space.from_spec(spec))
    expected = [[round(x, 6) for x in c.objectives] for c, _ in optimum.best]
    walls, out = [], {}
    for i in range(repeats):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "tuner", "search", str(path), "--json",
                               "--storage", f"sqlite:///{folder / f'{name}-{i}.db'}"],
                              cwd=ROOT, capture_output=True, text=True, check=True)
        walls.append(time.perf_counter() - start)
        out = json.loads(done.stdout)
    found = _values(out["best"], spec.objective)
    same = found[:1] == expected[:1] if len(spec.objective) == 1 else \
        sorted(found) == sorted(expected)
    return {"plans": optimum.evaluated, "sampler": out["sampler"], "optimal": out["optimal"],
            "equals_exhaustive": same, "wall_s_min": min(walls),
            "wall_s_median": statistics.median(walls)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", default=",".join(EXAMPLES))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    report = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.examples.split(","):
            report[name] = run_one(name, repeats=args.repeats, folder=Path(tmp))
            if not args.json:
                r = report[name]
                print(f"{name}: {r['plans']:,} plans, {r['sampler']} "
                      f"({'optimal' if r['optimal'] else 'not proven'}), same answer as the "
                      f"exhaustive sweep: {r['equals_exhaustive']}; wall {r['wall_s_min']:.2f} s"
                      f" (median {r['wall_s_median']:.2f} s of {args.repeats}, process start "
                      "included)")
    if args.json:
        print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
