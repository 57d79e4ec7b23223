"""The figures of `tuner report`: the best plans' time and memory breakdowns as stacked bars,
and Optuna's own plotly plots (history, Pareto front, parameter importances). No HTML here."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import optuna
import plotly.graph_objects as go
from optuna import visualization
from optuna.trial import FrozenTrial, TrialState

from search_spaces.wording import counted
from studies import TrialResult

from .pareto_figure import pareto_plot
from .studies import cluster_summary, no_feasible_note, plan_summary

__all__ = ["OBJECTIVE_LABELS", "Figure", "history_figures", "importance_figures",
           "memory_figure", "pareto_figure", "time_figure"]

_GIB = 2.0**30
_MIN_TRIALS_FOR_IMPORTANCE = 10

OBJECTIVE_LABELS = {"throughput": "tokens/s", "time_to_train": "days to train",
                    "cost": "USD to train"}
"""Each objective of shared/SPEC.md by the unit its values are stored in."""

TIME_TERMS = {"compute": "compute", "recompute": "recompute", "tp_comm": "TP traffic",
              "cp_comm": "CP traffic", "pp_comm": "PP sends", "pp_bubble": "pipeline bubble",
              "dp_comm": "DP traffic", "optimizer": "optimizer", "offload": "offload",
              "ep_comm": "EP all-to-all", "launch": "kernel launches",
              "spot_overhead": "spot overhead (revocations, checkpoints)"}
MEMORY_TERMS = {"weights": "weights", "gradients": "gradients", "optimizer": "optimizer state",
                "activations": "activations", "buffers": "buffers"}
_COLOURS = ("#4c78a8", "#f58518", "#e45756", "#72b7b2", "#54a24b", "#eeca3b", "#b279a2",
            "#ff9da6", "#9d755d", "#bab0ac", "#8c6d31", "#7f7f7f")


@dataclass(frozen=True)
class Figure:
    """A titled plotly figure, or a note saying why there is none."""

    key: str
    title: str
    figure: go.Figure | None = None
    note: str = ""


def _bar_label(r: TrialResult) -> str:
    return (f"trial {r.trial}: {plan_summary(r.result.plan)} | "
            f"{cluster_summary(r.result.cluster)}")


def _stacked(results: Sequence[TrialResult], parts: Callable[[TrialResult],
             Mapping[str, float]], terms: Mapping[str, str], scale: float) -> go.Figure:
    """One horizontal bar per plan (best at the top), one colour per term."""
    labels = [_bar_label(r) for r in results]
    figure = go.Figure()
    for colour, (key, name) in zip(_COLOURS, terms.items(), strict=False):
        values = [float(parts(r).get(key, 0.0)) / scale for r in results]
        if any(v > 0 for v in values):
            figure.add_trace(go.Bar(name=name, y=labels, x=values, orientation="h",
                                    marker_color=colour))
    figure.update_layout(barmode="stack", yaxis={"autorange": "reversed", "automargin": True},
                         legend={"orientation": "h", "y": -0.2, "traceorder": "normal"},
                         height=180 + 36 * len(results), margin={"t": 30})
    return figure


def _time_parts(r: TrialResult) -> dict[str, float]:
    """The step's terms, and on spot servers the expected overhead per step (revocations,
    restarts, checkpoints: the step time times the revocation overhead)."""
    parts = dict(r.result.time_breakdown_s)
    if r.result.cluster.pricing == "spot":
        parts["spot_overhead"] = r.result.step_time_s * r.result.revocation_overhead
    return parts


def time_figure(results: Sequence[TrialResult]) -> Figure:
    """Seconds per optimizer step of each plan, by term (exposed time), with the expected spot
    overhead of each step on spot servers."""
    figure = _stacked(results, _time_parts, TIME_TERMS, 1.0)
    spot = any(r.result.cluster.pricing == "spot" for r in results)
    figure.update_xaxes(title_text="seconds per step" + (
        " (spot: with the expected overhead of revocations and checkpoints)" if spot else ""))
    return Figure("time", "Step time by term", figure)


def memory_figure(results: Sequence[TrialResult]) -> Figure:
    """GiB per GPU of each plan, by kind, with the HBM it may use marked."""
    figure = _stacked(results, lambda r: r.result.memory_per_gpu_bytes, MEMORY_TERMS, _GIB)
    figure.add_trace(go.Scatter(
        name="usable HBM", y=[_bar_label(r) for r in results], mode="markers",
        x=[r.result.hbm_usable_bytes / _GIB for r in results],
        marker={"symbol": "line-ns-open", "size": 24, "color": "black",
                "line": {"width": 3}}))
    figure.update_xaxes(title_text="GiB per GPU")
    return Figure("memory", "Memory per GPU by kind", figure)


def _objectives(study: optuna.Study) -> list[str]:
    stored = list(study.user_attrs.get("objectives", []))
    return stored if len(stored) == len(study.directions) else [
        f"objective {i}" for i in range(len(study.directions))]


def _label(objective: str) -> str:
    unit = OBJECTIVE_LABELS.get(objective)
    return f"{objective} ({unit})" if unit else objective


def history_figures(study: optuna.Study) -> list[Figure]:
    """Optuna's optimisation history, one figure per objective; a note while no trial is
    complete (Optuna would draw empty axes and log a warning line on stderr)."""
    names = _objectives(study)
    if not study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
        return [Figure("history", "Optimisation history",
                       note="no complete trial yet: `tuner worker NAME` or `tuner resume NAME` "
                            "runs the study's trials")]
    if len(names) == 1:
        figure = visualization.plot_optimization_history(study, target_name=_label(names[0]))
        return [Figure("history", "Optimisation history", figure)]
    return [Figure(f"history-{i}", f"Optimisation history: {name}",
                   visualization.plot_optimization_history(
                       study, target=_objective_value(i), target_name=_label(name)))
            for i, name in enumerate(names)]


def _objective_value(i: int) -> Callable[[FrozenTrial], float]:
    """The i-th objective value of a trial, for Optuna's `target` arguments."""
    return lambda trial: float(trial.values[i])


