"""Fit the cost model's efficiency parameters to measured runs, CM-DARE style.

Measurements are a CSV with a column `spec` (a spec file, relative to the CSV) and a column
`measured_step_time_s`. A spec with choices stands for a run whose plan is partly unknown: its
prediction is the fastest plan that fits, as the validation README does. The fit minimises the
sum of squared log errors over each GPU's GEMM fraction (and optionally the network fraction)
by coordinate descent with golden-section line searches (numpy only), on a training part of
the rows; the rest is held out to report the error the profile makes on runs it has not seen.
"""

from __future__ import annotations

import csv
import functools
import io
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cost import ClusterSpec, Efficiency, Plan, evaluate
from search_spaces import Space, SpecError, load_spec, read_text

__all__ = ["Measurement", "errors", "fit", "read_measurements", "split", "summary"]

_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


@dataclass(frozen=True)
class Measurement:
    """One measured run: its spec's space (with the plans to try) and the measured seconds."""

    row: int
    space: Space
    candidates: tuple[tuple[ClusterSpec, Plan], ...]
    measured_s: float

    def predict(self, efficiency: Efficiency) -> float:
        """The fastest feasible plan's step time under `efficiency` with the features of the
        run's software (its spec's `stack`), inf if none fits."""
        efficiency = self.space.spec.stack.apply(efficiency)
        best = math.inf
        for cluster, plans in self.candidates:
            report = evaluate(self.space.model, cluster, self.space.training, plans,
                              efficiency=efficiency)
            times = np.where(report.feasible, report.step_time_s, np.inf)
            best = min(best, float(np.min(times)))
        return best


def read_measurements(path: str | Path) -> list[Measurement]:
    """The rows of a measurements CSV; SpecError names the file, row and column."""
    path = Path(path)
    file = str(path)
    rows = list(csv.DictReader(io.StringIO(read_text(path), newline="")))
    out = []
    for i, row in enumerate(rows, start=2):
        for column in ("spec", "measured_step_time_s"):
            if not (row.get(column) or "").strip():
                raise SpecError(f"row {i} has no {column}; every row needs spec and "
                                "measured_step_time_s", file=file, field=column)
        try:
            measured = float(row["measured_step_time_s"])
        except ValueError:
            measured = -1.0
        if not measured > 0:
            raise SpecError(f"row {i}: {row['measured_step_time_s']!r} is not a positive "
                            "number of seconds", file=file, field="measured_step_time_s")
        space = Space.from_spec(load_spec(path.parent / row["spec"]))
        candidates = tuple((cluster, plans) for values in space.cluster_combinations()
                           for cluster in [space.cluster(values)]
                           for plans in space.plans(cluster))
        out.append(Measurement(row=i, space=space, candidates=candidates, measured_s=measured))
    if not out:
        raise SpecError("no measurements; add rows with spec and measured_step_time_s",
                        file=file)
    return out


def errors(rows: list[Measurement], efficiency: Efficiency) -> np.ndarray:
    """predicted / measured - 1 per row."""
    return np.array([r.predict(efficiency) / r.measured_s - 1.0 for r in rows])


def _loss(rows: list[Measurement], efficiency: Efficiency) -> float:
    e = errors(rows, efficiency)
    return float(np.sum(np.log1p(np.where(np.isfinite(e), e, 9.0)) ** 2))


def _golden(f: Callable[[float], float], lo: float, hi: float, steps: int = 18) -> float:
    a, b = lo, hi
    for _ in range(steps):
        c, d = b - _GOLDEN * (b - a), a + _GOLDEN * (b - a)
        if f(c) <= f(d):
            b = d
        else:
            a = c
    return (a + b) / 2.0


def fit(rows: list[Measurement], start: Efficiency, *, network: bool = False,
        sweeps: int = 2) -> Efficiency:
    """Coordinate descent: each GPU's GEMM fraction in [0.2, 0.95] and, with `network`, the
    network fraction in [0.3, 1.0], `sweeps` times. The GEMM fractions alone generalise best
    on few runs (the network share trades off against them and overfits)."""
    eff = start
    names = sorted({c.gpu.name for r in rows for c, _ in r.candidates})
    for _ in range(sweeps):
        for name in names:
            best = _golden(functools.partial(_gpu_loss, rows=rows, eff=eff, name=name),
                           0.2, 0.95)
            eff = _with_gpu(eff, name, round(best, 4))
        if network:
            best = _golden(functools.partial(_network_loss, rows=rows, eff=eff), 0.3, 1.0)
            eff = eff.with_(network_fraction=round(best, 4))
    return eff


def _gpu_loss(x: float, *, rows: list[Measurement], eff: Efficiency, name: str) -> float:
    return _loss(rows, _with_gpu(eff, name, x))


def _network_loss(x: float, *, rows: list[Measurement], eff: Efficiency) -> float:
    return _loss(rows, eff.with_(network_fraction=x))


def _with_gpu(eff: Efficiency, name: str, fraction: float) -> Efficiency:
    pairs = dict(eff.gemm_fraction_by_gpu)
    pairs[name] = fraction
    return eff.with_(gemm_fraction_by_gpu=tuple(sorted(pairs.items())))


def split(rows: list[Measurement], holdout: float, seed: int
          ) -> tuple[list[Measurement], list[Measurement]]:
    """(fit, held out): a seeded shuffle, `holdout` of the rows held out (none if < 2 rows)."""
    if holdout <= 0 or len(rows) < 2:
        return rows, []
    order = np.random.default_rng(seed).permutation(len(rows))
    held = max(1, min(len(rows) - 1, round(holdout * len(rows))))
    return [rows[i] for i in sorted(order[held:])], [rows[i] for i in sorted(order[:held])]


def summary(e: np.ndarray) -> dict[str, Any]:
    """Rows, mean and largest absolute error, and rows with no feasible plan."""
    if e.size == 0:
        return {"rows": 0}
    finite = e[np.isfinite(e)]
    return {"rows": int(e.size), "mean_abs_error": float(np.mean(np.abs(finite))),
            "max_abs_error": float(np.max(np.abs(finite))),
            "infeasible": int(e.size - finite.size)}
