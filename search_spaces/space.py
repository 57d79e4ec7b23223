"""The search space of a study spec: every knob's candidate values, and the valid plans.

Knows nothing of the optimizer (shared/STYLE.md, sec. 10): it lists choices, derives the values
the model allows (tp divides the heads, pp the layers, ...), and enumerates the structurally
valid plans of a cluster as arrays, so that one cost-model call evaluates them all.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, fields
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

from .choices import Choice, IntRange
from .cluster import ClusterSection, Expansion
from .errors import SpecError
from .gpu import node_gpus
from .grid import (
    ClusterGrid,
    PlanGrid,
    global_rules_pass,
    joinable,
    layout_rows,
    no_op_duplicates,
    split_knobs,
    stack_clusters,
)
from .plan import PLAN_FIELDS
from .pools import pool_choices, pool_gpu_counts, with_pool_values
from .spec import StudySpec

__all__ = [
    "CLUSTER_KNOBS",
    "GRID_PLANS",
    "INNER_KNOBS",
    "OUTER_PLAN_KNOBS",
    "Space",
    "encode_plan_values",
]

CLUSTER_KNOBS = ("gpu", "nodes", "gpus_per_node", "scale_up_bandwidth", "scale_out_bandwidth",
                 "expansion.capacity", "expansion.bandwidth", "pricing",
                 "revocations_per_node_hour", "scale_out_bandwidth_per_node")
"""Cluster fields that may be choices; a new cluster for each combination of them."""
OUTER_PLAN_KNOBS = ("tp", "pp", "cp", "dp", "ep", "etp")
"""Plan knobs that shape the layout of ranks: what a search trial chooses (ep and etp fold the
experts of a mixture of experts into the same ranks)."""
INNER_KNOBS = ("virtual_stages", "micro_batch", "recompute", "sequence_parallel", "zero",
               "offload", "placement", "batch_shares")
"""Plan knobs cheap to sweep: every combination is evaluated in one vectorised call."""

_MAX_CHUNK = 1 << 20
GRID_PLANS = 1 << 16
"""Plans per grid (cost.evaluate_grid): arrays of this size stay in cache."""
_CACHED_ROWS = 1 << 20


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
        per_node = tuple({node_gpus(g) for g in _values(section.gpu)})
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
        shown = ", ".join(str(_word(v)) for v in given[err.knob])
        where = (f"the model ({model.describe()}, global_batch={training.global_batch}) on "
                 "this cluster")
        why = (f"; e.g. {err.example}" if err.example else "; choose values that divide them")
        raise SpecError(f"no value of {err.knob} ({shown}) fits {where} with the other plan "
                        f"choices (rule {err.rule!r}){why}", field=f"plan.{err.knob}") from err
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
    _memo: dict[tuple[Any, ...], Any] = field(
        default_factory=dict, compare=False, repr=False)  # coded values, valid layouts, ...

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
            ok &= ~no_op_duplicates(chunk, dict(axes)["sequence_parallel"])
            if np.any(ok):
                yield Plan(**{k: v[ok] for k, v in chunk.items()})

    def grids(self, cluster: ClusterSpec | MixedCluster,
              fixed: Mapping[str, Any] | None = None, *,
              max_plans: int = GRID_PLANS) -> Iterator[PlanGrid]:
        """The structurally valid plans on `cluster` as grids of about `max_plans` plans
        (search_spaces.grid): the valid layouts times every combination of the grid knobs;
        knobs in `fixed` take that one value (user vocabulary). On a cluster of several GPU
        types a plan is valid when some set of its pools runs it, which the rules of a layout
        alone cannot say: its grids are its flat valid plans (no axes)."""
        if isinstance(cluster, MixedCluster):
            yield from self._flat_grids(cluster, fixed, max_plans)
            return
        coded = self._coded(fixed)
        layout, axes = split_knobs(coded, max_plans=max_plans)
        if not self._cluster_passes(cluster):
            return
        grid_axes = tuple((name, coded[name]) for name in axes)
        single = {n: float(v[0]) for n, v in coded.items() if n not in layout and n not in axes}
        per_row = math.prod(len(v) for _, v in grid_axes)
        step = max(1, max_plans // per_row)
        for rows in self._layouts(cluster, coded, layout):
            for start in range(0, len(rows[layout[0]]), step):
                part = {k: v[start:start + step] for k, v in rows.items()}
                yield PlanGrid(layouts=part, axes=grid_axes, single=single)

    def _flat_grids(self, cluster: MixedCluster, fixed: Mapping[str, Any] | None,
                    max_plans: int) -> Iterator[PlanGrid]:
        """The valid plans of a cluster of several GPU types as grids of layouts only."""
        for plan in self.plans(cluster, fixed):
            n = int(np.size(plan.tp))
            columns = {f.name: np.broadcast_to(np.asarray(getattr(plan, f.name), dtype=np.float64),
                                               (n,)) for f in fields(plan)}
            for start in range(0, n, max_plans):
                yield PlanGrid(layouts={k: v[start:start + max_plans] for k, v in columns.items()},
                               axes=(), single={})

    def cluster_grids(self, combinations: Iterable[Mapping[str, Any]] | None = None, *,
                      max_plans: int = GRID_PLANS) -> Iterator[ClusterGrid]:
        """The valid plans of every cluster (of `combinations` of the cluster knobs, default
        all) as grids of about `max_plans` plans, the layouts of clusters that share a GPU
        and pricing side by side in one grid (search_spaces.grid.ClusterGrid). Clusters that
        cannot be built are left out."""
        coded = self._coded(None)
        layout, axes = split_knobs(coded, max_plans=max_plans)
        grid_axes = tuple((name, coded[name]) for name in axes)
        single = {n: float(v[0]) for n, v in coded.items() if n not in layout and n not in axes}
        step = max(1, max_plans // math.prod(len(v) for _, v in grid_axes))
        open_groups: dict[tuple[str, str], _Pending] = {}
        for values in (self.cluster_combinations() if combinations is None else combinations):
            try:
                cluster = self.cluster(values)
            except SpecError:
                continue
            if not self._cluster_passes(cluster):
                continue
            if isinstance(cluster, MixedCluster):  # pools: evaluated alone, plan by plan
                yield from (ClusterGrid(grid=g, cluster=cluster, clusters=(cluster,),
                                        values=(values,), owner=np.zeros(g.rows, dtype=int))
                            for g in self.grids(cluster, max_plans=max_plans))
                continue
            key = (cluster.gpu.name, cluster.pricing)
            group = open_groups.get(key)  # empty where no plan fitted yet or all went out
            if group is not None and group.clusters and not joinable(group.clusters[0], cluster):
                yield from group.flush(grid_axes, single, step, final=True)
                group = None
            if group is None:
                group = open_groups[key] = _Pending()
            for rows in self._layouts(cluster, coded, layout):
                group.add(cluster, values, rows)
                yield from group.flush(grid_axes, single, step, final=False)
        for group in open_groups.values():
            yield from group.flush(grid_axes, single, step, final=True)

    def _coded(self, fixed: Mapping[str, Any] | None) -> dict[str, np.ndarray]:
        """Each plan knob's values as model numbers (`fixed` knobs: that one value)."""
        key = ("coded", _frozen(fixed))
        if key not in self._memo:
            given = dict(fixed or {})
            self._memo[key] = {
                n: encode_plan_values(n, [given[n]] if n in given else self.choices[n])
                for n in PLAN_FIELDS}
        coded: dict[str, np.ndarray] = self._memo[key]
        return coded

    def _cluster_passes(self, cluster: ClusterSpec | MixedCluster) -> bool:
        """The rules that read no knob (a GPU with the training's precision), per GPU."""
        if isinstance(cluster, MixedCluster):
            return global_rules_pass(self.model, cluster, self.training)
        key = ("global", cluster.gpu.name, cluster.gpu.peak_for(self.training.precision))
        if key not in self._memo:
            self._memo[key] = global_rules_pass(self.model, cluster, self.training)
        return bool(self._memo[key])

    def _layouts(self, cluster: ClusterSpec, coded: Mapping[str, np.ndarray],
                 layout: list[str]) -> Iterator[dict[str, np.ndarray]]:
        """The valid layouts (search_spaces.grid.layout_rows), kept per GPU count and layout
        values while they are few (a co-design space shares them between clusters)."""
        # `coded` lives in the memo (Space._coded): its id names it for the space's life
        key = ("layouts", float(np.ravel(cluster.gpus)[0]), id(coded), tuple(layout))
        if key in self._memo:
            yield from self._memo[key]
            return
        kept: list[dict[str, np.ndarray]] | None = []
        size = 0
        for rows in layout_rows(self.model, cluster, self.training, coded, layout):
            size += len(rows[layout[0]])
            if kept is not None:
                kept.append(rows)
                kept = kept if size <= _CACHED_ROWS else None
            yield rows
        if kept is not None:
            self._memo[key] = kept

    def count(self) -> int:
        """Structurally valid plans over every cluster combination."""
        total = 0
        for values in self.cluster_combinations():
            try:
                cluster = self.cluster(values)
            except SpecError:
                continue
            total += sum(g.size for g in self.grids(cluster))
        return total


