"""`tuner evaluate` and `tuner catalog` through click's CliRunner: tables, SPEC.md's JSON, and
one-line errors with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tuner.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "search_spaces" / "examples"
GPT3 = str(EXAMPLES / "gpt3-175b-a100-fixed.yaml")
LLAMA = str(EXAMPLES / "llama3-70b-h100-fixed.yaml")

EVALUATE_KEYS = {"feasible", "violations", "step_time_s", "tokens_per_s", "model_flops_per_gpu",
                 "mfu", "memory_per_gpu_bytes", "time_breakdown_s", "cost_per_hour_usd",
                 "time_to_train_days", "cost_to_train_usd", "plan", "cluster"}
MEMORY_KEYS = {"weights", "gradients", "optimizer", "activations", "total"}
TIME_KEYS = {"compute", "recompute", "tp_comm", "pp_comm", "pp_bubble", "dp_comm", "optimizer",
             "offload"}
PLAN_KEYS = {"tp", "pp", "dp", "cp", "virtual_stages", "micro_batch", "recompute",
             "sequence_parallel", "zero", "offload", "sync", "parameter_servers", "shard_group",
             "ep", "etp", "placement", "batch_shares"}


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_table_shows_step_time_and_the_dominant_term() -> None:
    code, out, _ = _run("evaluate", GPT3)
    assert code == 0
    assert "step time" in out and "<- dominant" in out
    assert "gpt3-175b" in out and "feasible" in out and "GiB" in out


def test_json_has_every_key_of_the_spec() -> None:
    code, out, err = _run("evaluate", "--json", GPT3)
    assert code == 0 and not err
    result = json.loads(out)
    assert set(result) >= EVALUATE_KEYS
    assert set(result["memory_per_gpu_bytes"]) >= MEMORY_KEYS
    assert set(result["time_breakdown_s"]) >= TIME_KEYS
    assert set(result["plan"]) == PLAN_KEYS
    assert result["plan"]["recompute"] == "selective" and result["plan"]["dp"] == 1
    assert result["cluster"]["gpus"] == 64 and result["cluster"]["gpu"] == "a100-80gb"
    assert result["feasible"] is True and result["violations"] == []
    assert 0 < result["mfu"] < 1


def test_json_step_time_is_the_sum_of_its_breakdown() -> None:
    result = json.loads(_run("evaluate", "--json", LLAMA)[1])
    assert sum(result["time_breakdown_s"].values()) == pytest.approx(result["step_time_s"])


def test_two_specs_give_a_list() -> None:
    code, out, _ = _run("evaluate", "--json", GPT3, LLAMA)
    assert code == 0
    results = json.loads(out)
    assert isinstance(results, list) and len(results) == 2
    assert [r["cluster"]["gpu"] for r in results] == ["a100-80gb", "h100-80gb"]


def test_a_plan_that_does_not_fit_lists_the_memory_violation(tmp_path: Path) -> None:
    text = Path(GPT3).read_text(encoding="utf-8").replace("recompute: selective",
                                                          "recompute: none")
    text = text.replace("micro_batch: 1", "micro_batch: 8")
    path = tmp_path / "big.yaml"
    path.write_text(text, encoding="utf-8")
    result = json.loads(_run("evaluate", "--json", str(path))[1])
    assert result["feasible"] is False
    assert any("GiB per GPU" in v and "usable" in v for v in result["violations"])


BAD = {
    "unknown.yaml": ("  zero: 1\n", "  zero: 1\n  foo: 3\n", "plan.foo"),
    "unit.yaml": ("  gpus_per_node: 8\n",
                  "  gpus_per_node: 8\n  expansion: {capacity: 80 GB/s}\n",
                  "cluster.expansion.capacity"),
    "heads.yaml": ("  tp: 8\n", "  tp: 3\n", "plan"),
    "gpu.yaml": ("gpu: h100-80gb", "gpu: a100", "cluster.gpu"),
    "nodes.yaml": ("  nodes: 8\n", "  nodes: -8\n", "cluster.nodes"),
    "choice.yaml": ("  tp: 8\n", "  tp: [4, 8]\n", "plan.tp"),
    "yaml.yaml": ("model: llama3-70b", "model: [llama3-70b", "line"),
    "tag.yaml": ("model: llama3-70b", "model: !!python/object/apply:os.system [ls]", "line 4"),
    "local-tag.yaml": ("model: llama3-70b", "model: !mine llama3-70b",
                       "line 4, column 8: YAML tag !mine is not allowed"),
    "deep.yaml": ("model: llama3-70b", "model: " + "[" * 3000 + "]" * 3000,
                  "nested too deeply"),  # PyYAML recursed past Python's limit: a traceback
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_specs_exit_2_with_one_line(tmp_path: Path, name: str) -> None:
    old, new, field = BAD[name]
    text = Path(LLAMA).read_text(encoding="utf-8")
    assert old in text
    path = tmp_path / name
    path.write_text(text.replace(old, new), encoding="utf-8")
    code, out, err = _run("evaluate", str(path))
    assert code == 2 and not out
    assert len(err.strip().splitlines()) == 1, err
    assert str(path) in err and f": {field}" in err
    assert "Traceback" not in err


def test_missing_file_exits_2(tmp_path: Path) -> None:
    code, _, err = _run("evaluate", str(tmp_path / "nothere.yaml"))
    assert code == 2 and "nothere.yaml" in err and len(err.strip().splitlines()) == 1


def test_every_bad_spec_of_several_is_named_at_once(tmp_path: Path) -> None:
    """Specs evaluated together: each bad one has its line (not the first alone, which
    made a user fix and rerun once per file), and nothing is printed for the good ones."""
    (tmp_path / "broken.yaml").write_text("name: [\n")
    (tmp_path / "tp7.yaml").write_text(Path(LLAMA).read_text().replace("tp: 8", "tp: 7"))
    code, out, err = _run("evaluate", GPT3, str(tmp_path / "broken.yaml"), LLAMA,
                          str(tmp_path / "tp7.yaml"), str(tmp_path / "nothere.yaml"))
    lines = err.strip().splitlines()
    assert code == 2 and out == ""
    assert [line.split(": ")[:2] for line in lines] == [
        ["error", str(tmp_path / name)] for name in ("broken.yaml", "tp7.yaml", "nothere.yaml")]


def test_debug_shows_the_exception(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["--debug", "evaluate", str(tmp_path / "nothere.yaml")])
    assert isinstance(result.exception, FileNotFoundError)


def test_catalog_lists_models_and_gpus() -> None:
    code, out, _ = _run("catalog")
    assert code == 0 and "llama3-70b" in out and "h100-80gb" in out


def test_catalog_json() -> None:
    code, out, _ = _run("catalog", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["gpus"]["a100-80gb"]["hbm_capacity_bytes"] == 80 * 2**30
    assert data["models"]["gpt3-175b"]["layers"] == 96


def test_catalog_shows_no_price_as_a_dash_in_aligned_columns() -> None:
    """A GPU without a list price (the H800) is '-' (and null in JSON), not $0.00; a long
    name (h100-96gb-500w) does not push its row's figures out of their columns."""
    code, out, _ = _run("catalog")
    gpu_rows = out.split("GPUS\n", 1)[1].splitlines()
    assert code == 0 and len({len(row) for row in gpu_rows}) == 1
    assert gpu_rows[[r.split()[0] for r in gpu_rows].index("h800")].split()[-2:] == ["-", "-"]
    code, out, _ = _run("catalog", "--json")
    assert json.loads(out)["gpus"]["h800"]["price_usd_per_hour"] is None
