"""The command line on clusters of several GPU types: evaluate, explain and their JSON say
what each pool does and which one bounds the step; a list of clusters is refused in one line."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from tuner.cli import main

SPEC = {"name": "mixed", "model": "llama3-70b",
        "training": {"global_batch": 512, "tokens": 1e12, "precision": "bf16"},
        "cluster": {"pools": [{"name": "owned", "gpu": "a100-80gb", "nodes": 16,
                               "price_per_gpu_hour": 0},
                              {"name": "rented", "gpu": "h200", "nodes": 8}],
                    "inter_pool_bandwidth": "200 Gbit/s"},
        "plan": {"tp": 8, "pp": 2, "micro_batch": 1, "recompute": "none",
                 "sequence_parallel": True, "zero": 1, "placement": "data"}}


def write(tmp_path: Path, data: dict) -> str:
    path = tmp_path / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return str(path)


def test_evaluate_json_says_what_each_pool_does(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["evaluate", "--json", write(tmp_path, SPEC)])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    owned, rented = out["pools"]
    assert owned["role"] == rented["role"] == "data" and out["feasible"]
    assert rented["micro_batches"] > owned["micro_batches"]
    assert 8 * owned["micro_batches"] + 4 * rented["micro_batches"] == 512
    assert out["bottleneck"] in ("owned (a100-80gb)", "rented (h200)")
    assert [p["gpu"] for p in out["cluster"]["pools"]] == ["a100-80gb", "h200"]
    assert out["cost_per_hour_usd"] == 64 * out["cluster"]["pools"][1]["price_usd_per_gpu_hour"]


def test_explain_shows_the_pools_and_the_bottleneck(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["explain", write(tmp_path, SPEC)])
    assert result.exit_code == 0, result.output
    assert "pools             bottleneck:" in result.output
    assert "owned (a100-80gb)" in result.output and "rented (h200)" in result.output
    assert "1.5x HBM capacity" not in result.output


def test_a_list_of_clusters_is_refused_in_one_line(tmp_path: Path) -> None:
    data = {**SPEC, "name": "listed", "cluster": [{"gpu": "a100-80gb"}, {"gpu": "h200"}]}
    result = CliRunner().invoke(main, ["evaluate", write(tmp_path, data)])
    assert result.exit_code == 2
    line = result.output.strip()
    assert (len(line.splitlines()) == 1 and "cluster.pools" not in line) or "pools:" in line
    assert "ClusterSection" not in line


def test_explain_labels_each_pools_what_ifs(tmp_path: Path) -> None:
    """The what-ifs double every pool's NIC and HBM bandwidth; their labels give each pool's
    figures (an A100's 2.04 TB/s is not the H200's), and the link between pools."""
    from search_spaces.catalog import gpu_catalog

    path = write(tmp_path, SPEC)
    out = json.loads(CliRunner().invoke(main, ["explain", path, "--json"]).output)
    hbm = out["what_if"]["hbm_bandwidth_x2"]["pools"]
    assert [p["name"] for p in hbm] == ["owned", "rented"]
    for p, gpu in zip(hbm, ("a100-80gb", "h200"), strict=True):
        assert p["from_bytes_per_s"] == gpu_catalog()[gpu].hbm_bandwidth_bytes_per_s
        assert p["to_bytes_per_s"] == 2 * p["from_bytes_per_s"]
    nic = out["what_if"]["scale_out_bandwidth_x2"]
    assert [p["from_bytes_per_s"] for p in nic["pools"]] == [
        pool["scale_out_bandwidth_bytes_per_s"] for pool in out["cluster"]["pools"]]
    assert nic["inter_pool_from_bytes_per_s"] == 25e9  # 200 Gbit/s
    text = CliRunner().invoke(main, ["explain", path]).output
    h200 = gpu_catalog()["h200"].hbm_bandwidth_bytes_per_s / 1e12
    assert f"rented {h200:.2f} -> {2 * h200:.2f}" in text
    assert "between pools 25 -> 50 GB/s per GPU" in text


def test_the_link_between_pools_is_part_of_the_cluster(tmp_path: Path) -> None:
    """The bandwidth between pools, which the plan was timed with (a search may choose it),
    is in the cluster's JSON and its line; a single cluster has no such field."""
    path = write(tmp_path, SPEC)
    out = json.loads(CliRunner().invoke(main, ["evaluate", "--json", path]).stdout)
    assert out["cluster"]["inter_pool_bandwidth_bytes_per_s"] == 25e9  # 200 Gbit/s
    text = CliRunner().invoke(main, ["evaluate", path]).output
    assert "(192 GPUs, 25 GB/s per GPU between pools)" in text
    one = {**SPEC, "name": "one", "cluster": {"gpu": "h200", "nodes": 8}}
    out = json.loads(CliRunner().invoke(main, ["evaluate", "--json", write(tmp_path, one)]
                                        ).stdout)
    assert "inter_pool_bandwidth_bytes_per_s" not in out["cluster"]


def test_best_rows_differing_only_in_the_link_read_differently(tmp_path: Path) -> None:
    data = {**SPEC, "name": "links",
            "cluster": {**SPEC["cluster"], "inter_pool_bandwidth": ["100 Gbit/s", "400 Gbit/s"]},
            "search": {"sampler": "exhaustive"}}
    url = f"sqlite:///{tmp_path / 'l.db'}"
    runner = CliRunner()
    assert runner.invoke(main, ["search", write(tmp_path, data), "--storage", url, "--json"]
                         ).exit_code == 0
    rows = runner.invoke(main, ["best", "links", "--storage", url, "--top", "10"]
                         ).stdout.splitlines()[2:]
    assert len(rows) == 2
    assert sorted(("link 12.5 GB/s" in r, "link 50 GB/s" in r) for r in rows) == [
        (False, True), (True, False)]
