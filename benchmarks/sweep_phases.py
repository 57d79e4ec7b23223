"""The phases of `tuner search SPEC --sampler exhaustive`, one after the other in this new
process, as JSON wall and CPU seconds (benchmarks/sweep.py runs it): the imports the command
makes before it forks the sweep, the spec and its space, the sweep, the imports of Optuna and
SQLAlchemy, opening a fresh SQLite storage with the study, and writing the best plans; then,
as the command does, it closes the storage and freezes the collector's objects before it exits
(tuner.cli.leaving). It prints `ended_at`, the clock (time.time()) when the writing ended, from
which benchmarks/sweep.py times the leaving: the storage closed, the JSON printed and the
interpreter's exit, up to the process's end.

    python benchmarks/sweep_phases.py SPEC DB_FILE

Only the standard library is imported before the first mark."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _mark() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def phases(spec_path: Path, db: Path) -> tuple[dict[str, dict[str, float]], Any]:
    """Wall and CPU seconds of each phase, in order, and the storage (open)."""
    marks = [_mark()]
    import tuner.cli.search  # noqa: F401 (what the command imports before it forks)
    from search_spaces import Space, load_spec
    from tuner.engine.exhaustive import sweep

    marks.append(_mark())
    text = spec_path.read_text(encoding="utf-8")
    space = Space.from_spec(load_spec(spec_path))
    marks.append(_mark())
    summary = sweep(space)
    marks.append(_mark())
    from studies import create_or_continue, open_storage
    from tuner.engine.scoring import DIRECTIONS
    from tuner.engine.stored_sweep import write_sweep

    marks.append(_mark())
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)  # as the command line sets it
    storage = open_storage(f"sqlite:///{db}")
    study = create_or_continue(storage, space.spec, text, target_trials=None,
                               directions=[DIRECTIONS[o] for o in space.spec.objective])
    marks.append(_mark())
    write_sweep(study, space, summary)
    marks.append(_mark())
    names = ["imports", "spec", "sweep", "storage_imports", "storage_open", "writing"]
    return {n: {"wall_s": b[0] - a[0], "cpu_s": b[1] - a[1]}
            for n, a, b in zip(names, marks, marks[1:], strict=False)}, storage  # one mark more


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    timed, opened = phases(Path(sys.argv[1]), Path(sys.argv[2]))
    ended_at = time.time()
    from tuner.cli.leaving import leave

    print(json.dumps({"phases": timed, "ended_at": ended_at}), flush=True)
    leave([opened])
