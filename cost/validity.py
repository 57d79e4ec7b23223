"""Structural validity of a plan: what a workload's parallelism can run at all.

The one place that says which plans are valid (shared/STYLE.md, sec. 7): the rules every
workload shares are here, a workload adds its own (cost.workload.Rule), and from the same
rules come the model's `valid` mask, the messages that refuse a fixed plan (InvalidPlanError),
the values a search space offers (allowed_values) and the alternatives a message suggests
(passing_values).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from .codec import KNOBS, Offload, Recompute, Sync
from .degrees import Degrees, degrees
from .efficiency import DEFAULT_EFFICIENCY
from .errors import CostModelError
from .inputs import Array, ClusterSpec, Plan, TrainingSpec, Value
from .numerics import close, is_zero
from .workload import Rule, Workload

if TYPE_CHECKING:
    # pools of several GPU types; a cluster that is not a ClusterSpec is one. Imported where
    # pools are met, so that a cluster of one type never imports cost.pools (issue 14)
    from .pools import MixedCluster

    AnyCluster = ClusterSpec | MixedCluster

__all__ = [
    "InvalidPlanError",
    "NoValidValueError",
    "allowed_values",
    "check_plan",
    "passing_values",
    "plan_violations",
    "precision_violation",
    "rules",
    "structurally_valid",
    "valid_mask",
]

_FIELD = {"virtual_stages": "vs", "micro_batch": "mb", "sequence_parallel": "sp",
          "batch_shares": "shares"}
"""Plan knob -> Degrees field, where the names differ."""
_DATA, _PIPELINE, _BALANCED = 0.0, 1.0, 0.0  # cost.codec.Placement and Shares codes


class InvalidPlanError(CostModelError):
    """A plan the workload cannot run; `violations` holds every reason, root causes first."""

    def __init__(self, violations: Sequence[str]) -> None:
        self.violations = list(violations)
        extra = len(violations) - 1
        more = f" (and {extra} more problem{'s' if extra > 1 else ''} with this plan)" \
            if extra else ""
        super().__init__(self.violations[0] + more)


def _divides(d: Value, n: Value) -> Array:
    return is_zero(np.mod(n, np.maximum(d, 1.0)))


def _integral(x: Value) -> Array:
    whole = np.round(x)
    return (x == whole) | close(x, whole)  # np.isclose(x, round(x)), infinities included


def _one(value: Value) -> float:
    return float(np.ravel(value)[0])


def precision_violation(gpu_peaks: Mapping[str, float], gpu_name: str, precision: str
                        ) -> str | None:
    """Why a GPU cannot train in `precision` (None if it can). fp8 training also needs a bf16
    rate: attention and the output layer stay in bf16 (cost.transformer_time)."""
    if precision == "fp8" and gpu_peaks.get("fp8", 0.0) > 0 and not gpu_peaks.get("bf16", 0.0) > 0:
        return (f"GPU {gpu_name} has an fp8 rate but no bf16 one, which fp8 training's attention "
                "and output layer run at; give its bf16 peak too")
    if gpu_peaks.get(precision, 0.0) > 0:
        return None
    supported = ", ".join(sorted(p for p, x in gpu_peaks.items() if x > 0))
    return f"GPU {gpu_name} has no {precision} support; choose precision from {supported}"


def _gpus_of(cluster: AnyCluster) -> list[Any]:
    if not isinstance(cluster, ClusterSpec):
        return [cluster.pools[i].gpu for i in cluster.used]
    return [cluster.gpu]


def _common_rules(cluster: AnyCluster, training: TrainingSpec) -> tuple[Rule, ...]:
    """Degrees whole and filling the cluster, micro-batches dividing the batch (each replica
    its equal share, or, with balanced shares across pools, any share of at least one),
    interleaving with a pipeline, knob values from their vocabularies, a precision every GPU
    has."""
    batch = training.global_batch
    codes = {name: [float(i) for i in range(len(vocab))]
             for name, vocab in (("recompute", Recompute), ("offload", Offload))}
    precision = next((v for g in _gpus_of(cluster) if (v := precision_violation(
        g.peak_flops_per_s, g.name, training.precision)) is not None), None)
    uneven = not isinstance(cluster, ClusterSpec) and len(cluster.used) > 1  # shares may differ

    def degrees_text(d: Degrees) -> str:
        return ("tp, pp, dp, cp, virtual_stages and micro_batch must be whole numbers >= 1 "
                f"(got tp={_one(d.tp):g} pp={_one(d.pp):g} dp={_one(d.dp):g} "
                f"cp={_one(d.cp):g} virtual_stages={_one(d.vs):g} micro_batch={_one(d.mb):g});"
                " change the plan")

    layout = ("tp", "pp", "cp", "gpus")
    return (
        Rule("model_parallel", layout, lambda d: ~_divides(d.tp * d.pp * d.cp, d.gpus),
             lambda d: f"tp·pp·cp = {_one(d.tp * d.pp * d.cp):g} does not divide the "
                       f"{_one(d.gpus):g} GPUs; choose tp, pp and cp whose product divides it"),
        Rule("gpus", ("dp", *layout), lambda d: ~close(d.tp * d.pp * d.dp * d.cp, d.gpus),
             lambda d: f"tp·pp·dp·cp = {_one(d.tp * d.pp * d.dp * d.cp):g} is not the "
                       f"{_one(d.gpus):g} GPUs of the cluster; change dp or leave it out to "
                       "fill the cluster"),
        Rule("degrees", ("dp", "virtual_stages", "micro_batch", *layout),
             lambda d: ~np.logical_and.reduce([(x >= 1) & _integral(x) for x in
                                               (d.tp, d.pp, d.dp, d.cp, d.vs, d.mb)]),
             degrees_text),
        Rule("batch", ("micro_batch", "dp", "placement", "batch_shares", *layout),
             lambda d: np.where(uneven & (d.placement == _DATA) & (d.shares == _BALANCED),
                                ~_divides(d.mb, batch) | (batch / d.mb < d.dp),
                                ~_divides(d.dp * d.mb, batch)),
             lambda d: f"dp·micro_batch = {_one(d.dp * d.mb):g} does not divide "
                       f"global_batch={batch}" + (" (with balanced shares across pools: "
                       "micro_batch must divide it, one micro-batch a replica at least)"
                       if uneven else "") + "; change micro_batch or dp"),
        Rule("interleave", ("virtual_stages", "micro_batch", "dp", *layout),
             lambda d: (d.vs > 1) & ((d.pp < 2) | ~_divides(d.pp, d.micro_batches)),
             lambda d: f"virtual_stages={_one(d.vs):g} needs pp >= 2 and micro-batches "
                       f"({_one(d.micro_batches):g}) divisible by pp={_one(d.pp):g}; "
                       "set virtual_stages: 1 or change micro_batch"),
        Rule("choices", ("recompute", "zero", "offload", "sync", "parameter_servers",
                         "placement", "batch_shares"),
             lambda d: ~(np.isin(d.recompute, codes["recompute"])
                         & np.isin(d.zero, (0, 1, 2, 3))
                         & np.isin(d.offload, codes["offload"])
                         & np.isin(d.sync, [-1.0, *range(len(Sync))])
                         & (d.parameter_servers >= 1) & _integral(d.parameter_servers)
                         & np.isin(d.placement, (0, 1)) & np.isin(d.shares, (0, 1))),
             lambda d: "recompute must be none|selective|full, zero 0-3, offload "
                       "none|optimizer|optimizer+weights, sync ring|tree|hierarchical|direct|"
                       "parameter_server, parameter_servers a whole number >= 1, placement "
                       "data|pipeline, batch_shares balanced|equal"),
        Rule("shard_group", ("shard_group", "zero", "dp", *layout),
             lambda d: ~_divides(d.shard_group, d.dp * d.cp)
             | ((d.zero < 1) & ~close(d.shard_group, d.dp * d.cp)),
             lambda d: f"shard_group={_one(d.shard_group):g} must divide the "
                       f"{_one(d.dp * d.cp):g} data-parallel ranks (dp·cp) and needs zero >= 1; "
                       "change it or leave it out"),
        Rule("precision", (), lambda d: np.asarray(precision is not None),
             lambda d: str(precision)),
    )


def _knob_rule(workload: Workload) -> Rule:
    """Knobs that do not apply to the workload keep their defaults."""
    idle = [k for k in KNOBS if k.name not in workload.knobs
            and k.name not in ("dp", "tp", "pp", "cp", "virtual_stages", "micro_batch",
                               "shard_group")]
    defaults = {k.name: float(k.encode([k.default])[0]) for k in idle}

    def broken(d: Degrees) -> Array:
        out: Array = np.zeros((), dtype=bool)
        for name, code in defaults.items():
            out = out | (np.asarray(getattr(d, _FIELD.get(name, name))) != code)
        return out

    def text(d: Degrees) -> str:
        names = ", ".join(defaults)
        return (f"{names} do not apply to {workload.describe()}; leave them out of the plan "
                "(their defaults)")

    return Rule("knobs", tuple(defaults), broken, text)


def _single_type_rules() -> tuple[Rule, ...]:
    """On one GPU type, placement and batch shares keep their defaults."""
    return (Rule("placement", ("placement", "batch_shares"),
                 lambda d: (d.placement != _DATA) | (d.shares != _BALANCED),
                 lambda d: "placement and batch_shares apply to a cluster of several GPU types "
                           "(cluster.pools); leave them out of the plan"),)


def _pool_rules(workload: Workload, cluster: MixedCluster, training: TrainingSpec
                ) -> tuple[Rule, ...]:
    """On pools of several GPU types: each used pool holds whole replicas (data) or whole
    stages (pipeline), and whole expert groups (data); a pipeline across pools needs alike
    layers and 1F1B stages (no interleaving); balanced shares reduce gradients once per step
    (ZeRO 0 or 1)."""
    used = cluster.used
    if len(used) < 2:
        return ()
    gpus = [cluster.pool_gpus(i) for i in used]
    probe = degrees(cluster, training, Plan())
    alike = workload.layer_costs(cluster.pools[used[0]], training, probe,
                                 DEFAULT_EFFICIENCY) is not None

    def unit(d: Degrees) -> Array:
        return np.where(d.placement == _PIPELINE, d.dp * d.tp * d.cp, d.tp * d.pp * d.cp)

    def layout(d: Degrees) -> Array:
        return ~np.logical_and.reduce([_divides(unit(d), g) & (unit(d) <= g) for g in gpus])

    def layout_text(d: Degrees) -> str:
        what = ("dp·tp·cp (a stage)" if _one(d.placement) == _PIPELINE
                else "tp·pp·cp (a replica)")
        sizes = ", ".join(f"{cluster.label(i)}: {g:g}" for i, g in zip(used, gpus, strict=True))
        return (f"{what} = {_one(unit(d)):g} GPUs does not divide every pool's GPUs ({sizes});"
                " choose degrees that divide them, or the other placement")

    def experts(d: Degrees) -> Array:
        return (d.placement == _DATA) & ~np.logical_and.reduce(
            [_divides(d.ep * d.etp, g / d.pp) for g in gpus])

    return (
        Rule("pool_layout", ("tp", "pp", "cp", "dp", "placement", "gpus"), layout, layout_text),
        Rule("pool_experts", ("ep", "etp", "pp", "placement", "gpus"), experts,
             lambda d: f"ep·etp = {_one(d.ep * d.etp):g} must divide each pool's ranks of a "
                       "pipeline stage (its GPUs / pp) so that an expert group stays inside "
                       "a pool; choose ep and etp that divide them, or fewer pools"),
        Rule("pipeline_layers", ("placement",),
             lambda d: (d.placement == _PIPELINE) & (not alike),
             lambda d: f"{workload.describe()}: its layers are not alike, so it cannot be split "
                       "over pools by their speed; use placement: data"),
        Rule("pipeline_interleave", ("placement", "virtual_stages"),
             lambda d: (d.placement == _PIPELINE) & (d.vs > 1),
             lambda d: "a pipeline across pools runs 1F1B stages: set virtual_stages: 1 or "
                       "placement: data"),
        Rule("balanced_zero", ("placement", "batch_shares", "zero"),
             lambda d: (d.placement == _DATA) & (d.shares == _BALANCED) & (d.zero >= 2),
             lambda d: f"zero={_one(d.zero):g} reduces every micro-batch in lockstep, which "
                       "balanced shares across GPU types cannot keep; use batch_shares: equal "
                       "or zero 0 or 1"),
    )


def rules(workload: Workload, cluster: AnyCluster, training: TrainingSpec
          ) -> tuple[Rule, ...]:
    """Every structural rule for `workload` on `cluster`: the workload's own first (root
    causes: "tp=3 does not divide heads" before its consequence "dp=5.33 is not whole")."""
    extra = (_pool_rules(workload, cluster, training) if not isinstance(cluster, ClusterSpec)
             else _single_type_rules())
    return (*workload.rules(training), *_common_rules(cluster, training), *extra,
            _knob_rule(workload))


def _ways(cluster: AnyCluster, plan: Plan) -> list[tuple[AnyCluster, Plan]]:
    """The clusters a plan may run on: the cluster itself, or each set of a mixed cluster's
    pools (one pool alone as its own cluster)."""
    if isinstance(cluster, ClusterSpec):
        return [(cluster, plan)]
    from .pools import single_pool_plan

    return [(cluster.pools[o[0]], single_pool_plan(plan)) if len(o) == 1
            else (cluster.using(o), plan) for o in cluster.choices(ordered=False)]


def valid_mask(workload: Workload, cluster: AnyCluster, training: TrainingSpec,
               d: Degrees) -> Array:
    """True where a plan breaks no structural rule."""
    shape = d.shape
    broken: Array = np.zeros((), dtype=bool)
    for rule in rules(workload, cluster, training):  # each at the shape of the knobs it reads
        broken = broken | rule.broken(d)
    return ~np.broadcast_to(broken, shape)


def structurally_valid(workload: Workload, cluster: AnyCluster, training: TrainingSpec,
                       plan: Plan) -> Array:
    """True where a plan (any field an array) breaks no structural rule on some set of the
    cluster's pools."""
    return np.logical_or.reduce([valid_mask(workload, c, training, degrees(c, training, p))
                                 for c, p in _ways(cluster, plan)])


