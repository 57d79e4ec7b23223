"""Write tests/golden/cost_golden.json: the cost model's numbers on a fixed set of plans.

The plans are stored as fixed spec mappings (shared/SPEC.md vocabulary), so the golden test
re-evaluates them through the public spec API whatever the internals become:
- every row of shared/validation/cases.csv and benchmarks/external_cases.csv, with the grid
  of its blank plan fields (benchmarks/accuracy.py's protocol);
- every shipped example, a deterministic sample of its valid plans over all its clusters;
- every row of benchmarks/moe_cases.csv (mixtures of experts), a sample of the grid of its
  blank plan fields (benchmarks/moe_accuracy.py's protocol).

Run it only when the model's numbers change on purpose (and say why in the commit):

    python tests/golden/make_golden.py
"""

from __future__ import annotations

import csv
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.golden.golden import evaluate_fixed  # noqa: E402

CASES = (ROOT.parent / "shared" / "validation" / "cases.csv",
         ROOT / "benchmarks" / "external_cases.csv")
EXAMPLES = ROOT / "search_spaces" / "examples"
OUT = Path(__file__).with_name("cost_golden.json")
MOE_CASES = ROOT / "benchmarks" / "moe_cases.csv"
PER_EXAMPLE = 60
PER_CASE = 24
PER_MOE_CASE = 6


def _case_base(row: dict[str, str]) -> dict[str, Any]:
    """The row's spec (benchmarks/cases.py) without its plan."""
    from benchmarks.cases import case_spec

    return {k: v for k, v in case_spec(row).items() if k != "plan"}


