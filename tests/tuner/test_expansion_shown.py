"""A cluster with a memory expansion tier (CXL or host memory: COMET's question) says so
wherever a cluster is named: tuner evaluate/explain's cluster line and the cluster column of
tuner best and the report, so that two plans on clusters that differ only by their tier (as
the COMET example's best plans do: one on none, the next offloading into 512 GiB) are told
apart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from click.testing import CliRunner

from cost import ClusterSummary
from tuner.views.studies import cluster_summary
from tuner.views.text import cluster_line

from .specs import spec, tiny, write

tuner_main: Any = __import__("tuner.cli", fromlist=["main"]).main


def _expanded(capacity: str = "512 GiB") -> dict[str, Any]:
    return tiny("expanded", plan={"tp": 8, "micro_batch": 1, "offload": "optimizer"},
                cluster={"gpu": "h100-80gb", "nodes": 1, "gpus_per_node": 8,
                         "expansion": {"capacity": capacity, "bandwidth": "32 GB/s"}})


def _summary(data: dict[str, Any]) -> ClusterSummary:
    return ClusterSummary.of(spec(data).to_cost_inputs()[1])


def test_the_cluster_line_names_the_tier(tmp_path: Path) -> None:
    result = CliRunner().invoke(tuner_main, ["evaluate", str(write(tmp_path, _expanded()))])
    assert result.exit_code == 0, result.output
    assert ("cluster           1 x 8 h100-80gb (8 GPUs, on_demand, NIC 50 GB/s per GPU, "
            "512 GiB expansion at "
            "32 GB/s per GPU)") in result.output


def test_the_cluster_column_names_the_tier() -> None:
    assert cluster_summary(_summary(_expanded())) == "1x8 h100-80gb +512 GiB at 32 GB/s"
    assert cluster_summary(_summary(_expanded("0 GiB"))) == "1x8 h100-80gb"
    assert "expansion" not in cluster_line(_summary(_expanded("0 GiB")).as_dict())
