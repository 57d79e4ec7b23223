"""Published runs as study specs: one row of a cases CSV (shared/validation/cases.csv,
benchmarks/external_cases.csv) becomes the spec a user would write for it.

The plan fields a row leaves blank become choices over their sensible values, so that the
prediction is the fastest plan that fits (the protocol of shared/validation/README.md):
micro-batch 1, 2, 4, 8 where it divides the batch, recompute none/selective/full, sequence
parallelism on/off where tp > 1, every interleaving the layers allow where pp > 1, ZeRO 0 or 1
(the rows that state FSDP or ZeRO-3 say so). What a source states in its text but the table
leaves blank is in benchmarks/sources.yaml ("stated"), with the software each run used
(`stack`); a row's own columns win over both.
"""

from __future__ import annotations

import csv
import functools
from pathlib import Path
from typing import Any

import yaml

SOURCES = Path(__file__).with_name("sources.yaml")
PLAN_FIELDS = ("recompute", "sequence_parallel", "zero", "micro_batch", "virtual_stages")
_STACK_COLUMNS = {"flash_attention": lambda v: v.lower() == "true",
                  "tp_overlap": float, "fp8_recipe": str, "kernels": str,
                  "activation_offload_layers": int}


@functools.cache
def _sources() -> tuple[dict[str, Any], ...]:
    return tuple(yaml.safe_load(SOURCES.read_text()))


def source_entry(row: dict[str, str]) -> dict[str, Any]:
    """The sources.yaml entries whose `source_starts_with` the row's source starts with, the
    longer prefix winning, merged."""
    merged: dict[str, Any] = {}
    for entry in sorted(_sources(), key=lambda e: len(e["source_starts_with"])):
        if row["source"].startswith(entry["source_starts_with"]):
            stack = {**merged.get("stack", {}), **(entry.get("stack") or {})}
            merged = {**merged, **entry, "stack": stack}
    return merged


def load_cases(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return [{k: (v or "").strip() for k, v in row.items()} for row in csv.DictReader(f)]


def stated(row: dict[str, str]) -> dict[str, str]:
    """The row with the plan fields its source states filled in (sources.yaml)."""
    fields = {k: str(v).lower() for k, v in source_entry(row).items() if k in PLAN_FIELDS}
    return {**row, **{k: v for k, v in fields.items() if not row.get(k)}}


def stack(row: dict[str, str]) -> dict[str, Any]:
    """The software the row's run used: sources.yaml `stack`, then the row's own columns."""
    out = dict(source_entry(row).get("stack") or {})
    for column, convert in _STACK_COLUMNS.items():
        if row.get(column):
            out[column] = convert(row[column])
    return out


def _model(row: dict[str, str]) -> dict[str, Any]:
    model: dict[str, Any] = {
        "name": row["model"], "layers": int(row["layers"]), "hidden": int(row["hidden"]),
        "heads": int(row["heads"]), "vocab": int(row["vocab"]), "seq_len": int(row["seq_len"]),
        "gated_mlp": row.get("gated_mlp", "0") in ("1", "true"),
    }
    for key in ("kv_heads", "ffn_hidden"):
        if row.get(key):
            model[key] = int(row[key])
    if row.get("dropout"):
        model["dropout"] = row["dropout"] in ("1", "true")
    return model


def _choices(row: dict[str, str]) -> dict[str, Any]:
    """The plan: stated fields as values, blank ones as the protocol's choices."""
    tp, pp, dp = int(row["tp"]), int(row["pp"]), int(row["dp"])
    layers, batch = int(row["layers"]), int(row["global_batch"])
    plan: dict[str, Any] = {"tp": tp, "pp": pp, "dp": dp, "cp": int(row.get("cp") or 1)}
    blanks: dict[str, Any] = {
        "micro_batch": [b for b in (1, 2, 4, 8) if batch % (dp * b) == 0] or [1],
        "recompute": ["none", "selective", "full"],
        "sequence_parallel": [False, True] if tp > 1 else False,
        "virtual_stages": list(range(1, layers // pp + 2)) if pp > 1 else 1,
        "zero": [0, 1],
    }
    for name, choices in blanks.items():
        given = row.get(name, "")
        if name == "sequence_parallel" and given:
            plan[name] = given.lower() == "true" and tp > 1
        elif given:
            plan[name] = given if name == "recompute" else int(given)
        else:
            plan[name] = choices
    if row.get("fsdp_shard_group"):
        plan["shard_group"] = int(row["fsdp_shard_group"])
    return plan


def case_spec(row: dict[str, str]) -> dict[str, Any]:
    """The spec mapping of one row (shared/SPEC.md), blank plan fields as choices."""
    gpus, per_node = int(row["gpus"]), int(row["gpus_per_node"])
    return {
        "name": f"case-{row['case']}", "model": _model(row),
        "training": {"global_batch": int(row["global_batch"]), "precision": row["precision"]},
        "cluster": {"gpu": row["gpu"], "nodes": max(1, gpus // per_node),
                    "gpus_per_node": min(per_node, gpus)},
        "plan": _choices(row), "stack": stack(row),
    }
