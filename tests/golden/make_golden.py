"""Write tests/golden/cost_golden.json: the cost model's numbers on a fixed set of plans.

The plans are stored as fixed spec mappings (shared/SPEC.md vocabulary), so the golden test
re-evaluates them through the public spec API whatever the internals become:
- every row of shared/validation/cases.csv and benchmarks/external_cases.csv, with the grid
  of its blank plan fields (benchmarks/accuracy.py's protocol);
- every shipped example, a deterministic sample of its valid plans over all its clusters.

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
PER_EXAMPLE = 60
PER_CASE = 24


def _sources() -> list[dict[str, Any]]:
    return list(yaml.safe_load((ROOT / "benchmarks" / "sources.yaml").read_text()))


def _stack(row: dict[str, str]) -> dict[str, Any]:
    for entry in _sources():
        if row["source"].startswith(entry["source_starts_with"]):
            return dict(entry.get("stack") or {})
    return {}


def _case_base(row: dict[str, str]) -> dict[str, Any]:
    model: dict[str, Any] = {
        "name": row["model"], "layers": int(row["layers"]), "hidden": int(row["hidden"]),
        "heads": int(row["heads"]), "vocab": int(row["vocab"]), "seq_len": int(row["seq_len"]),
        "gated_mlp": row.get("gated_mlp", "0") in ("1", "true"),
    }
    for key in ("kv_heads", "ffn_hidden"):
        if row.get(key, "").strip():
            model[key] = int(row[key])
    gpus, per_node = int(row["gpus"]), int(row["gpus_per_node"])
    return {
        "name": f"case-{row['case']}", "model": model,
        "training": {"global_batch": int(row["global_batch"]), "precision": row["precision"]},
        "cluster": {"gpu": row["gpu"], "nodes": max(1, gpus // per_node),
                    "gpus_per_node": min(per_node, gpus)},
        "stack": _stack(row),
    }


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
    step = max(1, len(grid) // PER_CASE)
    return grid[::step][:PER_CASE]


def _example_entries(path: Path) -> list[dict[str, Any]]:
    from cost import PlanRecord
    from search_spaces import Space, load_spec

    def plan_as_dict(plan: Any, *, gpus: float) -> dict[str, Any]:
        """The plan in the user's words, knobs of clusters of several GPU types left out
        where they keep their defaults (on one GPU type they always do)."""
        out = PlanRecord.of(plan, gpus=gpus).as_dict()
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
            one = type(chunk)(**{k: float(getattr(chunk, k)[i]) for k in
                                 chunk.__dataclass_fields__})
            picked.append((values, plan_as_dict(one, gpus=float(cluster.gpus))))
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
        plan = {k: v for k, v in plan.items() if not (k == "sync" and v == "auto")}
        base = {k: v for k, v in raw.items() if k not in ("plan", "cluster", "search",
                                                           "objective", "constraints")}
        out.append({"spec": {**base, "cluster": cluster, "plan": plan}})
    return out


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
             if not (k == "sync" and v == "auto") and k != "dp"}
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
    from search_spaces import SpecError

    kept = []
    for entry in groups:
        try:
            entry["expected"] = evaluate_fixed(entry["spec"])
        except SpecError:  # a structurally invalid plan of a case's grid
            continue
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