def pareto_figure(study: optuna.Study) -> Figure | None:
    """The Pareto front of a two-objective study over its feasible plans, coloured by GPU
    type and pricing (tuner.views.pareto_figure); a note while no plan is feasible."""
    if len(study.directions) != 2:
        return None
    figure = pareto_plot(study, [_label(n) for n in _objectives(study)])
    if figure is None:
        return Figure("pareto", "Pareto front",
                      note=no_feasible_note(study))
    return Figure("pareto", "Pareto front (feasible plans)", figure)


def _searched_params(trials: Sequence[FrozenTrial]) -> list[str]:
    """Parameters that took more than one value over the trials."""
    seen: dict[str, set[str]] = {}
    for t in trials:
        for k, v in t.params.items():
            seen.setdefault(k, set()).add(repr(v))
    return sorted(k for k, values in seen.items() if len(values) > 1)


def importance_figures(study: optuna.Study) -> list[Figure]:
    """Optuna's parameter importances (PED-ANOVA) per objective, or a note when they cannot
    be computed: fewer than 10 complete trials, or fewer than two searched parameters."""
    trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
    params = _searched_params(trials)
    note = ""
    if len(trials) < _MIN_TRIALS_FOR_IMPORTANCE:
        note = (f"{counted(len(trials), 'complete trial')}; parameter importances need at least "
                f"{_MIN_TRIALS_FOR_IMPORTANCE}: run more trials")
    elif len(params) < 2:
        note = (f"the trials search {len(params)} parameter(s) ({', '.join(params) or 'none'}); "
                "importances compare two or more (the cheap knobs are swept inside each trial)")
    if note:
        return [Figure("importance", "Parameter importances", note=note)]
    return [_importance(study, i, name) for i, name in enumerate(_objectives(study))]


def _importance(study: optuna.Study, i: int, name: str) -> Figure:
    """PED-ANOVA ranks parameters by how they lead to *low* values: maximised objectives are
    negated."""
    sign = -1.0 if study.directions[i] == optuna.study.StudyDirection.MAXIMIZE else 1.0
    key = "importance" if len(study.directions) == 1 else f"importance-{i}"
    try:
        with warnings.catch_warnings():  # it warns on maximised studies, target negated or not
            warnings.filterwarnings("ignore", message="PedAnovaImportanceEvaluator computes")
            figure = visualization.plot_param_importances(
                study, target=lambda t: sign * float(t.values[i]), target_name=_label(name))
    except (ValueError, RuntimeError) as err:
        return Figure(key, f"Parameter importances: {name}",
                      note=f"not computed: {' '.join(str(err).split())}")
    return Figure(key, f"Parameter importances: {name}", figure)
