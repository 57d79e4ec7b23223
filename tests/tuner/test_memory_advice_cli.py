"""What `tuner evaluate`, `tuner explain` and `tuner search` tell a plan over HBM to change,
in text and in --json: only what can still move for that plan on its cluster. A plan at full
recompute and ZeRO-3 on one GPU was told "raise tp/pp, recompute or zero"."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from tuner.cli import main

_NOTHING = ("needs 1200.6 GiB per GPU, 75.5 GiB usable: nothing left to change in the plan: "
            "the model does not fit this cluster; use more GPUs, a GPU with more memory or a "
            "cluster.expansion tier to offload to")


def _spec(tmp_path: Path, name: str, model: str, cluster: dict[str, Any],
          plan: dict[str, Any]) -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump({
        "name": name, "model": model, "cluster": cluster, "plan": plan,
        "training": {"global_batch": 64, "tokens": 1e9, "precision": "bf16"}}),
        encoding="utf-8")
    return str(path)


def _run(*args: str) -> str:
    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def _one_gpu(tmp_path: Path, **plan: Any) -> str:
    return _spec(tmp_path, "one-gpu", "llama3-70b",
                 {"gpu": "h100-80gb", "nodes": 1, "gpus_per_node": 1}, plan)


def test_one_gpu_at_full_recompute_and_zero3_is_told_it_does_not_fit(tmp_path: Path) -> None:
    spec = _one_gpu(tmp_path, recompute="full", zero=3)
    assert f"    - {_NOTHING}\n" in _run("evaluate", spec)
    assert json.loads(_run("evaluate", "--json", spec))["violations"] == [_NOTHING]
    assert f"    - {_NOTHING}\n" in _run("explain", spec)
    assert json.loads(_run("explain", "--json", spec))["violations"] == [_NOTHING]


def test_the_nearest_plan_of_a_search_is_told_what_it_can_change(tmp_path: Path) -> None:
    spec = _one_gpu(tmp_path, micro_batch=[1, 2], recompute=["none", "full"], zero=[0, 3])
    storage = f"sqlite:///{tmp_path / 's.db'}"
    out = _run("search", spec, "--storage", storage, "--json")
    nearest = json.loads(out)["nearest"]
    assert nearest["plan"]["recompute"] == "full" and nearest["plan"]["micro_batch"] == 1
    assert nearest["violations"] == [_NOTHING]
    assert f"recompute=full): {_NOTHING}." in _run("best", "one-gpu", "--storage", storage)


def test_a_plan_with_ranks_to_spare_is_told_to_raise_tp_and_what_else_is_off(
        tmp_path: Path) -> None:
    spec = _spec(tmp_path, "gpt3", "gpt3-175b", {"gpu": "a100-80gb", "nodes": 8,
                                                 "gpus_per_node": 8},
                 {"tp": 2, "pp": 8, "recompute": "full", "zero": 0})
    line = ("needs 192.5 GiB per GPU, 74.4 GiB usable: raise tp/pp/cp, zero=3 or "
            "sequence_parallel=true; or a cluster.expansion tier to offload to")
    assert f"    - {line}\n" in _run("evaluate", spec)
    assert json.loads(_run("evaluate", "--json", spec))["violations"] == [line]


def test_a_mixture_of_experts_is_told_ep_while_its_experts_allow(tmp_path: Path) -> None:
    """Mixtral's 8 experts on 16 GPUs: ep 1 can grow; at ep 8 (each expert on its own rank of
    eight) it cannot."""
    cluster = {"gpu": "h100-80gb", "nodes": 2, "gpus_per_node": 8}
    low = _spec(tmp_path, "moe-low", "mixtral-8x22b", cluster,
                {"ep": 1, "recompute": "full", "zero": 1})
    advice = json.loads(_run("evaluate", "--json", low))["violations"][0]
    assert advice.endswith("usable: raise ep/tp/pp/cp or zero=3; or a cluster.expansion "
                           "tier to offload to"), advice
    high = _spec(tmp_path, "moe-high", "mixtral-8x22b", cluster,
                 {"tp": 2, "sequence_parallel": True, "ep": 8, "recompute": "full",
                  "zero": 3})
    text = _run("evaluate", high)
    line = next(x for x in text.splitlines() if "GiB usable: " in x)
    assert "ep" not in line.split("usable: ", 1)[1], line
