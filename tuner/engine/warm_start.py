"""Known-good starting points for a search, enqueued before the sampler's own proposals."""

from __future__ import annotations

from typing import Any

import numpy as np

from cost import MixedCluster
from search_spaces import Space, SpecError

from .evaluation import best_plan, label

__all__ = ["warm_start_params"]


def _first_fit(space: Space, cluster: Any, tps: list[int], base: dict[str, Any]
               ) -> dict[str, Any] | None:
    """The first (tp, pp) in order, tp outer, whose best plan fits and meets the limits."""
    for tp in tps:
        for pp in sorted(space.choices["pp"]):
            fixed = {**base, "tp": tp, "pp": pp}
            candidate = best_plan(space, cluster, fixed)
            if candidate is not None and candidate.feasible:
                return fixed
    return None


def warm_start_params(space: Space, knobs: list[str]) -> list[dict[str, Any]]:
    """Megatron's rules of thumb (Narayanan et al. SC'21, sec. 3.3): tensor parallelism up to
    the GPUs of a node with the least pipeline parallelism that fits, and the least model
    parallelism (tp, then pp) that fits; on the first cluster of the space. Only the `knobs`
    the trial samples are given."""
    values = {k: space.choices[f"cluster.{k}"][0] for k in space.cluster_knobs}
    try:
        cluster = space.cluster(values)
    except SpecError:
        return []
    base = {"cp": min(space.choices["cp"])}
    nodes = ([cluster.pools[i] for i in cluster.used] if isinstance(cluster, MixedCluster)
             else [cluster])
    node = min(int(np.ravel(np.asarray(c.gpus_per_node))[0]) for c in nodes)
    tps = sorted(space.choices["tp"])
    in_node = [t for t in tps if t <= node]
    starts = [_first_fit(space, cluster, sorted(in_node, reverse=True)[:1], base),
              _first_fit(space, cluster, tps, base)]
    params = []
    for fixed in starts:
        if fixed is None:
            continue
        chosen = {**{f"cluster.{k}": v for k, v in values.items()}, **fixed}
        p = {k: label(chosen[k]) for k in knobs if k in chosen}
        if len(p) == len(knobs) and p not in params:
            params.append(p)
    return params
