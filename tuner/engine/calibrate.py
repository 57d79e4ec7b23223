"""Fit the cost model's efficiency parameters to measured runs, CM-DARE style.

Measurements are a CSV with a column `spec` (a spec file, relative to the CSV) and a column
`measured_step_time_s`. A spec with choices stands for a run whose plan is partly unknown: its
prediction is the fastest plan that fits, as the validation README does. The fit minimises the
sum of squared log errors over each GPU's GEMM fraction (for layers models, CM-DARE style: each
GPU's layers fraction, the per-step overhead and the parameter servers' rate; optionally the
network fraction) by coordinate descent with golden-section line searches (numpy only), on
a training part of the rows; the rest is held out to report the error the profile makes on
runs it has not seen.
"""

from __future__ import annotations

import csv
import functools
import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from cost import FALLBACK_GEMM_FRACTION, ClusterSpec, Efficiency, MixedCluster, Plan, evaluate
from search_spaces import Space, SpecError, load_spec, read_text
from search_spaces.plausible import is_bare
from search_spaces.units import parse_quantity

from ..errors import TunerError

__all__ = ["Measurement", "Parameter", "at_bounds", "check_placeable", "check_seconds",
           "errors", "fit", "measurement", "parameters", "read_measurements", "split", "summary"]

_GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0


@dataclass(frozen=True)
class Measurement:
    """One measured run: its spec's space (with the plans to try) and the measured seconds."""

    row: int
    space: Space
    candidates: tuple[tuple[ClusterSpec | MixedCluster, Plan], ...]
    measured_s: float
    bare: bool = False  # measured_step_time_s written without a unit (seconds)

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


def measurement(space: Space, measured_s: float, *, row: int = 0,
                bare: bool = False) -> Measurement:
    """One measured run of the spec `space` was made from: every plan it may have run."""
    candidates = tuple((cluster, plans) for values in space.cluster_combinations()
                       for cluster in [space.cluster(values)]
                       for plans in space.plans(cluster))
    return Measurement(row=row, space=space, candidates=candidates, measured_s=measured_s,
                       bare=bare)


def read_measurements(path: str | Path) -> list[Measurement]:
    """The rows of a measurements CSV; SpecError names the file, row and column. The CSV may
    start with a byte-order mark and pad its cells with spaces (as spreadsheets save it);
    a measured time is seconds, or a duration with its unit ("850 ms")."""
    path = Path(path)
    file = str(path)
    reader = csv.DictReader(io.StringIO(read_text(path).removeprefix("\ufeff"), newline=""),
                            skipinitialspace=True)
    reader.fieldnames = [name.strip() for name in reader.fieldnames or ()]
    _check_header(reader.fieldnames, file=file)
    out = []
    for i, row in enumerate(reader, start=2):
        row = {k: (v or "").strip() for k, v in row.items() if isinstance(k, str)}
        for column in ("spec", "measured_step_time_s"):
            if not row.get(column):
                raise SpecError(f"row {i} has no {column}; every row needs spec and "
                                "measured_step_time_s", file=file, field=column)
        measured = _seconds(row["measured_step_time_s"], row=i, file=file)
        out.append(measurement(Space.from_spec(load_spec(path.parent / row["spec"])),
                               measured, row=i, bare=is_bare(row["measured_step_time_s"])))
    if not out:
        raise SpecError("no measurements; add rows with spec and measured_step_time_s",
                        file=file)
    return out


def _seconds(text: str, *, row: int, file: str) -> float:
    """A measured step time in seconds: a number, or a duration with its unit."""
    try:
        return parse_quantity(text, "seconds", field="", positive=True)
    except SpecError:
        raise SpecError(f"row {row}: {text!r} is not a positive number of seconds (or a "
                        "duration with its unit, e.g. \"850 ms\")", file=file,
                        field="measured_step_time_s") from None


_MEANT = 30.0
"""A bare measured time this many times above or below the model's prediction is not in
seconds: the model is within tens of percent of real runs, a unit is off by 1000x."""


def check_seconds(rows: list[Measurement], row_errors: np.ndarray, *, source: str) -> None:
    """SpecError for the first bare measured time (no unit) at least 30x the model's
    prediction or at most 1/30 of it (`row_errors` from errors()): milliseconds (or minutes)
    in the column of seconds, which the fit would take as a GPU 1000x slower (or faster)
    and leave at an end of its range. A time written with its unit is taken as written."""
    for r, e in zip(rows, row_errors, strict=True):
        ratio = 1.0 + float(e)
        if not r.bare or not math.isfinite(ratio) or 1 / _MEANT < ratio < _MEANT:
            continue
        predicted = ratio * r.measured_s
        times = f"{1 / ratio:.3g}x" if ratio < 1 else f"1/{ratio:,.0f} of"
        unit = "ms" if ratio < 1 else "min"
        raise SpecError(f"row {r.row}: {r.measured_s:g} s is {times} the {predicted:.4g} s "
                        f"the model predicts for {r.space.spec.name}; a bare number is "
                        f"seconds: write the unit it is in (e.g. \"{r.measured_s:g} {unit}\")",
                        file=source, field="measured_step_time_s")


