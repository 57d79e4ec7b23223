"""`tuner calibrate MEASUREMENTS.csv --out FILE`: fit a calibration profile to measured runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from cost import DEFAULT_EFFICIENCY
from search_spaces import profile_text
from search_spaces.wording import counted

from ..engine.calibrate import (
    at_bounds,
    check_placeable,
    check_seconds,
    errors,
    fit,
    read_measurements,
    split,
    summary,
)
from ..errors import TunerError
from ..views import text as render
from .options import NumberRange, json_option
from .paths import out_path, write_whole

__all__ = ["calibrate"]


def _line(name: str, before: dict[str, Any], after: dict[str, Any]) -> str:
    if not before.get("rows"):
        return f"  {name:<9} no rows"
    runs = f"{before['rows']:>3} " + ("run: " if before["rows"] == 1 else "runs:")
    if "mean_abs_error" not in before or "mean_abs_error" not in after:
        return f"  {name:<9} {runs} none fits in memory under the model"
    return (f"  {name:<9} {runs} mean |error| "
            f"{100 * before['mean_abs_error']:5.1f}% -> {100 * after['mean_abs_error']:5.1f}%, "
            f"largest {100 * before['max_abs_error']:5.1f}% -> "
            f"{100 * after['max_abs_error']:5.1f}%")


@click.command()
@click.argument("csv_path", metavar="MEASUREMENTS.csv")  # a directory: one line
@click.option("--out", required=True, metavar="FILE",
              help="Where to write the profile (YAML) that specs name with `calibration:`, in "
                   "an existing directory.")
@click.option("--holdout", default=0.5, show_default=True, type=NumberRange(0.0, 0.9),
              help="Share of the runs held out of the fit to report its error on.")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0),
              help="Seed of the split.")
@click.option("--network", is_flag=True,
              help="Also fit the share of link bandwidth collectives reach.")
@json_option
def calibrate(csv_path: str, out: str, holdout: float, seed: int, network: bool,
              as_json: bool) -> None:
    """Fit the model's efficiency to measured step times: each GPU's GEMM fraction; for
    layers models (CNNs) each GPU's layers fraction, the per-step overhead and, with
    parameter servers, their rate and per-update time."""
    path = out_path(out)
    rows = read_measurements(csv_path)
    _never_an_input(path, out, [csv_path, *(r.space.spec.file for r in rows)])
    check_seconds(rows, errors(rows, DEFAULT_EFFICIENCY), source=csv_path)
    fitted_rows, held = split(rows, holdout, seed)
    before = {"fit": errors(fitted_rows, DEFAULT_EFFICIENCY),
              "held_out": errors(held, DEFAULT_EFFICIENCY)}
    check_placeable(fitted_rows, before["fit"], source=csv_path)
    fitted = fit(fitted_rows, DEFAULT_EFFICIENCY, network=network)
    report = {name: {"before": summary(before[name]), "after": summary(errors(part, fitted))}
              for name, part in (("fit", fitted_rows), ("held_out", held))}
    header = (f"written by `tuner calibrate {csv_path}`: {counted(len(fitted_rows), 'run')} "
              f"fitted, {counted(len(held), 'run')} held out (seed {seed})")
    write_whole(path, profile_text(fitted, header=header), what="the profile")
    bounded = at_bounds(fitted_rows, fitted, network=network)
    if as_json:
        click.echo(render.to_json({"profile": out, **report, "at_bounds": bounded,
                                   "efficiency": fitted.as_dict()}))
        return
    click.echo(f"wrote {out}")
    for name in ("fit", "held_out"):
        click.echo(_line(name, report[name]["before"], report[name]["after"]))
    for b in bounded:
        click.echo(_bound_note(b))


def _never_an_input(path: Path, out: str, inputs: list[str]) -> None:
    """TunerError where --out is the measurements file or a spec they name: writing the
    profile there would replace what the fit read."""
    for name in inputs:
        if Path(name).resolve() == path.resolve():
            raise TunerError(f"--out {out} is {name}, which the fit reads; give the profile "
                             "a file of its own, e.g. --out profile.yaml")


def _bound_note(b: dict[str, Any]) -> str:
    """One line on a parameter the fit left at an end of its range."""
    lo, hi = b["range"]
    way = "faster" if b["bound"] == "high" else "slower"
    return (f"  note: {b['parameter']} = {b['value']:.4g}, the {b['bound']} end of its range "
            f"[{lo:g}, {hi:g}]: the runs are {way} than this part of the model can explain; "
            "see where their time goes with `tuner evaluate` (launch, communication, "
            "memory-bound work)")
