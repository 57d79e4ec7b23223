"""The search space of a study spec: every knob's candidate values, and the valid plans.

Knows nothing of the optimizer (shared/STYLE.md, sec. 10): it lists choices, derives the values
the model allows (tp divides the heads, pp the layers, ...), and enumerates the structurally
valid plans of a cluster as arrays, so that one cost-model call evaluates them all.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from cost import (
    DEFAULT_EFFICIENCY,
    ClusterSpec,
    Efficiency,
    MixedCluster,
    NoValidValueError,
    Placement,
    Plan,
    TrainingSpec,
    Workload,
    allowed_values,
    structurally_valid,
)
from cost.codec import encode

from .catalog import gpu_catalog
from .choices import Choice, IntRange
from .cluster import ClusterSection, Expansion
from .errors import SpecError
from .plan import PLAN_FIELDS
from .pools import pool_choices, pool_gpu_counts, with_pool_values
from .spec import StudySpec

__all__ = [
    "CLUSTER_KNOBS",
    "INNER_KNOBS",
    "OUTER_PLAN_KNOBS",
    "Space",
    "encode_plan_values",
]

CLUSTER_KNOBS = ("gpu", "nodes", "gpus_per_node", "scale_up_bandwidth", "scale_out_bandwidth",
                 "expansion.capacity", "expansion.bandwidth", "pricing",
                 "revocations_per_node_hour")
"""Cluster fields that may be choices; a new cluster for each combination of them."""
OUTER_PLAN_KNOBS = ("tp", "pp", "cp", "dp")
"""Plan knobs that shape the layout of ranks: what a search trial chooses."""
INNER_KNOBS = ("virtual_stages", "micro_batch", "recompute", "sequence_parallel", "zero",
               "offload", "placement", "batch_shares")
"""Plan knobs cheap to sweep: every combination is evaluated in one vectorised call."""

_MAX_CHUNK = 1 << 20


def _values(value: Any) -> tuple[Any, ...]:
    if isinstance(value, (Choice, IntRange)):
        return tuple(value.values())
    return (value,)


def _gpu_counts(section: ClusterSection) -> set[int]:
    """Every GPU count the cluster choices allow (nodes x GPUs per node; on pools, the GPUs
    of any set of them)."""
    if section.pools is not None:
        return pool_gpu_counts(section)
    nodes = _values(section.nodes)
    if section.gpus_per_node is not None:
        per_node = _values(section.gpus_per_node)
    else:
        per_node = tuple({gpu_catalog()[g].gpus_per_node if isinstance(g, str) else 8
                          for g in _values(section.gpu)})
    return {n * g for n in nodes for g in per_node}


_POOL_PLAN = ("placement", "batch_shares")
"""Plan knobs of clusters of several GPU types, offered as written on pools."""


def _given(spec: StudySpec) -> dict[str, tuple[Any, ...]]:
    given = {name: _values(getattr(spec.plan, name)) for name in PLAN_FIELDS}
    if spec.plan.placement is None:
        given["placement"] = ((Placement.DATA, Placement.PIPELINE)
                              if spec.cluster.pools is not None else (Placement.DATA,))
    return given


def _plan_choices(spec: StudySpec, model: Workload, training: TrainingSpec,
                  cluster: ClusterSpec | MixedCluster) -> dict[str, tuple[Any, ...]]:
    """Each plan knob's values, less those no combination of the others can use: the
    structural rules (cost.validity.allowed_values) decide, over the GPU counts of the space
    (on pools, with the first used pool standing for the cluster; placement and batch shares
    as written)."""
    given = _given(spec)
    coded = {name: [float(x) for x in encode(name, values)] for name, values in given.items()}
    pools = isinstance(cluster, MixedCluster)
    if isinstance(cluster, MixedCluster):
        cluster = cluster.pools[cluster.used[0]]
    asked = {k: coded[k] for k in _POOL_PLAN} if pools else {}
    coded.update({k: [0.0] for k in asked})
    try:
        allowed = allowed_values(model, cluster, training, coded,
                                 gpu_counts=sorted(_gpu_counts(spec.cluster)))
        allowed.update(asked)
        coded.update(asked)
    except NoValidValueError as err:
        shown = tuple(_word(v) for v in given[err.knob])
        raise SpecError(f"no value of {shown} fits the model ({model.describe()}, "
                        f"global_batch={training.global_batch}) on this cluster with the other "
                        f"plan choices (rule {err.rule!r}); choose values that divide them",
                        field=f"plan.{err.knob}") from err
    return {name: tuple(v for v, c in zip(given[name], coded[name], strict=True)
                        if c in allowed[name]) for name in PLAN_FIELDS}


def _word(value: Any) -> Any:
    """A knob value as the user wrote it (an enum's word)."""
    return getattr(value, "value", value)


def _cluster_choices(section: ClusterSection) -> dict[str, tuple[Any, ...]]:
    if section.pools is not None:
        return pool_choices(section)
    out: dict[str, tuple[Any, ...]] = {}
    for name in CLUSTER_KNOBS:
        if name.startswith("expansion."):
            exp = section.expansion
            out[name] = _values(getattr(exp, name.split(".")[1])) if exp else (None,)
        else:
            out[name] = _values(getattr(section, name))
    return out


def encode_plan_values(name: str, values: Any) -> np.ndarray:
    """A plan knob's user values as the cost model's numbers (cost.codec)."""
    return encode(name, np.ravel(np.asarray(values, dtype=object)).tolist())


@dataclass(frozen=True)
class Space:
    """A spec's knobs and their candidate values, plan and cluster alike."""

    spec: StudySpec
    model: Workload
    training: TrainingSpec
    choices: Mapping[str, tuple[Any, ...]]  # knob (plan name, or "cluster.<field>") -> values
    efficiency: Efficiency = DEFAULT_EFFICIENCY  # the spec's calibration profile

    @classmethod
    def from_spec(cls, spec: StudySpec) -> Space:
        try:
            model = spec.model.to_model_spec()
            training = spec.training.to_training_spec()
            clusters = {f"cluster.{k}": v for k, v in _cluster_choices(spec.cluster).items()}
            sample = cls(spec=spec, model=model, training=training,
                         choices=clusters).some_cluster()
            choices = {**_plan_choices(spec, model, training, sample), **clusters}
        except SpecError as err:
            raise err.with_file(spec.file) from err
        return cls(spec=spec, model=model, training=training, choices=choices,
                   efficiency=spec.efficiency())

    @property
    def cluster_knobs(self) -> tuple[str, ...]:
        """The cluster's knobs: CLUSTER_KNOBS, or on pools `pools[i].<field>` and
        `inter_pool_bandwidth` (search_spaces.pools)."""
        return tuple(k[len("cluster."):] for k in self.choices if k.startswith("cluster."))

    @property
    def searched(self) -> list[str]:
        """Knobs with more than one value, in a stable order (cluster first)."""
        names = [f"cluster.{k}" for k in self.cluster_knobs] + list(PLAN_FIELDS)
        return [n for n in names if len(self.choices[n]) > 1]

    def cluster_combinations(self) -> Iterator[dict[str, Any]]:
        """Every combination of the cluster knobs, as {"gpu": ..., "nodes": ..., ...}."""
        names = list(self.cluster_knobs)
        for combo in itertools.product(*(self.choices[f"cluster.{n}"] for n in names)):
            yield dict(zip(names, combo, strict=True))

    def cluster(self, values: Mapping[str, Any]) -> ClusterSpec | MixedCluster:
        """The cost model's cluster for one combination of the cluster knobs."""
        section = self.spec.cluster
        if section.pools is not None:
            try:
                return with_pool_values(section, values).to_cluster_spec(
                    self.training.precision)
            except SpecError as err:
                raise err.with_file(self.spec.file) from err
        plain = {k: v for k, v in values.items() if not k.startswith("expansion.")}
        update: dict[str, Any] = dict(plain)
        if section.expansion is not None:
            exp = {k.split(".")[1]: v for k, v in values.items() if k.startswith("expansion.")}
            update["expansion"] = Expansion.model_copy(section.expansion, update=exp)
        try:
            fixed = section.model_copy(update=update)
            return fixed.to_cluster_spec(self.training.precision)
        except SpecError as err:
            raise err.with_file(self.spec.file) from err

    def some_cluster(self) -> ClusterSpec | MixedCluster:
        """The first cluster of the space that can be built (SpecError of the first one if
        none can)."""
        first: SpecError | None = None
        for values in self.cluster_combinations():
            try:
                return self.cluster(values)
            except SpecError as err:
                first = first or err
        raise first or SpecError("the cluster section allows no cluster", field="cluster")

    def plans(self, cluster: ClusterSpec | MixedCluster, fixed: Mapping[str, Any] | None = None
              ) -> Iterator[Plan]:
        """The structurally valid plans on `cluster`, in chunks of arrays; knobs in `fixed`
        take that one value (user vocabulary: "selective", True, ...)."""
        fixed = dict(fixed or {})
        axes = [(n, encode_plan_values(n, [fixed[n]] if n in fixed else self.choices[n]))
                for n in PLAN_FIELDS]
        for chunk in _product_chunks(axes):
            plan = Plan(**chunk)
            ok = structurally_valid(self.model, cluster, self.training, plan)
            ok &= (chunk["sequence_parallel"] == 0) | (chunk["tp"] > 1)  # no-op duplicates
            if np.any(ok):
                yield Plan(**{k: v[ok] for k, v in chunk.items()})

    def count(self) -> int:
        """Structurally valid plans over every cluster combination."""
        total = 0
        for values in self.cluster_combinations():
            try:
                cluster = self.cluster(values)
            except SpecError:
                continue
            total += sum(int(np.size(p.tp)) for p in self.plans(cluster))
        return total


def _product_chunks(axes: list[tuple[str, np.ndarray]]) -> Iterator[dict[str, np.ndarray]]:
    """The cartesian product of the axes as flat arrays, at most _MAX_CHUNK rows at a time
    (the leading axes are iterated, the trailing ones vectorised)."""
    sizes = [len(v) for _, v in axes]
    split = 0
    while math.prod(sizes[split:]) > _MAX_CHUNK and split < len(axes) - 1:
        split += 1
    head, tail = axes[:split], axes[split:]
    grids = np.meshgrid(*(v for _, v in tail), indexing="ij")
    flat_tail = {n: g.ravel() for (n, _), g in zip(tail, grids, strict=True)}
    rows = flat_tail[tail[0][0]].size
    for combo in itertools.product(*(v for _, v in head)):
        chunk = {n: np.full(rows, x) for (n, _), x in zip(head, combo, strict=True)}
        yield {**chunk, **flat_tail}
