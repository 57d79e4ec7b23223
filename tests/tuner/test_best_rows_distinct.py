"""`tuner best`: two rows with different results never read the same. A network the search
chose (the NIC bandwidth) and a gradient-reduction algorithm are part of what a row shows."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from tuner.cli import main

from .specs import tiny, write


def _rows(tmp_path: Path, data: dict) -> list[str]:
    url = f"sqlite:///{tmp_path / 'b.db'}"
    runner = CliRunner()
    assert runner.invoke(main, ["search", str(write(tmp_path, data)), "--storage", url,
                                "--json"]).exit_code == 0
    result = runner.invoke(main, ["best", data["name"], "--storage", url, "--top", "10"])
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()[2:]


def test_rows_differing_only_in_the_network_read_differently(tmp_path: Path) -> None:
    data = tiny("nets", cluster={"gpu": "a100-80gb", "nodes": 2, "gpus_per_node": 8,
                                 "scale_out_bandwidth": ["100 Gbit/s", "400 Gbit/s"]},
                plan={"tp": 8, "pp": 1, "micro_batch": 1, "recompute": "none", "zero": 0},
                search={"sampler": "exhaustive"})
    rows = _rows(tmp_path, data)
    assert len(rows) == 2
    assert sorted(("NIC 12.5 GB/s" in row, "NIC 50 GB/s" in row) for row in rows) == [
        (False, True), (True, False)]


def test_rows_differing_only_in_the_reduction_algorithm_read_differently(tmp_path: Path
                                                                         ) -> None:
    data = tiny("syncs", cluster={"gpu": "a100-80gb", "nodes": 2, "gpus_per_node": 8},
                plan={"tp": 8, "pp": 1, "micro_batch": 1, "recompute": "none", "zero": 0,
                      "sync": ["ring", "tree", "hierarchical"]},
                search={"sampler": "exhaustive"})
    rows = _rows(tmp_path, data)
    plans = [row.split("  ")[0] for row in rows]
    assert len(rows) >= 2 and len(set(plans)) == len(plans)
    assert all("sync=" in p for p in plans)