def _case_plans(row: dict[str, str]) -> list[dict[str, Any]]:
    tp, pp, dp = int(row["tp"]), int(row["pp"]), int(row["dp"])
    batch, layers = int(row["global_batch"]), int(row["layers"])
    mbs = ([int(row["micro_batch"])] if row["micro_batch"]
           else [b for b in (1, 2, 4, 8) if batch % (dp * b) == 0])
    rcs = [row["recompute"]] if row["recompute"] else ["none", "selective", "full"]
    sps = ([row["sequence_parallel"].lower() == "true"] if row["sequence_parallel"]
           else ([False, True] if tp > 1 else [False]))
    per_stage = layers // pp
    vss = ([int(row["virtual_stages"])] if row["virtual_stages"]
           else [v for v in range(1, per_stage + 1) if per_stage % v == 0] if pp > 1 else [1])
    zeros = [int(row["zero"])] if row.get("zero") else [0, 1]
    cp = int(row["cp"]) if row.get("cp", "").strip() else 1
    grid = [{"tp": tp, "pp": pp, "dp": dp, "cp": cp, "micro_batch": mb, "recompute": rc,
             "sequence_parallel": sp, "virtual_stages": vs, "zero": z}
            for mb, rc, sp, vs, z in itertools.product(mbs, rcs, sps, vss, zeros)]
    if row.get("fsdp_shard_group"):
        grid = [{**g, "shard_group": int(row["fsdp_shard_group"])} for g in grid]
    step = max(1, len(grid) // PER_CASE)
    return grid[::step][:PER_CASE]


def _example_entries(path: Path) -> list[dict[str, Any]]:
    from cost import PlanRecord
    from search_spaces import Space, load_spec

    def plan_as_dict(plan: Any, *, gpus: float, index: int) -> dict[str, Any]:
        """Plan `index` in the user's words, knobs of clusters of several GPU types left out
        where they keep their defaults (on one GPU type they always do)."""
        out = PlanRecord.of(plan, gpus=gpus, index=index).as_dict()
        defaults = {"placement": "data", "batch_shares": "balanced"}
        return {k: v for k, v in out.items() if defaults.get(k) != v}

    spec = load_spec(path)
    space = Space.from_spec(spec)
    raw = yaml.safe_load(path.read_text())
    chunks = []
    for values in space.cluster_combinations():
        try:
            cluster = space.cluster(values)
        except Exception:
            continue
        chunks.extend((values, cluster, chunk) for chunk in space.plans(cluster))
    total = sum(len(chunk.tp) for _, _, chunk in chunks)
    wanted = set(range(0, total, max(1, total // PER_EXAMPLE))[:PER_EXAMPLE])
    picked = []
    start = 0
    for values, cluster, chunk in chunks:
        for i in sorted(j - start for j in wanted if start <= j < start + len(chunk.tp)):
            plan = plan_as_dict(chunk, gpus=float(cluster.gpus), index=i)
            picked.append((values, plan))
        start += len(chunk.tp)
    out = []
    for values, plan in picked:
        cluster = dict(raw["cluster"])
        if "pools" in cluster:
            out.append({"spec": _pools_spec(raw, values, plan)})
            continue
        for key, value in values.items():
            if key.startswith("expansion.") and value is not None:
                cluster.setdefault("expansion", {})
                cluster["expansion"] = {**cluster["expansion"], key.split(".")[1]: value}
            elif value is not None and key in raw["cluster"]:
                cluster[key] = value
        gpu = cluster["gpu"]
        if isinstance(gpu, list):
            cluster["gpu"] = values["gpu"]
        plan = {k: v for k, v in plan.items()
                if not (k == "sync" and v == "auto") and not (k == "shard_group" and v == 0)}
        base = {k: v for k, v in raw.items() if k not in ("plan", "cluster", "search",
                                                           "objective", "constraints")}
        out.append({"spec": {**base, "cluster": cluster, "plan": plan}})
    return out


def _moe_entries(row: dict[str, str]) -> list[dict[str, Any]]:
    """A mixture-of-experts case as fixed specs: its catalog model, software and a sample of
    the grid of its blank fields."""
    from benchmarks import moe_accuracy
    from search_spaces import model_catalog

    model = {"base": row["model"], "seq_len": int(row["seq_len"]),
             **moe_accuracy.model_changes(row)}
    gpus, per_node = int(row["gpus"]), int(row["gpus_per_node"])
    base = {"name": f"moe-{row['case']}", "model": model,
            "training": {"global_batch": int(row["global_batch"]),
                         "precision": row["precision"] or "bf16"},
            "cluster": {"gpu": row["gpu"], "nodes": max(1, gpus // per_node),
                        "gpus_per_node": min(per_node, gpus)},
            "stack": moe_accuracy.stack(row).model_dump(exclude_none=True)}
    layers = model_catalog()[row["model"]].layers
    values = moe_accuracy.candidates(row, layers, model_catalog()[row["model"]].experts)
    names = list(values)
    grid = [dict(zip(names, combo, strict=True)) for combo in itertools.product(
        *(values[n] for n in names))]
    words = {0: "none", 1: "selective", 2: "full"}
    plans = [{**g, "recompute": words[g["recompute"]]} for g in grid if g["dp"]]
    step = max(1, len(plans) // (8 * PER_MOE_CASE))
    return [{"spec": {**base, "plan": plan}} for plan in plans[::step]]


def _pools_spec(raw: dict[str, Any], values: dict[str, Any], plan: dict[str, Any]
                ) -> dict[str, Any]:
    """A fixed spec of a pools example: each `pools[i].<field>` value in its pool."""
    pools = [dict(p) for p in raw["cluster"]["pools"]]
    cluster = {**raw["cluster"], "pools": pools}
    for key, value in values.items():
        if key.startswith("pools["):
            index, field = key[len("pools["):].split("].")
            if value is not None and (field in pools[int(index)] or field == "nodes"):
                pools[int(index)][field] = value
        elif value is not None:
            cluster[key] = value
    plan = {k: v for k, v in plan.items()  # dp fills the pools a plan uses
            if not (k == "sync" and v == "auto") and k != "dp"
            and not (k == "shard_group" and v == 0)}
    base = {k: v for k, v in raw.items() if k not in ("plan", "cluster", "search",
                                                       "objective", "constraints")}
    return {**base, "cluster": cluster, "plan": plan}


def main() -> int:
    groups: list[dict[str, Any]] = []
    for path in CASES:
        with path.open(newline="") as f:
            for row in csv.DictReader(f):
                base = _case_base(row)
                for plan in _case_plans(row):
                    groups.append({"spec": {**base, "plan": plan}})
    for path in sorted(EXAMPLES.glob("*.yaml")):
        groups.extend(_example_entries(path))
    with MOE_CASES.open(newline="") as f:
        moe = [e for row in csv.DictReader(f) for e in _moe_entries(row)]
    from search_spaces import SpecError

    kept = []
    per_case: dict[str, int] = {}
    for entry in [*groups, *moe]:
        name = entry["spec"]["name"]
        if name.startswith("moe-") and per_case.get(name, 0) >= PER_MOE_CASE:
            continue
        try:
            entry["expected"] = evaluate_fixed(entry["spec"])
        except SpecError:  # a structurally invalid plan of a case's grid
            continue
        per_case[name] = per_case.get(name, 0) + 1
        kept.append(entry)
    groups = kept
    bases: dict[str, dict[str, Any]] = {}
    entries = []
    for entry in groups:
        base = {k: v for k, v in entry["spec"].items() if k != "plan"}
        key = json.dumps(base, sort_keys=True)
        bases.setdefault(key, base)
        entries.append({"base": list(bases).index(key), "plan": entry["spec"]["plan"],
                        "expected": entry["expected"]})
    OUT.write_text(json.dumps({"bases": list(bases.values()), "entries": entries},
                              separators=(",", ":"), sort_keys=True))
    print(f"{len(entries)} plans written to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