def _check_header(columns: Sequence[str] | None, *, file: str) -> None:
    """The CSV's first line names both columns (shared/SPEC.md `tuner calibrate`); else
    SpecError naming the missing column and the columns found, so a missing or misspelt
    column is not blamed on the first row."""
    found = list(columns or ())
    for column in ("spec", "measured_step_time_s"):
        if column not in found:
            have = f"its columns are {', '.join(found)}" if found else "it has no header line"
            raise SpecError(f"no column {column} in the header ({have}); the first line names "
                            "the columns spec and measured_step_time_s", file=file,
                            field=column)


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


@dataclass(frozen=True)
class Parameter:
    """One fitted parameter: its name, how it changes a profile, its range (searched on a log
    scale where `log`)."""

    name: str
    apply: Callable[[Efficiency, float], Efficiency]
    value: Callable[[Efficiency], float]
    lo: float
    hi: float
    log: bool = False

    def search(self, loss: Callable[[Efficiency], float], eff: Efficiency) -> Efficiency:
        def at(x: float) -> float:
            return loss(self.apply(eff, math.exp(x) if self.log else x))

        lo, hi = (math.log(self.lo), math.log(self.hi)) if self.log else (self.lo, self.hi)
        best = _golden(at, lo, hi)
        return self.apply(eff, float(f"{math.exp(best) if self.log else best:.4g}"))


def _gpu_names(cluster: Any) -> list[str]:
    pools = getattr(cluster, "pools", None)
    return [c.gpu.name for c in pools] if pools is not None else [cluster.gpu.name]


def parameters(rows: list[Measurement], *, network: bool = False) -> list[Parameter]:
    """What the runs can tell: the GEMM fraction of each GPU a transformer ran on; for
    layers models (CNNs, CM-DARE's regressions) the layers fraction of each GPU and the
    per-step overhead; with parameter servers, a server's update rate and per-update time;
    with `network`, the network fraction."""
    gemm: set[str] = set()
    layers: set[str] = set()
    servers = False
    for r in rows:
        names = {n for c, _ in r.candidates for n in _gpu_names(c)}
        (layers if r.space.model.kind == "layers" else gemm).update(names)
        servers |= any(bool(np.any(np.asarray(p.sync) == 4)) for _, p in r.candidates)
    out = [Parameter(f"gemm_fraction[{n}]", functools.partial(_with_pair, field="gemm", name=n),
                     functools.partial(_pair, field="gemm", name=n), 0.2, 0.95)
           for n in sorted(gemm)]
    out += [Parameter(f"layers_fraction[{n}]",
                      functools.partial(_with_pair, field="layers", name=n),
                      functools.partial(_pair, field="layers", name=n), 0.05, 4.0, log=True)
            for n in sorted(layers)]
    scalars = ([("step_overhead_s", 0.0, 0.3, False)] if layers else []) + (
        [("ps_bytes_per_s", 1e7, 1e11, True), ("ps_update_s", 0.0, 0.05, False)]
        if servers else []) + ([("network_fraction", 0.3, 1.0, False)] if network else [])
    out += [Parameter(name, functools.partial(_with, name), functools.partial(_get, name),
                      lo, hi, log) for name, lo, hi, log in scalars]
    return out


def fit(rows: list[Measurement], start: Efficiency, *, network: bool = False,
        sweeps: int = 2) -> Efficiency:
    """Coordinate descent over `parameters(rows)`, `sweeps` times: each GPU's GEMM fraction in
    [0.2, 0.95] (the GEMM fractions alone generalise best on few transformer runs; the network
    share trades off against them and overfits), a layers model's fraction per GPU in
    [0.05, 4] (above 1 where Winograd convolutions beat the FLOP count), its per-step overhead
    in [0, 0.3] s, a parameter server's rate in [1e7, 1e11] bytes/s and per-update time in
    [0, 50] ms."""
    eff = start
    loss = functools.partial(_loss, rows)
    chosen = parameters(rows, network=network)
    for _ in range(sweeps):
        for parameter in chosen:
            eff = parameter.search(loss, eff)
    if any(not p.name.startswith("gemm_fraction") for p in chosen):
        eff = _polish(chosen, loss, eff)
    return eff


def at_bounds(rows: list[Measurement], fitted: Efficiency, *, network: bool = False
              ) -> list[dict[str, Any]]:
    """The parameters the fit left at an end of their range (within 0.5% of it): the runs
    ask for more than that parameter can give, so what they measure differs from the model
    in a part it does not set (launch, communication, memory-bound work). Each as {parameter,
    value, bound: "low" or "high", range: [lo, hi]}."""
    found = []
    for p in parameters(rows, network=network):
        value = p.value(fitted)
        span = p.hi - p.lo
        for bound, end in (("low", p.lo), ("high", p.hi)):
            if abs(value - end) <= 0.005 * span:
                found.append({"parameter": p.name, "value": value, "bound": bound,
                              "range": [p.lo, p.hi]})
    return found


