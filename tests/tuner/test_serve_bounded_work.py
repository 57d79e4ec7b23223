"""Work a request starts before it is refused is bounded in time: a search space sent to
/v1/evaluate is counted for at most COUNT_S seconds before its 422 (the app in process, by
FastAPI's TestClient, so that the bound can be made small)."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
import yaml
from fastapi.testclient import TestClient

from tuner.serve import service
from tuner.serve.app import create_app
from tuner.serve.config import ServeConfig

CODESIGN = (Path(__file__).resolve().parents[2] / "search_spaces" / "examples"
            / "llama3-70b-budget-codesign.yaml")


@pytest.fixture
def client(tmp_path: Path) -> TestClient:
    url = f"sqlite:///{tmp_path / 'studies.db'}"
    storage = optuna.storages.RDBStorage(url)
    return TestClient(create_app(ServeConfig(storage_url=url), storage))  # no lifespan


def test_a_search_space_sent_to_evaluate_is_counted_for_a_bounded_time(
        client: TestClient, monkeypatch: pytest.MonkeyPatch) -> None:
    """Counted without a time bound, nodes 1 to 125,000 over a dozen GPUs took 8 minutes to
    refuse; here the bound is 0 s, so counting stops after the first cluster, and the count
    said is a lower bound (the whole space holds 188,550 valid plans)."""
    monkeypatch.setattr(service, "COUNT_S", 0.0)
    spec = yaml.safe_load(CODESIGN.read_text(encoding="utf-8"))
    answer = client.post("/v1/evaluate", json=spec)
    assert answer.status_code == 422
    error = answer.json()["error"]
    assert "the spec is a search space (at least " in error, error
    assert "188,550" not in error
