"""What each pool of a cluster of several GPU types does, as `tuner evaluate` writes it: where
balanced shares do not divide the batch, some replicas do one micro-batch fewer, and the line
says so (it showed 5 replicas x 10, 258 micro-batches for a batch of 256)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

tuner_main: Any = __import__("tuner.cli", fromlist=["main"]).main

SPEC = {
    "name": "uneven", "model": "llama3-8b",
    "training": {"global_batch": 256, "precision": "bf16"},
    "cluster": {"pools": [
        {"name": "owned", "gpu": "a100-80gb", "nodes": 1, "gpus_per_node": 5,
         "price_per_gpu_hour": 0},
        {"name": "rented", "gpu": "h100-80gb", "nodes": 1, "gpus_per_node": 8}]},
    "plan": {"tp": 1, "pp": 1, "micro_batch": 1, "recompute": "full", "zero": 1,
             "placement": "data"},
}


def test_replicas_doing_one_fewer_are_shown(tmp_path: Path) -> None:
    path = tmp_path / "uneven.yaml"
    path.write_text(yaml.safe_dump(SPEC))
    text = CliRunner().invoke(tuner_main, ["evaluate", str(path)])
    assert text.exit_code == 0, text.output
    assert "data: 3 replicas x 10 + 2 x 9 micro-batches, 19 % of the samples" in text.output
    assert "data: 8 replicas x 26 micro-batches, 81 % of the samples" in text.output
    out = json.loads(CliRunner().invoke(tuner_main, ["evaluate", str(path), "--json"]).stdout)
    done = sum(p["replicas"] * p["micro_batches"] - p["fewer"] for p in out["pools"])
    assert done == 256