def _coordinates(chosen: list[Parameter], x: np.ndarray) -> list[float]:
    """Box coordinates in [0, 1] -> parameter values (log-scaled where `log`)."""
    out = []
    for p, u in zip(chosen, np.clip(x, 0.0, 1.0), strict=True):
        if p.log:
            out.append(math.exp(math.log(p.lo) + u * (math.log(p.hi) - math.log(p.lo))))
        else:
            out.append(p.lo + u * (p.hi - p.lo))
    return out


def _apply(chosen: list[Parameter], eff: Efficiency, x: np.ndarray) -> Efficiency:
    for p, value in zip(chosen, _coordinates(chosen, x), strict=True):
        eff = p.apply(eff, value)
    return eff


def _polish(chosen: list[Parameter], loss: Callable[[Efficiency], float], eff: Efficiency,
            *, evaluations: int = 400) -> Efficiency:
    """Nelder-Mead (Nelder and Mead, Comput. J. 1965) over all the parameters at once, in
    [0, 1] box coordinates, from the coordinate-descent result: a layers model's per-GPU
    speed, per-step overhead and server rate trade off against each other, which one
    coordinate at a time follows slowly."""
    start = np.array([_position(p, eff) for p in chosen])

    def f(x: np.ndarray) -> float:
        return loss(_apply(chosen, eff, x))

    simplex = [start] + [start + np.eye(len(start))[i] * (0.05 if start[i] < 0.95 else -0.05)
                         for i in range(len(start))]
    values = [f(x) for x in simplex]
    for _ in range(evaluations):
        order = np.argsort(values)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        centre = np.mean(simplex[:-1], axis=0)
        reflected = centre + (centre - simplex[-1])
        fr = f(reflected)
        if fr < values[0]:
            expanded = centre + 2.0 * (centre - simplex[-1])
            fe = f(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = centre + 0.5 * (simplex[-1] - centre)
            fc = f(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                simplex = [simplex[0] + 0.5 * (x - simplex[0]) for x in simplex]
                values = [values[0]] + [f(x) for x in simplex[1:]]
        if max(values) - min(values) < 1e-12:
            break
    best = simplex[int(np.argmin(values))]
    rounded = [float(f"{v:.4g}") for v in _coordinates(chosen, best)]
    for p, value in zip(chosen, rounded, strict=True):
        eff = p.apply(eff, value)
    return eff


def _position(parameter: Parameter, eff: Efficiency) -> float:
    """Where `eff` sets the parameter, in its [0, 1] box coordinate."""
    value = parameter.value(eff)
    if parameter.log:
        span = math.log(parameter.hi) - math.log(parameter.lo)
        return (math.log(max(value, parameter.lo)) - math.log(parameter.lo)) / span
    return (value - parameter.lo) / (parameter.hi - parameter.lo)


def _get(name: str, eff: Efficiency) -> float:
    return float(getattr(eff, name))


def _pair(eff: Efficiency, *, field: str, name: str) -> float:
    """A GPU's fraction in `eff` (its profile's, else what the model uses on a typical GPU:
    the profile's for all, else the fallback)."""
    pairs = dict(getattr(eff, f"{field}_fraction_by_gpu"))
    given = getattr(eff, f"{field}_fraction")
    return float(pairs.get(name, given if given is not None else FALLBACK_GEMM_FRACTION))


def _with(name: str, eff: Efficiency, value: float) -> Efficiency:
    return eff.with_(**{name: value})


def _with_pair(eff: Efficiency, value: float, *, field: str, name: str) -> Efficiency:
    key = f"{field}_fraction_by_gpu"
    pairs = dict(getattr(eff, key))
    pairs[name] = value
    return eff.with_(**{key: tuple(sorted(pairs.items()))})


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
    if finite.size == 0:
        return {"rows": int(e.size), "infeasible": int(e.size)}
    return {"rows": int(e.size), "mean_abs_error": float(np.mean(np.abs(finite))),
            "max_abs_error": float(np.max(np.abs(finite))),
            "infeasible": int(e.size - finite.size)}


def check_placeable(rows: list[Measurement], row_errors: np.ndarray, *, source: str) -> None:
    """TunerError when no run of `rows` has a plan that fits in memory under the model (every
    one of their `row_errors`, from errors(), infinite): their step times cannot be fitted
    (each predicts no time), and a run that ran fitted, so its spec leaves out what made it
    fit."""
    if not rows or np.isfinite(row_errors).any():
        return
    named = ", ".join(f"row {r.row} ({r.space.spec.name})" for r in rows[:3])
    more = f" and {len(rows) - 3} more" if len(rows) > 3 else ""
    raise TunerError(f"{source}: no run to fit has a plan that fits in memory under the model "
                     f"({named}{more}); a calibration fits the step times of runs the model can "
                     "place, so state in each spec what the run used (zero, recompute, "
                     "micro_batch, ...): `tuner evaluate SPEC` shows what does not fit")
