"""A study resumes as it was: the sampler and its settings are stored and used again by
`tuner resume` (seeded) and `tuner worker` (unseeded); an exhaustive search run again adds
nothing; a study whose resolved problem changed (catalog, calibration profile, cost model) is
refused, naming what changed; after a crash `tuner search` continues the target."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import optuna
import pytest
from click.testing import CliRunner

import cost
import studies.identity
import tuner.engine.search
from search_spaces import gpu_catalog, load_spec
from studies import close_storage, open_storage, set_target_trials
from tuner.engine.search import SearchOptions, prepare_search

from .specs import tiny, write
from .stored import database_digest

tuner_main: Any = __import__("tuner.cli", fromlist=["main"]).main


def _run(*args: str) -> Any:
    return CliRunner().invoke(tuner_main, list(args))


def _json(*args: str) -> Any:
    result = _run(*args, "--json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 's.db'}"


def _trials(url: str, name: str) -> list[optuna.trial.FrozenTrial]:
    return optuna.load_study(study_name=name, storage=url).get_trials()


def _record_samplers(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int | None]]:
    made: list[tuple[str, int | None]] = []
    real = tuner.engine.search.make_sampler

    def spy(name: str, *, seed: int | None, objectives: int) -> Any:
        made.append((name, seed))
        return real(name, seed=seed, objectives=objectives)

    monkeypatch.setattr(tuner.engine.search, "make_sampler", spy)
    return made


def test_resume_and_worker_use_the_stored_sampler(tmp_path: Path, url: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, tiny("kept", search={"sampler": "tpe", "trials": 6, "seed": 0}))
    made = _record_samplers(monkeypatch)
    _json("search", str(path), "--sampler", "nsga2", "--seed", "7", "--timeout", "0",
          "--storage", url)
    _json("resume", "kept", "--storage", url)
    set_target_trials(optuna.load_study(study_name="kept", storage=url), 9)
    _json("worker", "kept", "--storage", url)
    assert made == [("nsga2", 7), ("nsga2", 7), ("nsga2", None)]
    settings = optuna.load_study(study_name="kept", storage=url).user_attrs["search"]
    assert settings["sampler"] == "nsga2" and settings["seed"] == 7


def test_a_resumed_seeded_study_proposes_what_an_uninterrupted_one_does(tmp_path: Path,
                                                                        url: str) -> None:
    path = write(tmp_path, tiny("seeded", search={"sampler": "random", "trials": 12,
                                                  "seed": 3}))
    other = f"sqlite:///{tmp_path / 'other.db'}"
    _json("search", str(path), "--storage", other)
    _json("search", str(path), "--timeout", "0", "--storage", url)
    _json("resume", "seeded", "--storage", url)
    assert [t.params for t in _trials(url, "seeded")] == \
        [t.params for t in _trials(other, "seeded")]


def test_an_exhaustive_search_run_again_adds_nothing(tmp_path: Path, url: str) -> None:
    path = write(tmp_path, tiny("twice"))
    first = _json("search", str(path), "--sampler", "exhaustive", "--storage", url)
    again = _run("search", str(path), "--sampler", "exhaustive", "--storage", url)
    assert again.exit_code == 0 and "already swept exhaustively" in again.stderr
    assert len(_trials(url, "twice")) == first["trials"]
    resumed = _json("resume", "twice", "--storage", url)
    assert resumed["trials"] == first["trials"] and resumed["optimal"] is True


def test_a_swept_study_searched_again_is_left_as_it_was(tmp_path: Path, url: str) -> None:
    """A search that adds nothing rewrote the study's `search` settings: `auto`'s rate
    measured anew, or the seed of the command line."""
    path = write(tmp_path, tiny("swept", search={"trials": 5}))
    first = _json("search", str(path), "--storage", url)
    assert first["sampler"] == "exhaustive"
    before = database_digest(tmp_path / "s.db")
    for again in (("search", str(path)), ("search", str(path), "--sampler", "exhaustive",
                                          "--seed", "5"), ("resume", "swept")):
        result = _run(*again, "--storage", url)
        assert result.exit_code == 0 and result.stderr.splitlines()[0] == (
            f"study swept: already swept exhaustively ({first['evaluated']:,} plans); nothing "
            "to add"), again
        assert database_digest(tmp_path / "s.db") == before, again
    spec = load_spec(path)  # the HTTP API's POST /v1/studies of the same spec
    storage = open_storage(url, heartbeat_interval_s=None)
    prepare_search(spec, path.read_text(encoding="utf-8"), storage, SearchOptions())
    close_storage(storage)
    assert database_digest(tmp_path / "s.db") == before


def test_auto_sweeps_a_small_space_and_says_it_is_optimal(tmp_path: Path, url: str) -> None:
    path = write(tmp_path, tiny("small", search={"trials": 5}))
    out = _json("search", str(path), "--storage", url)
    assert out["sampler"] == "exhaustive" and out["requested_sampler"] == "auto"
    assert out["optimal"] is True and out["evaluated"] >= out["feasible_plans"] > 0
    text = _run("best", "small", "--storage", url)
    assert text.exit_code == 0 and "small: best plans" in text.stdout


def _changed_catalog() -> dict[str, Any]:
    gpus = dict(gpu_catalog())
    gpus["a100-80gb"] = replace(gpus["a100-80gb"], hbm_bandwidth_bytes_per_s=1.5e12)
    return gpus


def test_a_changed_catalog_entry_is_refused(tmp_path: Path, url: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, tiny("catalog", search={"sampler": "random", "trials": 3}))
    _json("search", str(path), "--storage", url)
    monkeypatch.setattr(studies.identity, "gpu_catalog", _changed_catalog)
    for args in (["search", str(path)], ["resume", "catalog"], ["worker", "catalog"]):
        result = _run(*args, "--storage", url)
        assert result.exit_code == 2, result.output
        assert "catalog's gpus.a100-80gb.hbm_bandwidth_bytes_per_s differs" in result.stderr
        assert "another `name:`" in result.stderr
    kept = _trials(url, "catalog")  # nothing was added
    assert len([t for t in kept if t.state == optuna.trial.TrialState.COMPLETE]) == 3


def test_a_changed_calibration_profile_is_refused(tmp_path: Path, url: str) -> None:
    profile = tmp_path / "profile.yaml"
    profile.write_text("efficiency: {gemm_fraction: 0.7}\n", encoding="utf-8")
    data = tiny("profiled", search={"sampler": "random", "trials": 3})
    path = write(tmp_path, {**data, "calibration": "profile.yaml"})
    _json("search", str(path), "--storage", url)
    profile.write_text("efficiency: {gemm_fraction: 0.5}\n", encoding="utf-8")
    result = _run("search", str(path), "--storage", url)
    assert result.exit_code == 2
    assert "calibration profile's gemm_fraction differs: stored 0.7, now 0.5" in result.stderr


def test_a_changed_cost_model_is_refused(tmp_path: Path, url: str,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, tiny("model", search={"sampler": "random", "trials": 3}))
    _json("search", str(path), "--storage", url)
    monkeypatch.setattr(studies.identity, "cost_model_version", lambda: "0+000000000000")
    result = _run("resume", "model", "--storage", url)
    assert result.exit_code == 2
    assert f"the cost model's code changed: version {cost.COST_MODEL_VERSION}+" in result.stderr
    assert _run("best", "model", "--storage", url).exit_code == 0  # still readable


def test_the_cost_model_version_ignores_docstrings() -> None:
    version = studies.identity.cost_model_version()
    prefix = f"{cost.COST_MODEL_VERSION}+"
    assert version.startswith(prefix) and len(version) == len(prefix) + 12


def test_search_after_a_crash_continues_the_target(tmp_path: Path, url: str) -> None:
    path = write(tmp_path, tiny("crash", search={"sampler": "random", "trials": 8, "seed": 0}))
    _json("search", str(path), "--trials", "3", "--storage", url)
    set_target_trials(optuna.load_study(study_name="crash", storage=url), 8)  # as if killed
    result = _run("search", str(path), "--storage", url, "--json")
    assert result.exit_code == 0
    assert "continuing to its target of 8 trials (3 completed)" in result.stderr
    assert json.loads(result.stdout)["trials"] == 8
    more = _run("search", str(path), "--trials", "2", "--storage", url, "--json")
    assert json.loads(more.stdout)["trials"] == 10 and "adding 2" in more.stderr


def test_a_moved_calibration_profile_with_the_same_contents_continues(tmp_path: Path,
                                                                      url: str) -> None:
    """The study holds the profile's contents, not its file's name: a profile renamed (or
    moved) with the same numbers, and the spec pointed at its new place, is the same problem,
    and the search continues the study; new numbers in the new place are still refused."""
    (tmp_path / "old.yaml").write_text("efficiency: {gemm_fraction: 0.7}\n", encoding="utf-8")
    data = tiny("moved", search={"sampler": "random", "trials": 3})
    path = write(tmp_path, {**data, "calibration": "old.yaml"})
    _json("search", str(path), "--storage", url)
    (tmp_path / "profiles").mkdir()
    (tmp_path / "old.yaml").rename(tmp_path / "profiles" / "new.yaml")
    path = write(tmp_path, {**data, "calibration": "profiles/new.yaml",
                            "search": {"sampler": "random", "trials": 5}})
    _json("search", str(path), "--storage", url)
    done = [t for t in _trials(url, "moved") if t.state == optuna.trial.TrialState.COMPLETE]
    assert len(done) == 3 + 5  # continued, not refused
    _json("resume", "moved", "--storage", url)  # the stored spec names the new place
    (tmp_path / "profiles" / "new.yaml").unlink()
    gone = _run("resume", "moved", "--storage", url)
    assert gone.exit_code == 2 and "new.yaml" in gone.stderr
    (tmp_path / "profiles" / "new.yaml").write_text("efficiency: {gemm_fraction: 0.7}\n",
                                                    encoding="utf-8")
    (tmp_path / "profiles" / "new.yaml").write_text("efficiency: {gemm_fraction: 0.5}\n",
                                                    encoding="utf-8")
    result = _run("search", str(path), "--storage", url)
    assert result.exit_code == 2
    assert "calibration profile's gemm_fraction differs: stored 0.7, now 0.5" in result.stderr


def test_a_study_stored_with_the_profile_name_in_its_problem_continues(tmp_path: Path,
                                                                      url: str) -> None:
    """Studies made before the problem left out the profile's file name stored it (and a
    digest over it, and a spec digest over it): they continue as before."""
    data = tiny("older", search={"sampler": "random", "trials": 2})
    path = write(tmp_path, data)
    _json("search", str(path), "--storage", url)
    before = len(_trials(url, "older"))
    study = optuna.load_study(study_name="older", storage=url)
    resolved = json.loads(study.user_attrs["problem_json"])
    assert "calibration" not in resolved["spec"]
    resolved["spec"]["calibration"] = None  # as an earlier tuner stored it
    study.set_user_attr("problem_json", json.dumps(resolved, sort_keys=True))
    study.set_user_attr("problem_digest", studies.identity.problem_digest(resolved))
    study.set_user_attr("spec_digest", "0" * 64)
    _json("search", str(path), "--storage", url)  # continued, not refused
    assert len(_trials(url, "older")) > before
