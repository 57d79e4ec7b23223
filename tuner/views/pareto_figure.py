"""The Pareto-front figure of a two-objective study: every feasible plan found, coloured by GPU
type and marked by pricing (on demand, spot), the front drawn over them; an axis whose values
span more than MAX_LINEAR_RATIO is logarithmic (days from 17 to 330 are; USD from 5M to 20M
are not)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import optuna
import plotly.graph_objects as go
from optuna.study import StudyDirection

from studies import is_feasible, result_of

from .studies import cluster_summary, plan_summary

__all__ = ["MAX_LINEAR_RATIO", "Point", "front_of", "pareto_plot", "wide"]

MAX_LINEAR_RATIO = 10.0
"""Largest max/min of an axis's (positive) values drawn on a linear axis."""
_COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#eeca3b",
            "#9d755d", "#ff9da6", "#bab0ac")
_SYMBOLS = {"on_demand": "circle", "spot": "diamond"}


@dataclass(frozen=True)
class Point:
    """One feasible trial: its two objective values and what it ran on."""

    trial: int
    x: float
    y: float
    gpu: str
    pricing: str
    text: str


def _points(study: optuna.Study) -> list[Point]:
    points = []
    for t in study.get_trials(deepcopy=False):
        result = result_of(t)
        if result is None or not is_feasible(t) or t.values is None:
            continue
        text = (f"trial {t.number}<br>{plan_summary(result.plan)}<br>"
                f"{cluster_summary(result.cluster)}")
        points.append(Point(t.number, float(t.values[0]), float(t.values[1]),
                            result.cluster.gpu, result.cluster.pricing, text))
    return points


def front_of(points: Sequence[Point], directions: Sequence[StudyDirection]) -> list[Point]:
    """The points no other point beats in both objectives, by the first objective."""
    signs = [-1.0 if d == StudyDirection.MAXIMIZE else 1.0 for d in directions]
    ranked = sorted(points, key=lambda p: (signs[0] * p.x, signs[1] * p.y))
    front: list[Point] = []
    for p in ranked:
        if not front or signs[1] * p.y < signs[1] * front[-1].y:
            front.append(p)
    return front


def wide(values: Sequence[float]) -> bool:
    """Whether positive values span more than MAX_LINEAR_RATIO (a log axis reads better)."""
    positive = [v for v in values if v > 0]
    return len(positive) == len(values) > 1 and max(positive) > MAX_LINEAR_RATIO * min(positive)


def _group_traces(points: Sequence[Point]) -> list[go.Scatter]:
    gpus = sorted({p.gpu for p in points})
    traces = []
    for gpu in gpus:
        for pricing, symbol in _SYMBOLS.items():
            group = [p for p in points if p.gpu == gpu and p.pricing == pricing]
            if group:
                traces.append(go.Scatter(
                    x=[p.x for p in group], y=[p.y for p in group], mode="markers",
                    name=f"{gpu}, {pricing.replace('_', ' ')}", text=[p.text for p in group],
                    hoverinfo="text+x+y", marker={"color": _COLOURS[gpus.index(gpu) % 10],
                                                  "symbol": symbol, "size": 8, "opacity": 0.6}))
    return traces


def pareto_plot(study: optuna.Study, labels: Sequence[str]) -> go.Figure | None:
    """The figure, or None when the study has no feasible trial yet."""
    points = _points(study)
    if not points:
        return None
    front = front_of(points, study.directions)
    figure = go.Figure(_group_traces(points))
    figure.add_trace(go.Scatter(
        x=[p.x for p in front], y=[p.y for p in front], mode="lines+markers", name="Pareto front",
        text=[p.text for p in front], hoverinfo="text+x+y", line={"color": "black"},
        marker={"size": 12, "color": "rgba(0,0,0,0)", "line": {"color": "black", "width": 2}}))
    figure.update_xaxes(title_text=labels[0], type="log" if wide([p.x for p in points])
                        else "linear")
    figure.update_yaxes(title_text=labels[1], type="log" if wide([p.y for p in points])
                        else "linear")
    figure.update_layout(height=520, margin={"t": 30}, legend={"title": "GPU, pricing"})
    return figure
