"""`sampler: auto`: the plans of a space counted without building them, the sweep chosen when
its estimated time fits the budget and Optuna (TPE, each trial sweeping what fits) otherwise;
what was chosen is reported and stored."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest
from click.testing import CliRunner

from tuner.cli import main
from tuner.engine.auto import choose, count_plans, measure_rate

from .specs import space, tiny, write

CODESIGN = tiny("auto-codesign", cluster={"gpu": ["a100-80gb", "h100-80gb"], "nodes": [1, 2],
                                          "gpus_per_node": 8},
                objective=["time_to_train", "cost"],
                search={"trials": 6, "seed": 0, "exhaustive_budget": 1e-6})


def test_the_count_is_the_spaces_valid_plans() -> None:
    small = space(CODESIGN)
    plans, counted_all, most = count_plans(small)
    assert counted_all and plans == small.count() and 0 < most <= plans
    partial, complete, _ = count_plans(small, limit=1)
    assert not complete and 1 < partial <= plans


def test_auto_sweeps_within_the_budget_and_samples_beyond_it() -> None:
    small = space(CODESIGN)
    assert measure_rate(small) > 0
    assert choose(small, budget_s=60.0).sampler == "exhaustive"
    beyond = choose(small, budget_s=1e-6)
    assert beyond.sampler == "tpe" and beyond.estimate_s > beyond.budget_s


def test_a_space_over_budget_runs_tpe_sweeping_each_clusters_plans(tmp_path: Path) -> None:
    path = write(tmp_path, CODESIGN)
    url = f"sqlite:///{tmp_path / 'a.db'}"
    result = CliRunner().invoke(main, ["search", str(path), "--storage", url, "--json"])
    assert result.exit_code == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["sampler"] == "tpe" and out["requested_sampler"] == "auto"
    assert out["optimal"] is False and out["trials"] == 6 and out["evaluated"] > 0
    assert result.stderr == ""  # no progress bar off a terminal
    settings = optuna.load_study(study_name="auto-codesign", storage=url).user_attrs["search"]
    assert {"tp", "pp", "micro_batch"} <= set(settings["swept"])  # a trial: one cluster
    assert settings["auto"]["sampler"] == "tpe"
    text = CliRunner().invoke(main, ["search", str(path), "--storage", url, "--trials", "1"])
    assert "with tpe (auto: sweeping" in text.stdout.splitlines()[0]


def test_counting_honours_a_stop_request() -> None:
    """Ctrl-C while `auto` counts a large space stops it (it counted on, deaf to the signal,
    for minutes on a mixed-cluster space of 1e10 plans)."""
    from tuner.engine.interrupt import Interrupted, Stop

    stop = Stop()
    stop.request()
    with pytest.raises(Interrupted):
        count_plans(space(CODESIGN), stop=stop)


def test_counting_stops_at_its_time_budget() -> None:
    """Counting that alone outlasts the sweep's budget proves the sweep does not fit: it stops
    (a lower bound) rather than counting every cluster of a huge space."""
    plans, counted_all, most = count_plans(space(CODESIGN), seconds=0.0)
    assert not counted_all and 0 < most <= plans < space(CODESIGN).count()


def test_a_count_cut_short_estimates_at_least_the_budget(monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """A count stopped by its time limit has few plans: the estimate still says the sweep
    takes more than the budget (the headline read 'takes more than 13 s, over the 30 s
    budget')."""
    import tuner.engine.auto as auto

    monkeypatch.setattr(auto, "measure_rate", lambda _space: 1e6)
    monkeypatch.setattr(auto, "count_plans", lambda *_a, **_k: (10, False, 10))
    chosen = auto.choose(space(CODESIGN), budget_s=30.0)
    assert chosen.sampler == "tpe" and chosen.estimate_s >= 30.0


def test_resume_begins_a_study_stopped_while_auto_counted(tmp_path: Path) -> None:
    """Ctrl-C while `auto` counts leaves the study made (it opens beside the count) with no
    settings and no trials: `tuner resume` begins its search as `tuner search` would (it said
    'no trial has run yet: ... tuner resume ... runs them', and ran none)."""
    from search_spaces import load_spec
    from studies import began, create_or_continue, open_storage

    path = write(tmp_path, CODESIGN)
    url = f"sqlite:///{tmp_path / 'a.db'}"
    spec = load_spec(path)
    made = create_or_continue(open_storage(url), spec, path.read_text(encoding="utf-8"),
                              directions=["minimize", "minimize"], target_trials=None)
    assert not began(made)
    result = CliRunner().invoke(main, ["resume", "auto-codesign", "--storage", url, "--json"])
    assert result.exit_code == 0, result.stderr
    study = optuna.load_study(study_name="auto-codesign", storage=url)
    assert began(study) and study.user_attrs["search"]["requested"] == "auto"
    assert len(study.trials) == 6  # the spec's trials, as `tuner search` runs them


def test_measuring_the_rate_looks_at_clusters_for_a_bounded_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A space of many clusters with few plans each yields its first grid only once every
    cluster is looked at: measuring its rate built all 44,000 clusters here (nodes 1 to 125,000:
    four minutes before POST /v1/studies answered, the server's admission held); it now stops
    looking after _SCAN_S and measures the clusters looked at by then."""
    import yaml

    import tuner.engine.auto as auto
    from search_spaces import Space, parse_spec

    data = yaml.safe_load((Path(__file__).resolve().parents[2] / "search_spaces" / "examples"
                           / "llama3-70b-budget-codesign.yaml").read_text(encoding="utf-8"))
    data["cluster"]["nodes"] = {"min": 1, "max": 2000}
    data["cluster"]["gpu"] = ["a100-80gb", "h100-80gb", "h200", "b200", "mi300x", "v100-16gb",
                              "v100-32gb", "a100-40gb", "gb200", "b300", "p100"]
    wide = Space.from_spec(parse_spec(data, file="wide.yaml"))
    built = 0
    build = Space.cluster

    def counted(self: Space, values: dict[str, object]) -> object:
        nonlocal built
        built += 1
        return build(self, values)

    monkeypatch.setattr(Space, "cluster", counted)
    monkeypatch.setattr(auto, "_SCAN_S", 0.05, raising=False)
    assert measure_rate(wide) > 0
    assert built < 2000 * 11 * 2 // 2
