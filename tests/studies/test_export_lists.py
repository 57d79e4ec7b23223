"""`tuner export` (and the HTTP API's trials) of lists in a result: a cluster's pools and what
each pool does, and a plan's violations. CSV gets a column per pool field
(`pools[1].layers`, as the params' `cluster.pools[1].gpu`), never a Python repr; JSON keeps
lists as JSON lists."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

import cost
from search_spaces import parse_spec
from studies import export_trials

from .builders import EXAMPLES, add_trial, new_study, storage_in


def _pools_result() -> dict[str, Any]:
    """The PLAN_RESULT of the owned-A100-plus-rented example on 16 H200 spot nodes, as a
    pipeline across both pools."""
    data = yaml.safe_load((EXAMPLES / "llama3-70b-owned-a100-plus-rented.yaml").read_text())
    rented = data["cluster"]["pools"][1]
    rented.update(gpu="h200", nodes=16, pricing="spot")
    data["plan"] = {"tp": 4, "pp": 2, "micro_batch": 1, "recompute": "none",
                    "sequence_parallel": True, "zero": 1, "placement": "pipeline"}
    spec = parse_spec(data, file="pools.yaml", name="pools")
    inputs = spec.to_cost_inputs()
    return cost.plan_result(*inputs, cost.evaluate(*inputs)).as_dict()


@pytest.fixture(scope="module")
def result() -> dict[str, Any]:
    return _pools_result()


def _study(tmp_path: Path, result: dict[str, Any]) -> Any:
    study = new_study(storage_in(tmp_path))
    violated = {**result, "feasible": False,
                "violations": ["memory: 90 GiB; over 80 GiB", "tp=3 does not divide 64; a, b"]}
    add_trial(study, [1.0], result)
    add_trial(study, [1.0], violated, memory=1.0)
    return study


def test_csv_has_a_column_per_pool_field(tmp_path: Path, result: dict[str, Any]) -> None:
    rows = list(csv.DictReader(io.StringIO(export_trials(_study(tmp_path, result), "csv"))))
    row = rows[0]
    assert row["pools[0].gpu"] == "a100-80gb" and row["pools[1].gpu"] == "h200"
    assert float(row["pools[1].layers"]) == result["pools"][1]["layers"]
    assert row["cluster.pools[1].pricing"] == "spot"
    assert "pools" not in row and "cluster.pools" not in row
    assert not any("{'" in str(v) for v in row.values())  # no Python repr anywhere


def test_json_keeps_lists_as_lists(tmp_path: Path, result: dict[str, Any]) -> None:
    rows = json.loads(export_trials(_study(tmp_path, result), "json"))
    assert rows[0]["pools"] == result["pools"]
    assert rows[0]["cluster.pools"] == result["cluster"]["pools"]
    assert rows[1]["violations"] == ["memory: 90 GiB; over 80 GiB",
                                     "tp=3 does not divide 64; a, b"]
