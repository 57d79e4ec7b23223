"""`tuner report`: one self-contained HTML file per study (plotly.js inlined once, no network
needed to view it): the best plan(s) with their time and memory breakdowns, the optimisation
history, the Pareto front of a two-objective study, parameter importances and the top plans."""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import optuna
import plotly.offline
from optuna.trial import TrialState

from cost import PlanResult
from search_spaces.wording import counted
from studies import TrialResult, best_results, swept

from .report_figures import (
    OBJECTIVE_LABELS,
    Figure,
    history_figures,
    importance_figures,
    memory_figure,
    pareto_figure,
    time_figure,
)
from .studies import best_cells, cluster_summary, no_feasible_note, plan_summary
from .text import pool_rows, seconds_text, unit_label, usd

__all__ = ["build_report", "search_figures"]

_GIB = 2.0**30
_MAX_FRONT = 20
_PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}
_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1280px;
       padding: 0 1rem; color: #222; }
h1 { margin-bottom: 0.2rem; } h2 { margin-top: 2.2rem; border-bottom: 1px solid #ddd; }
.meta { color: #555; } .note { color: #8a5a00; background: #fff6e0; padding: 0.5rem 0.8rem; }
.cards { display: flex; flex-wrap: wrap; gap: 0.8rem; margin: 1rem 0; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 0.5rem 0.9rem; min-width: 9rem; }
.card b { display: block; font-size: 1.3rem; } .card span { color: #666; font-size: 0.85rem; }
table { border-collapse: collapse; font-size: 0.85rem; margin-top: 0.6rem; }
th, td { border-bottom: 1px solid #e4e4e4; padding: 0.25rem 0.6rem; text-align: right;
         white-space: nowrap; }
th:nth-child(-n+2), td:nth-child(-n+2) { text-align: left; }
pre { background: #f6f6f6; padding: 0.8rem; overflow-x: auto; }
"""


def _cards(result: PlanResult) -> str:
    """The headline numbers of the best plan."""
    cards = [
        ("step time", seconds_text(result.step_time_s)),
        (unit_label(result), f"{result.tokens_per_s:,.0f}"),
        ("MFU", f"{100.0 * result.mfu:.1f} %"),
        ("memory per GPU", f"{result.memory_total_bytes / _GIB:.1f} of "
                           f"{result.hbm_usable_bytes / _GIB:.1f} GiB"),
        ("cost per hour", usd(result.cost_per_hour_usd)),
    ]
    if math.isfinite(result.time_to_train_days):  # NaN: the spec gives no tokens to train
        cards += [("days to train", f"{result.time_to_train_days:,.1f}"),
                  ("cost to train", usd(result.cost_to_train_usd))]
    if result.cluster.pricing == "spot":
        overhead = result.revocation_overhead
        cards += [("spot overhead (in days and cost)", f"+{100.0 * overhead:.1f} %"),
                  (f"{unit_label(result)} over the run",
                   f"{result.tokens_per_s / (1.0 + overhead):,.0f}")]
    items = "".join(f"<div class='card'><span>{html.escape(k)}</span><b>{html.escape(v)}</b>"
                    "</div>" for k, v in cards)
    return f"<div class='cards'>{items}</div>"


def _table(results: Sequence[TrialResult]) -> str:
    header, rows = best_cells(results)
    head = "".join(f"<th>{html.escape(c)}</th>" for c in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>"
                   for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _figure_html(figure: Figure) -> str:
    title = f"<h3>{html.escape(figure.title)}</h3>"
    if figure.figure is None:
        return f"{title}<p class='note'>{html.escape(figure.note)}</p>"
    div = figure.figure.to_html(full_html=False, include_plotlyjs=False,
                                div_id=f"fig-{figure.key}", config=_PLOTLY_CONFIG)
    return f"{title}{div}"


def search_figures(study: optuna.Study) -> list[Figure]:
    """The figures of the search: history, Pareto front (two objectives), importances. An
    exhaustive sweep's trials are its best results (or front) in rank order, not a sample:
    neither a history nor parameter importances describe it, and a note says so."""
    done = swept(study)
    figures = history_figures(study) if done is None else [Figure(
        "history", "Optimisation history",
        note=f"an exhaustive sweep: every one of "
             f"{counted(int(done.get('evaluated', 0)), 'plan')} was evaluated; "
             "its trials are the best results in rank order, not a search's history")]
    front = pareto_figure(study)
    if front is not None:
        figures.append(front)
    if done is not None:
        return [*figures, Figure("importance", "Parameter importances",
                                 note="an exhaustive sweep stores its best results, not a "
                                      "sample of the space: no parameter importances")]
    return figures + importance_figures(study)


def _summary(study: optuna.Study) -> str:
    trials = study.get_trials(deepcopy=False)
    counts = {s.name.lower(): sum(t.state == s for t in trials)
              for s in (TrialState.COMPLETE, TrialState.PRUNED, TrialState.FAIL)}
    objectives = list(study.user_attrs.get("objectives", []))
    goals = ", ".join(f"{o} ({d.name.lower()}, {OBJECTIVE_LABELS.get(o, '')})"
                      for o, d in zip(objectives, study.directions, strict=False))
    states = ", ".join(f"{n} {state}" for state, n in counts.items())
    return (f"<p class='meta'>objective: {html.escape(goals or '-')}; trials: "
            f"{html.escape(states)}; cost model version "
            f"{html.escape(str(study.user_attrs.get('cost_model_version', '-')))}</p>")


def _best_section(study: optuna.Study, results: Sequence[TrialResult], pareto: bool) -> str:
    if not results:
        return f"<h2>Best plan</h2><p class='note'>{html.escape(no_feasible_note(study))}</p>"
    if pareto:
        return (f"<h2>Pareto front: {counted(len(results), 'plan')}</h2><p>From the fastest to the "
                "cheapest; no plan is both faster and cheaper than another.</p>")
    best = results[0]
    gpus = counted(int(best.result.cluster.gpus), "GPU")
    where = f"{cluster_summary(best.result.cluster)} ({gpus})"
    return (f"<h2>Best plan</h2><p><code>{html.escape(plan_summary(best.result.plan))}"
            f"</code> on {html.escape(where)}, trial {best.trial}</p>{_cards(best.result)}"
            f"{_pools(best.result)}")


def _pools(result: PlanResult) -> str:
    """On a cluster of several GPU types: what each pool does and which bounds the step."""
    if not result.pools:
        return ""
    rows = pool_rows(result.pools, result.bottleneck)
    return (f"<h3>Pools</h3><pre>{html.escape(chr(10).join(r.strip() for r in rows[:1]))}\n"
            f"{html.escape(chr(10).join(r[4:] for r in rows[1:]))}</pre>")


def build_report(study: optuna.Study, *, top: int = 5) -> str:
    """The whole HTML document: plotly.js inlined once in the head, then the sections."""
    pareto = len(study.directions) > 1
    results = best_results(study, top=top)[:_MAX_FRONT]
    parts = [f"<h1>{html.escape(study.study_name)}</h1>", _summary(study),
             _best_section(study, results, pareto)]
    if results:
        parts += [_figure_html(time_figure(results)), _figure_html(memory_figure(results)),
                  "<h2>Plans of the front</h2>" if pareto else "<h2>Top plans</h2>",
                  _table(results)]
    parts.append("<h2>The search</h2>")
    parts += [_figure_html(f) for f in search_figures(study)]
    spec_text = study.user_attrs.get("spec_text")
    if isinstance(spec_text, str):
        parts.append(f"<h2>Spec</h2><pre>{html.escape(spec_text)}</pre>")
    return _document(study.study_name, "\n".join(parts))


def _document(name: str, body: str) -> str:
    return ("<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
            f"<title>{html.escape(name)}: cluster-tuner report</title>"
            f"<style>{_STYLE}</style>"
            f"<script type='text/javascript'>{plotly.offline.get_plotlyjs()}</script>"
            f"</head><body>\n{body}\n</body></html>\n")