def _frozen(fixed: Mapping[str, Any] | None) -> tuple[Any, ...]:
    """A hashable form of `fixed` knob values (custom GPUs by their repr)."""
    if not fixed:
        return ()
    return tuple(sorted((k, repr(v)) for k, v in fixed.items()))


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


class _Pending:
    """Layout rows of clusters of one GPU and pricing waiting to fill a grid."""

    def __init__(self) -> None:
        self.clusters: list[ClusterSpec] = []
        self.values: list[Mapping[str, Any]] = []
        self.rows: list[dict[str, np.ndarray]] = []
        self.owners: list[np.ndarray] = []
        self.count = 0

    def add(self, cluster: ClusterSpec, values: Mapping[str, Any],
            rows: dict[str, np.ndarray]) -> None:
        if not self.clusters or self.clusters[-1] is not cluster:
            self.clusters.append(cluster)
            self.values.append(values)
        n = len(next(iter(rows.values())))
        self.rows.append(rows)
        self.owners.append(np.full(n, len(self.clusters) - 1))
        self.count += n

    def flush(self, axes: tuple[tuple[str, np.ndarray], ...], single: Mapping[str, float],
              step: int, *, final: bool) -> Iterator[ClusterGrid]:
        """Grids of `step` rows while there are that many (and the rest when `final`)."""
        if self.count < step and not (final and self.count):
            return
        names = list(self.rows[0])
        rows = {n: np.concatenate([r[n] for r in self.rows]) for n in names}
        owner = np.concatenate(self.owners)
        whole = len(owner) if final else len(owner) - len(owner) % step
        for start in range(0, whole, step):
            part = owner[start:start + step]
            used = np.unique(part)
            local = np.searchsorted(used, part)
            clusters = tuple(self.clusters[i] for i in used)
            grid = PlanGrid(layouts={n: v[start:start + step] for n, v in rows.items()},
                            axes=axes, single=single)
            yield ClusterGrid(grid=grid, cluster=stack_clusters(clusters, local, 1 + len(axes)),
                              clusters=clusters, values=tuple(self.values[i] for i in used),
                              owner=local)
        rest = owner[whole:]
        keep = np.unique(rest)
        self.rows = [{n: v[whole:] for n, v in rows.items()}] if len(rest) else []
        self.owners = [np.searchsorted(keep, rest)] if len(rest) else []
        self.clusters = [self.clusters[i] for i in keep]
        self.values = [self.values[i] for i in keep]
        self.count = len(rest)
