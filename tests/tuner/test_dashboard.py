"""`tuner dashboard`: the message without optuna-dashboard, and the server's arguments (no
server is started)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.studies.builders import add_trial, gpt3_result, new_study, storage_in
from tuner.cli import main
from tuner.cli import report as commands_report
from tuner.cli.dashboard import INSTALL_HINT, server_arguments, study_address


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def storage(tmp_path: Path) -> str:
    study = new_study(storage_in(tmp_path))
    add_trial(study, [1.0], gpt3_result())
    return f"sqlite:///{tmp_path / 'studies.db'}"


def test_not_installed_says_how_to_install(storage: str,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(commands_report, "dashboard_installed", lambda: False)
    code, out, err = _run("dashboard", "gpt3", "--storage", storage)
    assert code == 2 and out == ""
    assert err.strip().splitlines() == [
        "error: optuna-dashboard is not installed; pip install 'cluster-tuner[dashboard]'"]
    assert INSTALL_HINT in err


def test_server_arguments() -> None:
    url = "postgresql+psycopg://tuner:secret@db:5432/tuner"
    assert server_arguments(url, host="0.0.0.0", port=9000) == {
        "storage": url, "host": "0.0.0.0", "port": 9000}
    assert study_address(host="localhost", port=8080, study_id=3) == \
        "http://localhost:8080/dashboard/studies/3"


def test_runs_the_server_on_the_study_storage(storage: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[dict[str, Any]] = []
    monkeypatch.setattr(commands_report, "dashboard_installed", lambda: True)
    monkeypatch.setattr(commands_report, "start_server", started.append)
    code, _, err = _run("dashboard", "gpt3", "--storage", storage, "--port", "8099")
    assert code == 0, err
    assert started == [{"storage": storage, "host": "127.0.0.1", "port": 8099}]
    assert "http://127.0.0.1:8099/dashboard/studies/" in err


def test_unknown_study_starts_nothing(storage: str, monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[dict[str, Any]] = []
    monkeypatch.setattr(commands_report, "dashboard_installed", lambda: True)
    monkeypatch.setattr(commands_report, "start_server", started.append)
    code, _, err = _run("dashboard", "nope", "--storage", storage)
    assert code == 2 and "no study named 'nope'" in err and started == []