def plan_violations(workload: Workload, cluster: AnyCluster, training: TrainingSpec,
                    plan: Plan) -> list[str]:
    """What is structurally wrong with one plan, each message with the value, rule and fix
    (on a mixed cluster: none if some set of its pools runs it, else the whole cluster's)."""
    ways = _ways(cluster, plan)
    if len(ways) > 1:
        if bool(np.ravel(structurally_valid(workload, cluster, training, plan))[0]):
            return []
        ways = [(cluster.using(cluster.active()), plan)] \
            if not isinstance(cluster, ClusterSpec) else ways
    target, one = ways[0]
    d = degrees(target, training, one)
    return [r.message(d) for r in rules(workload, target, training)
            if bool(np.ravel(r.broken(d))[0])]


def check_plan(workload: Workload, cluster: AnyCluster, training: TrainingSpec,
               plan: Plan) -> None:
    """Raise InvalidPlanError with every violation of one plan, root causes first."""
    found = plan_violations(workload, cluster, training, plan)
    if found:
        raise InvalidPlanError(found)


def passing_values(broken: Any, d: Degrees, knob: str, candidates: Iterable[int],
                   **fixed: float) -> list[int]:
    """The candidates of `knob` for which `broken` (a Rule's predicate) holds not, the plan's
    other degrees as in `d` (one plan), or as `fixed` says."""
    values = np.array(list(candidates), dtype=np.float64)
    one = {f: np.full(values.shape, _one(getattr(d, f))) for f in Degrees.__slots__}
    one.update({k: np.full(values.shape, v) for k, v in fixed.items()})
    one[_FIELD.get(knob, knob)] = values
    trial = replace(d, **one)
    ok = ~np.broadcast_to(broken(trial), values.shape)
    return [int(v) for v in values[ok]]


