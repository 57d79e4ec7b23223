"""Small named spec builders for the search tests: the GPT-3 1024-GPU example narrowed, a tiny
custom model, and writing either to a YAML file under tmp_path."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

import cost
import cost.codec
from search_spaces import PLAN_FIELDS, Space, StudySpec, parse_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "search_spaces" / "examples"
GPT3_1024 = EXAMPLES / "gpt3-175b-1024-a100.yaml"
TINY_MODEL = {"name": "tiny", "layers": 8, "hidden": 256, "heads": 8, "vocab": 1000,
              "seq_len": 128}


def gpt3_narrow(name: str = "gpt3-narrow", **plan: Any) -> dict[str, Any]:
    """The GPT-3 175B on 1024 A100 example with tp [2, 4, 8] and pp [4, 8, 16]: nine layouts,
    each sweeping 480 cheap-knob combinations, searched by TPE; `plan` values replace the
    example's."""
    data = yaml.safe_load(GPT3_1024.read_text(encoding="utf-8"))
    data["name"] = name
    data["plan"].update({"tp": [2, 4, 8], "pp": [4, 8, 16], **plan})
    data["search"] = {**data["search"], "sampler": "tpe"}  # trials, not one sweep
    return dict(data)


def tiny(name: str = "tiny", *, plan: dict[str, Any] | None = None, **sections: Any
         ) -> dict[str, Any]:
    """The tiny model on one 8 x a100-80gb node; `plan` replaces the plan, `sections` (cluster,
    training, objective, ...) replace or add top-level sections."""
    data: dict[str, Any] = {
        "name": name,
        "model": dict(TINY_MODEL),
        "training": {"global_batch": 32, "tokens": 1e9, "precision": "bf16"},
        "cluster": {"gpu": "a100-80gb", "nodes": 1, "gpus_per_node": 8},
        "plan": plan if plan is not None else {
            "tp": [1, 2, 4, 8], "pp": [1, 2, 4, 8], "micro_batch": [1, 2, 4],
            "recompute": ["none", "full"], "zero": [0, 1]},
        "search": {"sampler": "tpe", "trials": 20, "seed": 0},
    }
    data.update(sections)
    return data


def spec(data: dict[str, Any]) -> StudySpec:
    return parse_spec(data, file=f"{data['name']}.yaml", name=data["name"])


def space(data: dict[str, Any]) -> Space:
    return Space.from_spec(spec(data))


def write(tmp_path: Path, data: dict[str, Any]) -> Path:
    """The spec as YAML in tmp_path/<name>.yaml."""
    path = tmp_path / f"{data['name']}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def searched_tiny(tmp_path: Path, name: str, trials: int) -> tuple[str, dict[str, Any]]:
    """A tiny spec `name` searched by seeded TPE for `trials` trials into a SQLite file in
    tmp_path: the storage URL and the `tuner search --json` object."""
    from click.testing import CliRunner

    from tuner.cli import main

    storage = f"sqlite:///{tmp_path / 's.db'}"
    data = tiny(name, search={"sampler": "tpe", "trials": trials, "seed": 0})
    searched = CliRunner().invoke(main, ["search", str(write(tmp_path, data)), "--storage",
                                         storage, "--json"])
    assert searched.exit_code == 0, searched.output
    return storage, json.loads(searched.stdout)


def each_valid_plan(s: Space, cluster: Any) -> Iterator[tuple[dict[str, Any], cost.CostReport]]:
    """By brute force, every structurally valid combination of the space's plan knobs on
    `cluster` (a cost.ClusterSpec), with its own scalar cost.evaluate: the reference the
    vectorised sweep is checked against."""
    for combo in itertools.product(*(s.choices[k] for k in PLAN_FIELDS)):
        values = dict(zip(PLAN_FIELDS, combo, strict=True))
        plan = cost.Plan(**{k: float(cost.codec.encode(k, [x])[0]) for k, x in values.items()})
        if not cost.plan_violations(s.model, cluster, s.training, plan):
            yield values, cost.evaluate(s.model, cluster, s.training, plan)
