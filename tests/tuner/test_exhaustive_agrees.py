"""Exhaustive enumeration, a brute-force loop over every plan with cost.evaluate, and the default
sampler agree on small spaces: the same best throughput, and for two objectives the same Pareto
front of feasible plans."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import optuna
import pytest

import cost
import cost.codec
from search_spaces import CLUSTER_KNOBS, Space
from studies import best_results
from tuner.engine.exhaustive import pareto_mask, sweep
from tuner.engine.search import SearchOptions, run_search

from .specs import each_valid_plan, gpt3_narrow, space, spec, tiny

SMALL_GPT3 = gpt3_narrow(name="small-gpt3", virtual_stages=[1, 2], micro_batch=[1, 2, 4],
                         recompute=["none", "selective", "full"], zero=[0, 1])
"""Nine layouts x 72 cheap-knob combinations, some of which do not fit in HBM."""

PARETO = tiny("pareto", plan={"tp": [1, 2, 4, 8], "pp": [1, 2, 4], "micro_batch": [1, 2, 4],
                              "recompute": ["none", "full"]},
              cluster={"gpu": ["a100-80gb", "h100-80gb"], "nodes": [1, 2, 4],
                       "gpus_per_node": 8},
              objective=["time_to_train", "cost"])


def every_plan(space: Space) -> list[tuple[dict[str, Any], cost.CostReport]]:
    """Every combination of every knob's values, one scalar cost.evaluate each, kept when it is
    structurally valid and fits in memory (no vectorisation, no Space.plans)."""
    clusters = [space.cluster(dict(zip(CLUSTER_KNOBS, combo, strict=True)))
                for combo in itertools.product(*(space.choices[f"cluster.{k}"]
                                                  for k in CLUSTER_KNOBS))]
    out = []
    for cluster in clusters:
        for v, report in each_valid_plan(space, cluster):
            if bool(report.fits):
                out.append(({**v, "gpus": int(cluster.gpus), "gpu": cluster.gpu.name}, report))
    return out


@pytest.fixture(scope="module")
def small_fitting() -> list[tuple[dict[str, Any], cost.CostReport]]:
    """every_plan of SMALL_GPT3, made once (a second or two of scalar evaluations) for the
    tests that only read it."""
    return every_plan(space(SMALL_GPT3))


def test_the_small_space_has_a_few_hundred_plans_some_too_big(
        small_fitting: list[tuple[dict[str, Any], cost.CostReport]]) -> None:
    small = space(SMALL_GPT3)
    assert 200 <= small.count() <= 1000
    assert 0 < len(small_fitting) < small.count()


def test_exhaustive_finds_the_brute_force_optimum(
        small_fitting: list[tuple[dict[str, Any], cost.CostReport]]) -> None:
    small = space(SMALL_GPT3)
    result = sweep(small)
    fitting = small_fitting
    brute = max(float(r.tokens_per_s) for _, r in fitting)
    best, knobs = result.best[0]
    assert best.feasible
    assert best.objectives[0] == pytest.approx(brute, rel=1e-9)
    assert result.evaluated == small.count()
    assert result.feasible == len(fitting)
    assert set(knobs) == set(small.searched)
    assert [c.objectives[0] for c, _ in result.best] == sorted(
        (c.objectives[0] for c, _ in result.best), reverse=True)


def test_tpe_finds_the_exhaustive_optimum() -> None:
    small = space(SMALL_GPT3)
    optimum = sweep(small).best[0][0].objectives[0]
    study = run_search(spec(SMALL_GPT3), "", optuna.storages.InMemoryStorage(),
                       SearchOptions(sampler="tpe", trials=60, seed=0))
    assert len(study.get_trials(states=(optuna.trial.TrialState.COMPLETE,))) == 60
    best = best_results(study)[0].as_dict()
    assert best["tokens_per_s"] == pytest.approx(optimum, rel=1e-9)
    assert best["feasible"] is True


def dominated(p: np.ndarray, points: np.ndarray, rel: float = 0.0) -> bool:
    """Some point no worse than p in both (minimised) objectives and better in one, by more
    than `rel` (relative: vectorised and scalar evaluations differ in the last bits)."""
    no_worse = np.all(points <= p * (1 + rel), axis=1)
    return bool(np.any(no_worse & np.any(points < p * (1 - rel), axis=1)))


def test_the_exhaustive_pareto_front_is_the_brute_force_front() -> None:
    pareto = space(PARETO)
    result = sweep(pareto)
    plans = every_plan(pareto)
    assert {p["gpu"] for p, _ in plans} == {"a100-80gb", "h100-80gb"}
    everything = np.array([(float(r.price.time_to_train_s) / 86400.0,
                            float(r.price.cost_to_train_usd)) for _, r in plans])
    front = np.array([c.objectives for c, _ in result.best])
    assert len(front) >= 2
    for candidate, knobs in result.best:
        assert candidate.feasible
        assert not dominated(np.array(candidate.objectives), everything, rel=1e-9)
        assert knobs["cluster.gpu"] in ("a100-80gb", "h100-80gb")
    expected = sorted({tuple(p) for p in everything if not dominated(p, everything)})
    np.testing.assert_allclose(np.array(sorted(map(tuple, front))), np.array(expected),
                               rtol=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_pareto_mask_is_the_brute_force_non_dominated_set(seed: int) -> None:
    rng = np.random.default_rng(seed)
    points = rng.integers(0, 12, size=(200, 2)).astype(float)  # many ties and duplicates
    mask = pareto_mask(points)
    kept = {tuple(p) for p in points[mask]}
    assert len(kept) == int(mask.sum())  # one of each duplicate
    assert kept == {tuple(p) for p in points if not dominated(p, points)}


def test_pareto_mask_of_one_point_and_of_a_line() -> None:
    assert pareto_mask(np.array([[1.0, 2.0]])).tolist() == [True]
    line = np.array([[3.0, 1.0], [1.0, 3.0], [2.0, 2.0], [2.0, 2.5]])
    assert pareto_mask(line).tolist() == [True, True, True, False]


def test_an_exhaustive_search_stores_its_study_in_few_commits(tmp_path: Any) -> None:
    """Each commit of a SQLite storage waits for the disk (5 ms on the project's machine): an
    exhaustive search made 24 on its critical path, one per attribute and per trial; its
    study's attributes and the sweep's plans are each one transaction now (reads commit
    too, writing nothing), and they read back as before."""
    import sqlalchemy.event

    from studies import open_storage, swept, target_trials

    storage = open_storage(f"sqlite:///{tmp_path / 's.db'}", heartbeat_interval_s=None)
    writes: list[str] = []  # the statements that change the file since the last commit
    written: list[int] = []  # one per commit that wrote something
    sqlalchemy.event.listen(
        storage.engine, "before_cursor_execute",
        lambda _c, _cur, sql, *_: writes.append(sql)
        if sql.lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE")) else None)
    sqlalchemy.event.listen(
        storage.engine, "commit",
        lambda _c: (written.append(len(writes)), writes.clear()) if writes else None)
    study = run_search(spec(SMALL_GPT3), "", storage, SearchOptions(sampler="exhaustive"))
    best = sweep(space(SMALL_GPT3)).best
    assert len(study.trials) == len(best) >= 1
    assert target_trials(study) == len(best) and swept(study) is not None
    assert len(written) <= 4, written  # the study, its attributes, settings, the sweep


def test_exhaustive_searches_started_at_once_store_the_sweep_once(tmp_path: Any) -> None:
    """Three `tuner search` processes on one new study: each sweeps, and each reads what is
    stored and writes what is missing as the study's only writer (studies.exclusively: on
    SQLite one transaction that takes the write lock first, on PostgreSQL an advisory lock, on
    a journal an flock of its file), so the later ones find the first's plans and add none
    (before, each read before any had written and the study held its best plans two or three
    times). On SQLite; tests/studies/test_exclusive.py tests the lock of each storage."""
    import subprocess
    import sys

    from studies import open_storage

    from .specs import write

    path = write(tmp_path, SMALL_GPT3)
    url = f"sqlite:///{tmp_path / 'at-once.db'}"
    command = [sys.executable, "-m", "tuner", "search", str(path), "--sampler", "exhaustive",
               "--storage", url, "--json"]
    runs = [subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                             text=True) for _ in range(3)]
    for run in runs:
        _, err = run.communicate(timeout=300)
        assert run.returncode == 0, err
    storage = open_storage(url, heartbeat_interval_s=None)
    study = optuna.load_study(study_name="small-gpt3", storage=storage)
    keys = [tuple(sorted(t.params.items())) for t in study.trials]
    assert len(keys) == len(set(keys)) == len(sweep(space(SMALL_GPT3)).best)