class NoValidValueError(CostModelError):
    """No value of a knob passes a rule whatever the other knobs are: `knob` names it, and
    `example` is the rule's own message on one of the failing combinations (its first)."""

    def __init__(self, knob: str, rule: str, example: str = "") -> None:
        self.knob, self.rule, self.example = knob, rule, example
        super().__init__(f"no value of plan.{knob} passes the rule {rule!r}"
                         + (f": {example}" if example else ""))


def allowed_values(workload: Workload, cluster: ClusterSpec, training: TrainingSpec,
                   choices: Mapping[str, Sequence[float]], *, gpu_counts: Sequence[float]
                   ) -> dict[str, list[float]]:
    """Each knob's values (model numbers, cost.codec) that some combination of the other
    knobs of `choices` (and of the `gpu_counts` the space allows) lets pass every rule that
    reads the knob: a value no combination can use is not offered. Rules of fewer knobs go
    first, to a fixed point; the first knob left with no value raises NoValidValueError (of a
    rule of several knobs, the first knob it lists). `cluster` stands for the space's clusters
    only for the rules that read no GPU count (precision)."""
    out = {k.name: list(choices.get(k.name, k.encode([k.default]))) for k in KNOBS}
    ordered = sorted((r for r in rules(workload, cluster, training)
                      if r.knobs and r.name != "precision"), key=lambda r: len(r.knobs))
    for _ in range(3):
        before = {k: len(v) for k, v in out.items()}
        for rule in ordered:
            _narrow(rule, out, cluster, training, list(gpu_counts))
        if before == {k: len(v) for k, v in out.items()}:
            break
    return out


