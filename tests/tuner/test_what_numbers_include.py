"""What the numbers include (issue 15): the spot overhead beside tokens/s wherever time and
money appear, memory_headroom as a constraint with its violation, a GPU without a price shown
as such, the report's Pareto plot and step bars, metric names, and trials done."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import optuna
import pytest
from click.testing import CliRunner

from studies import metric_names, open_storage
from tests.studies.builders import add_trial, gpt3_result, new_study, storage_in
from tuner.cli import main
from tuner.views.pareto_figure import front_of, pareto_plot, wide
from tuner.views.report import build_report
from tuner.views.report_figures import time_figure
from tuner.views.studies import studies_text

from .specs import TINY_MODEL, tiny, write

_GIB = 2.0**30
_SPOT = {"gpu": "h100-80gb", "nodes": 16, "gpus_per_node": 8, "pricing": "spot",
         "revocations_per_node_hour": 0.05}
_BATCH = {"global_batch": 512, "tokens": 1e9}


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def _fixed(name: str, **sections: Any) -> dict[str, Any]:
    return tiny(name, plan={"tp": 2, "pp": 2, "micro_batch": 2}, **sections)


def test_evaluate_and_explain_show_the_spot_overhead_and_the_runs_rate(tmp_path: Path) -> None:
    spec = write(tmp_path, _fixed("spot", cluster=_SPOT, training=_BATCH))
    data = json.loads(_run("evaluate", str(spec), "--json")[1])
    overhead, rate = data["revocation_overhead"], data["tokens_per_s"]
    assert overhead > 0
    shown = f"{rate / (1 + overhead):,.0f} tokens/s over the run"
    for command in ("evaluate", "explain"):
        code, out, err = _run(command, str(spec))
        assert code == 0, err
        line = next(x for x in out.splitlines() if "spot overhead" in x)
        assert f"+{100 * overhead:.1f} %" in line and shown in line, line
    explained = json.loads(_run("explain", str(spec), "--json")[1])
    assert explained["revocation_overhead"] == overhead
    assert explained["cost_to_train_usd"] == pytest.approx(data["cost_to_train_usd"])


def test_without_tokens_there_is_no_time_or_cost_to_train(tmp_path: Path) -> None:
    """A spec without training.tokens trains nothing: null in JSON (a script read 0.0 days,
    'trains instantly'), no line in the text; with tokens, numbers."""
    none = {"global_batch": 512}
    without = json.loads(_run("evaluate", str(write(tmp_path, _fixed("none", training=none))),
                              "--json")[1])
    assert without["time_to_train_days"] is None and without["cost_to_train_usd"] is None
    assert without["checkpoint_interval_s"] is None  # on demand: once, at the end of nothing
    assert "time to train" not in _run("evaluate", str(tmp_path / "none.yaml"))[1]
    given = json.loads(_run("evaluate", str(write(tmp_path, _fixed("some", training=_BATCH))),
                            "--json")[1])
    assert given["time_to_train_days"] > 0 and given["cost_to_train_usd"] > 0
    spot = json.loads(_run("evaluate", str(write(tmp_path, _fixed(
        "spot-none", cluster=_SPOT, training=none))), "--json")[1])
    assert spot["time_to_train_days"] is None and spot["checkpoint_interval_s"] > 0


def test_on_demand_plans_show_no_spot_line(tmp_path: Path) -> None:
    spec = write(tmp_path, _fixed("demand"))
    assert "spot overhead" not in _run("evaluate", str(spec))[1]


def test_best_shows_a_spot_column_beside_tokens_per_s(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 's.db'}"
    data = tiny("mixed", cluster={**_SPOT, "pricing": ["on_demand", "spot"]}, training=_BATCH,
                objective=["time_to_train", "cost"], search={"sampler": "exhaustive"})
    assert _run("search", str(write(tmp_path, data)), "--storage", url, "--json")[0] == 0
    code, out, _ = _run("best", "mixed", "--storage", url)
    assert code == 0
    header, *rows = out.strip().splitlines()[1:]
    columns = header.split("  ")
    names = [c.strip() for c in columns if c.strip()]
    assert names[names.index("tokens/s") + 1] == "spot +%"
    assert any(" spot " in r and "+" in r for r in rows) and any(" - " in r for r in rows)


def test_memory_headroom_is_left_by_every_reported_plan(tmp_path: Path) -> None:
    """Without a headroom the best plan fills most of the usable HBM; with 60 % of it to
    leave free, every feasible plan leaves it, and the constraint is stored per trial."""
    url = f"sqlite:///{tmp_path / 'h.db'}"
    model = {**TINY_MODEL, "layers": 16, "hidden": 4096, "heads": 32, "seq_len": 4096}
    plan = {"tp": [1, 2, 4, 8], "pp": [1, 2], "micro_batch": [1, 2, 4, 8, 16],
            "recompute": ["none", "selective", "full"]}
    used = {}
    for name, limits in (("free", {}), ("headroom", {"memory_headroom": "60%"})):
        data = tiny(name, plan=plan, model=model, constraints=limits,
                    training={"global_batch": 64, "tokens": 1e9},
                    search={"sampler": "exhaustive"})
        assert _run("search", str(write(tmp_path, data)), "--storage", url, "--json")[0] == 0
        best = json.loads(_run("best", name, "--storage", url, "--json", "--top", "5")[1])
        used[name] = [b["memory_per_gpu_bytes"]["total"] / b["hbm_usable_bytes"]
                      for b in best["best"]]
        if limits:
            assert all(b["constraints"]["memory_headroom"] <= 0 for b in best["best"])
    assert max(used["free"]) > 0.4 and max(used["headroom"]) <= 0.4


def test_a_plan_that_breaks_the_headroom_says_by_how_much(tmp_path: Path) -> None:
    spec = write(tmp_path, _fixed("tight", constraints={"memory_headroom": "80 GiB"}))
    data = json.loads(_run("evaluate", str(spec), "--json")[1])
    assert not data["feasible"] and data["constraints"]["memory_headroom"] > 0
    assert any("constraints.memory_headroom = '80 GiB' asks 80.0 GiB" in v
               for v in data["violations"])
    assert "NOT feasible" in _run("explain", str(spec))[1]


def test_a_gpu_without_a_price_shows_no_price(tmp_path: Path) -> None:
    gpu = {"name": "mine", "peak_flops": "500 TFLOP/s", "hbm_capacity": "64 GiB",
           "hbm_bandwidth": "2 TB/s"}
    spec = write(tmp_path, _fixed("unpriced", cluster={"gpu": gpu, "nodes": 1,
                                                       "gpus_per_node": 8}))
    code, out, _ = _run("evaluate", str(spec))
    assert code == 0 and "cost per hour     no price" in out
    assert "GPU mine has no price: give cluster.gpu.price_per_hour" in out
    assert json.loads(_run("evaluate", str(spec), "--json")[1])["cost_per_hour_usd"] is None


def test_studies_counts_complete_trials_as_done(tmp_path: Path) -> None:
    study = new_study(storage_in(tmp_path), target=3)
    result = gpt3_result()
    add_trial(study, [result["tokens_per_s"]], result)
    add_trial(study, [1.0], None, state=optuna.trial.TrialState.PRUNED)
    add_trial(study, [1.0], None, state=optuna.trial.TrialState.PRUNED)
    code, out, _ = _run("studies", "--storage", f"sqlite:///{tmp_path / 'studies.db'}")
    row = out.strip().splitlines()[-1].split()
    assert code == 0 and row[2] == "1/3" and row[3:6] == ["1", "2", "0"]
    assert "1/3" in studies_text([{"name": "x", "objectives": ["throughput"], "trials": 3,
                                   "target_trials": 3, "complete": 1, "pruned": 2, "fail": 0,
                                   "running": 0, "best_values": None}], storage="s")


def test_new_studies_name_their_metrics(tmp_path: Path) -> None:
    study = new_study(storage_in(tmp_path), directions=("minimize", "minimize"))
    assert study.metric_names == ["time_to_train (days)", "cost (USD)"]
    assert metric_names(["throughput"]) == ["throughput (tokens/s)"]


@pytest.fixture(scope="module")
def codesign(tmp_path_factory: pytest.TempPathFactory) -> optuna.Study:
    """A two-objective study over two GPU types, on demand and spot, some plans over a
    budget (infeasible)."""
    tmp_path = tmp_path_factory.mktemp("codesign")
    url = f"sqlite:///{tmp_path / 'c.db'}"
    data = tiny("codesign", objective=["time_to_train", "cost"],
                cluster={"gpu": ["a100-80gb", "h100-80gb"], "nodes": [1, 2, 4, 8, 16, 32],
                         "gpus_per_node": 8, "pricing": ["on_demand", "spot"],
                         "revocations_per_node_hour": 0.05},
                training={"global_batch": 256, "tokens": 3e10},
                constraints={"max_hourly_cost": 700},
                search={"sampler": "random", "trials": 40, "seed": 1})
    code, _, err = _run("search", str(write(tmp_path, data)), "--storage", url, "--json")
    assert code == 0, err
    return optuna.load_study(study_name="codesign",
                             storage=open_storage(url, heartbeat_interval_s=None))


def _scatter(figure: Any) -> list[Any]:
    return [t for t in figure.data if t.mode == "markers"]


def test_the_pareto_plot_shows_feasible_plans_by_gpu_and_pricing(codesign: optuna.Study
                                                                  ) -> None:
    figure = pareto_plot(codesign, ["days", "USD"])
    assert figure is not None
    groups = {t.name for t in _scatter(figure)}
    assert groups <= {f"{g}, {p}" for g in ("a100-80gb", "h100-80gb")
                      for p in ("on demand", "spot")} and len(groups) >= 3
    shown = sum(len(t.x) for t in _scatter(figure))
    feasible = [t for t in codesign.trials if t.state.name == "COMPLETE"
                and all(v <= 0 for v in t.constraints.values())]
    infeasible = [t for t in codesign.trials if t.state.name == "COMPLETE"
                  and any(v > 0 for v in t.constraints.values())]
    assert shown == len(feasible) and infeasible  # the over-budget ones are left out
    front = next(t for t in figure.data if t.name == "Pareto front")
    assert list(front.x) == sorted(front.x) and list(front.y) == sorted(front.y, reverse=True)
    days = [x for t in _scatter(figure) for x in t.x]
    assert figure.layout.xaxis.type == ("log" if max(days) > 10 * min(days) else "linear")


def test_front_and_log_axis_rules() -> None:
    from tuner.views.pareto_figure import Point

    points = [Point(i, x, y, "g", "spot", "") for i, (x, y) in
              enumerate([(1, 9), (2, 4), (3, 5), (4, 1), (2, 8)])]
    minimize = [optuna.study.StudyDirection.MINIMIZE] * 2
    assert [p.trial for p in front_of(points, minimize)] == [0, 1, 3]
    assert wide([1, 11]) and not wide([1, 10]) and not wide([0, 100])


def test_the_reports_bars_and_cards_show_the_spot_overhead(codesign: optuna.Study) -> None:
    from studies import best_results

    results = best_results(codesign)
    spot = [r for r in results if r.result.cluster.pricing == "spot"]
    assert spot
    figure = time_figure(results).figure
    assert figure is not None
    bar = next(t for t in figure.data if t.name == "spot overhead (revocations, checkpoints)")
    for r, value in zip(results, bar.x, strict=True):
        expected = r.result.step_time_s * r.result.revocation_overhead \
            if r.result.cluster.pricing == "spot" else 0.0
        assert math.isclose(value, expected, rel_tol=1e-9, abs_tol=1e-12)
    html = build_report(codesign)
    assert "fig-pareto" in html and "Pareto front (feasible plans)" in html


def test_the_cluster_line_names_the_network_the_plan_was_timed_with(tmp_path: Path) -> None:
    """Co-design plans that differ only in their NIC read apart in evaluate, explain and
    search (the line named GPUs, nodes and pricing only)."""
    lines = []
    for nic in ("200 Gbit/s", "400 Gbit/s"):
        cluster = {"gpu": "h100-80gb", "nodes": 16, "gpus_per_node": 8,
                   "scale_out_bandwidth": nic}
        spec = write(tmp_path, _fixed(f"nic{nic[:3]}", cluster=cluster, training=_BATCH))
        out = _run("evaluate", str(spec))[1]
        lines.append(next(x for x in out.splitlines() if x.lstrip().startswith("cluster")))
    assert lines[0].endswith("(128 GPUs, on_demand, NIC 25 GB/s per GPU)")
    assert lines[1].endswith("(128 GPUs, on_demand, NIC 50 GB/s per GPU)")
