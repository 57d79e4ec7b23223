"""`tuner studies`, `tuner best` and `tuner export` through CliRunner on a study in tmp_path."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.studies.builders import add_trial, gpt3_result, new_study, storage_in
from tuner.cli import main

from .specs import tiny, write


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def storage(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A storage with study 'gpt3' (throughput, 3 trials) and 'pareto' (time and cost)."""
    tmp_path = tmp_path_factory.mktemp("cli")
    base, mb2 = gpt3_result(), gpt3_result(micro_batch=2)
    study = new_study(storage_in(tmp_path))
    add_trial(study, [base["tokens_per_s"]], base)
    add_trial(study, [mb2["tokens_per_s"]], mb2, params={"micro_batch": 2})
    add_trial(study, [1e9], base, memory=1.0)
    pareto = new_study(storage_in(tmp_path), name="pareto",
                       directions=("minimize", "minimize"))
    add_trial(pareto, [10.0, 300.0], base)
    add_trial(pareto, [20.0, 100.0], mb2)
    return f"sqlite:///{tmp_path / 'studies.db'}"


def test_studies_lists_both(storage: str) -> None:
    code, out, _ = _run("studies", "--storage", storage)
    assert code == 0 and "gpt3" in out and "pareto" in out and "3/10" in out


def test_studies_json(storage: str) -> None:
    code, out, _ = _run("studies", "--storage", storage, "--json")
    listed = {s["name"]: s for s in json.loads(out)}
    assert code == 0 and listed["gpt3"]["complete"] == 3
    assert listed["pareto"]["directions"] == ["minimize", "minimize"]


def test_storage_comes_from_the_environment(storage: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNER_STORAGE", storage)
    code, out, _ = _run("studies", "--json")
    assert code == 0 and len(json.loads(out)) == 2


def test_best_table(storage: str) -> None:
    code, out, _ = _run("best", "gpt3", "--storage", storage, "--top", "2")
    assert code == 0
    lines = out.strip().splitlines()
    assert "step s" in lines[1] and "MFU %" in lines[1] and "$ to train" in lines[1]
    assert "mb=2" in lines[2] and "8x8 a100-80gb" in lines[2] and "mb=1" in lines[3]


def test_best_json_is_plan_results(storage: str) -> None:
    code, out, _ = _run("best", "gpt3", "--storage", storage, "--json")
    data = json.loads(out)
    assert code == 0 and data["study"] == "gpt3" and len(data["best"]) == 1
    best = data["best"][0]
    assert best["trial"] == 1 and best["plan"]["micro_batch"] == 2
    assert {"step_time_s", "mfu", "memory_per_gpu_bytes", "cluster", "value"} <= set(best)


def test_best_of_a_pareto_study_shows_the_front(storage: str) -> None:
    code, out, _ = _run("best", "pareto", "--storage", storage)
    assert code == 0 and "Pareto front, 2 plans" in out
    data = json.loads(_run("best", "pareto", "--storage", storage, "--json")[1])
    assert [b["value"] for b in data["best"]] == [[10.0, 300.0], [20.0, 100.0]]


def test_export_csv_to_stdout(storage: str) -> None:
    code, out, _ = _run("export", "gpt3", "--storage", storage)
    rows = list(csv.DictReader(io.StringIO(out)))
    assert code == 0 and len(rows) == 3 and rows[1]["plan.micro_batch"] == "2"


def test_export_json_to_a_file(storage: str, tmp_path: Path) -> None:
    path = tmp_path / "trials.json"
    code, out, _ = _run("export", "gpt3", "--json", "--out", str(path), "--storage", storage)
    assert code == 0 and not out
    assert [r["number"] for r in json.loads(path.read_text(encoding="utf-8"))] == [0, 1, 2]


@pytest.mark.parametrize("command", ["best", "export"])
def test_a_missing_study_exits_2_with_one_line(storage: str, command: str) -> None:
    code, out, err = _run(command, "nope", "--storage", storage)
    assert code == 2 and not out
    assert len(err.strip().splitlines()) == 1 and "no study named 'nope'" in err


def test_a_missing_storage_file_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "none.db"
    code, _, err = _run("studies", "--storage", f"sqlite:///{path}")
    assert code == 2 and "no file" in err and not path.exists()


@pytest.mark.parametrize("url", ["postgresql+psycopg://user:secret@127.0.0.1:9/studies",
                                 "mysql+pymysql://user:secret@127.0.0.1:9/studies"])
def test_a_server_that_does_not_answer_exits_2_without_the_password(url: str) -> None:
    for args in (["studies", "--storage", url], ["best", "x", "--storage", url, "--json"]):
        code, out, err = _run(*args)
        assert code == 2 and not out
        assert "secret" not in err and "***" in err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_an_in_memory_database_is_refused(tmp_path: Path) -> None:
    spec = write(tmp_path, tiny("mem", search={"sampler": "random", "trials": 2}))
    for url in ("sqlite:///:memory:", "sqlite://"):
        code, out, err = _run("search", str(spec), "--storage", url)
        assert code == 2 and not out and "in-memory database" in err
        assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("command", [["evaluate"], ["search"], ["search", "--json"],
                                     ["calibrate", "--out", "p.yaml"]])
def test_a_directory_given_as_a_spec_is_one_line(tmp_path: Path, command: list[str]) -> None:
    """Every command that reads a file it is given says it the same way; `tuner search`
    and `tuner calibrate` said it through click ("invalid value for 'SPEC': File ... is a
    directory; see `tuner search --help`")."""
    code, out, err = _run(command[0], str(tmp_path), *command[1:])
    assert code == 2 and not out
    assert err.strip() == f"error: {tmp_path}: is a directory; give a file"


def test_studies_counts_trials_with_thousands_separators() -> None:
    """As every other count the commands print (`3,960 plans evaluated`)."""
    from tuner.views.studies import studies_text

    text = studies_text([{"name": "big", "objectives": ["throughput"], "trials": 25000,
                          "target_trials": 20000, "complete": 12345, "pruned": 11000,
                          "fail": 1500, "running": 155, "best_values": None}], storage="s")
    assert text.splitlines()[-1].split()[2:7] == ["12,345/20,000", "12,345", "11,000",
                                                   "1,500", "155"]


def test_studies_shows_best_values_as_the_other_tables_do() -> None:
    """10,408 tokens/s as `tuner best` shows it, not 1.041e+04; two objectives apart."""
    from tuner.views.studies import studies_text

    def best(values: list[float]) -> str:
        text = studies_text([{"name": "s", "objectives": ["time_to_train", "cost"],
                              "target_trials": 1, "complete": 1, "pruned": 0, "fail": 0,
                              "running": 0, "best_values": values}], storage="s")
        return text.splitlines()[-1].split("  ")[-1].strip()

    assert best([10407.885]) == "10,408"
    assert best([333.63, 1757642.4]) == "333.6 / 1,757,642"
    assert best([0.012345]) == "0.01235"