def _narrow(rule: Rule, out: dict[str, list[float]], cluster: ClusterSpec,
            training: TrainingSpec, gpu_counts: list[float]) -> None:
    """Keep, of each knob `rule` reads, the values that pass it with some combination of the
    others' values (in place)."""
    names = list(rule.knobs)
    before = {n: list(out[n]) for n in names if n in out}
    passing = _passing(rule, {**out, "gpus": gpu_counts}, cluster, training)
    for name in names:
        if name in out:
            out[name] = [v for v in out[name] if v in passing[name]]
    emptied = [n for n in names if n in out and not out[n]]
    if len(emptied) > 1:  # blame the knob that fails even beside the others' defaults
        defaults = {k.name: [float(k.encode([k.default])[0])] for k in KNOBS}
        alone = [n for n in emptied if not _passing(
            rule, {**defaults, n: before[n], "gpus": gpu_counts},
            cluster, training)[n]]
        emptied = alone or emptied
    if emptied:
        example = _failing_text(rule, {**out, **before, "gpus": gpu_counts}, cluster, training)
        raise NoValidValueError(emptied[0], rule.name, example)


def _failing_text(rule: Rule, values: Mapping[str, Sequence[float]], cluster: ClusterSpec,
                  training: TrainingSpec) -> str:
    """The rule's message on the first combination of `values` (each knob's first value and
    the first GPU count): one that fails, where no value of a knob passes with any other."""
    plan = Plan(**{k.name: np.float64(values[k.name][0]) for k in KNOBS})
    gpus = np.float64(values["gpus"][0])
    d = degrees(cluster.with_(nodes=gpus / np.asarray(cluster.gpus_per_node)), training, plan)
    return rule.message(d)


def _passing(rule: Rule, values: Mapping[str, Sequence[float]], cluster: ClusterSpec,
             training: TrainingSpec) -> dict[str, set[float]]:
    """For each knob `rule` reads, its values that pass the rule with some combination of
    the other knobs' `values`."""
    names = list(rule.knobs)
    axes = np.meshgrid(*(np.asarray(values[n], dtype=np.float64) for n in names),
                       indexing="ij")  # every combination, in itertools.product's order
    grid = np.stack([a.ravel() for a in axes], axis=1)
    given = dict(zip(names, grid.T, strict=True))
    plan = Plan(**{k.name: given.get(k.name, np.float64(values[k.name][0])) for k in KNOBS})
    gpus = given.get("gpus", np.asarray(values["gpus"][0], dtype=np.float64))
    d = degrees(cluster.with_(nodes=gpus / np.asarray(cluster.gpus_per_node)), training, plan)
    ok = ~np.broadcast_to(rule.broken(d), (grid.shape[0],))
    return {n: _distinct(grid[ok, i]) for i, n in enumerate(names)}


def _distinct(column: np.ndarray) -> set[float]:
    """The distinct values of a 1-D float array, as np.unique gives them, from a sort: numpy
    2's unique imports numpy.ma on its first call (9 ms, before a search forks its sweep),
    and a Python set of the whole column is ten times slower (its columns hold up to ~10,000
    combinations; 0.3 million values in all on benchmarks/specs/wide-codesign.yaml)."""
    ordered = np.sort(column)
    first = np.ones(ordered.shape, dtype=bool)
    first[1:] = ordered[1:] != ordered[:-1]
    return set(ordered[first].tolist())
