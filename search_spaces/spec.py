"""A whole study spec (shared/SPEC.md): load it from YAML, ask whether it is fixed, and convert
a fixed one into the cost model's frozen inputs."""

# Annotations evaluated as written (no `from __future__ import annotations`): pydantic would
# otherwise compile and evaluate each field's annotation from its string when the class is
# made, 4 ms of every start with the spec sections (issue 14).

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Union

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Discriminator,
    PrivateAttr,
    Tag,
    ValidationError,
)

from cost import (
    DEFAULT_EFFICIENCY,
    ClusterSpec,
    Efficiency,
    InvalidPlanError,
    Plan,
    TrainingSpec,
    Workload,
    check_plan,
    precision_violation,
)
from cost.deepep import internode_dedup_runs
from cost.precision import MXFP8_SM, fp8_recipe_runs

from .calibration import load_profile
from .checks import price_problems, token_problems
from .choices import Choice, is_choice
from .cluster import ClusterSection, Expansion, GPUSection, PoolSection, gpu_spec
from .errors import SpecError, one_or_many
from .fields import Frozen
from .messages import from_validation_error
from .plan import PlanSection
from .sections import (
    Constraints,
    LayerEntry,
    LayersSection,
    MLASection,
    ModelSection,
    Objective,
    SearchSection,
    StackSection,
    TrainingSection,
    resolve_model,
)
from .yaml_io import decode_text, load_yaml, read_text

if TYPE_CHECKING:
    from cost import MixedCluster

__all__ = ["CostInputs", "StudySpec", "load_spec", "parse_spec"]

CostInputs = tuple[Workload, "ClusterSpec | MixedCluster", TrainingSpec, Plan]
"""What a fixed spec evaluates (the cluster quoted: cost.pools is imported for pools only)."""


def _model_kind(value: Any) -> str:
    kind = value.get("kind") if isinstance(value, dict) else getattr(value, "kind", None)
    return "<layers>" if kind == "layers" else "<transformer>"


def _one_cluster(value: Any) -> Any:
    if isinstance(value, list):
        raise ValueError("cluster is one mapping; for GPUs of several types list them as pools: "
                         "cluster: {pools: [{gpu: a100-80gb, nodes: 16}, {gpu: h100-80gb, "
                         "nodes: 8}]}")
    return value


MAX_NAME_CHARS = 512
"""The longest study name every storage keeps: Optuna's study_name column is VARCHAR(512)
(optuna.storages._rdb.models.MAX_INDEXED_STRING_LENGTH), which PostgreSQL and MySQL enforce
and SQLite does not."""


def _study_name(name: str) -> str:
    """A name a table, a header and a command line can show: not blank, no control
    characters (a line break would split every table that lists it)."""
    if not name.strip() or any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise ValueError(f"{name!r} is no study name: give one of visible characters (e.g. "
                         "name: llama3-70b-h100), or leave it out for the file's name")
    if len(name) > MAX_NAME_CHARS:
        raise ValueError(f"{len(name):,} characters; a study name has at most "
                         f"{MAX_NAME_CHARS} (a storage's column); shorten it")
    return name


def _distinct(objective: tuple[str, ...]) -> tuple[str, ...]:
    if len(set(objective)) != len(objective):
        raise ValueError(f"objective lists {objective[0]!r} twice; give two different ones")
    return objective


class StudySpec(Frozen):
    """One study: what is trained, on what cluster, the plan space, the goal and the search."""

    name: Annotated[str, AfterValidator(_study_name)] = "study"
    model: Annotated[
        Union[Annotated[ModelSection, Tag("<transformer>")],  # noqa: UP007
              Annotated[LayersSection, Tag("<layers>")]],
        Discriminator(_model_kind),
        BeforeValidator(resolve_model,  # a catalog name, or a section's mapping
                        json_schema_input_type=str | ModelSection | LayersSection)]
    training: TrainingSection
    cluster: Annotated[ClusterSection, BeforeValidator(_one_cluster)]
    plan: PlanSection = PlanSection()
    objective: Annotated[Objective, AfterValidator(_distinct)] = ("throughput",)
    constraints: Constraints = Constraints()
    search: SearchSection = SearchSection()
    calibration: str | None = None
    stack: StackSection = StackSection()
    _file: str = PrivateAttr(default="")

    @property
    def file(self) -> str:
        """The file the spec was loaded from ('' when built in code)."""
        return self._file

    def choice_fields(self) -> list[str]:
        """Dotted names of the values under `cluster` and `plan` that are choices."""
        found = [f"plan.{k}" for k, v in self.plan if is_choice(v)]
        found += [f"cluster.{k}" for k, v in self.cluster if is_choice(v)]
        for i, pool in enumerate(self.cluster.pools or ()):
            found += [f"cluster.pools[{i}].{k}" for k, v in pool if is_choice(v)]
        if self.cluster.expansion is not None:
            found += [f"cluster.expansion.{k}" for k, v in self.cluster.expansion if is_choice(v)]
        return found

    def efficiency(self) -> Efficiency:
        """The cost model's efficiency: the `calibration` profile (a path relative to the
        spec's file) or the defaults, with the features of the spec's `stack`."""
        return self.stack.apply(self._profile())

    def calibration_path(self) -> Path | None:
        """The calibration profile's file (`calibration`, relative to the spec's file), or
        None when the spec names none."""
        if self.calibration is None:
            return None
        path = Path(self.calibration)
        if not path.is_absolute() and self.file:
            path = Path(self.file).parent / path
        return path

    def _profile(self) -> Efficiency:
        path = self.calibration_path()
        if path is None:
            return DEFAULT_EFFICIENCY
        try:
            profile = load_profile(path)
        except SpecError as err:
            raise SpecError(str(err), file=self.file, field="calibration") from err
        self._check_profile_gpus(profile, path)
        return profile

    def _gpu_names(self) -> list[str]:
        """The names the spec's GPUs go by in a calibration profile: a catalog name, or a
        GPU mapping's `name` (every choice's)."""
        found: set[str] = set()
        for value in [self.cluster.gpu, *(p.gpu for p in self.cluster.pools or ())]:
            values = value.values() if is_choice(value) else (value,)  # type: ignore[union-attr]
            found.update(v if isinstance(v, str) else str(getattr(v, "name", ""))
                         for v in values if v is not None)
        return sorted(found)

    def _check_profile_gpus(self, profile: Efficiency, path: Path) -> None:
        """SpecError for a profile that calibrates other GPUs only (and nothing for every
        GPU): applied to this spec it would change nothing, and the study would run on the
        catalog's figures as if calibrated (a profile fitted on H100 runs named by an A100
        study)."""
        calibrated = sorted({g for g, _ in profile.gemm_fraction_by_gpu}
                            | {g for g, _ in profile.layers_fraction_by_gpu})
        ours = self._gpu_names()
        whole = profile.with_(gemm_fraction_by_gpu=(), layers_fraction_by_gpu=())
        if not calibrated or set(calibrated) & set(ours) or whole != DEFAULT_EFFICIENCY:
            return
        raise SpecError(f"{path} calibrates {', '.join(calibrated)}, not this spec's "
                        f"{', '.join(ours)}: it would change none of its numbers; fit a "
                        f"profile to runs on {ours[0] if ours else 'these GPUs'} "
                        "(`tuner calibrate`) or leave `calibration` out", file=self.file,
                        field="calibration")

    @property
    def is_fixed(self) -> bool:
        """True when the spec describes one configuration (no choices)."""
        return not self.choice_fields()

    def to_cost_inputs(self, *, check: bool = True) -> CostInputs:
        """(workload, ClusterSpec, TrainingSpec, Plan) for a fixed spec.

        Raises SpecError naming the first choice, or (with `check`) the plan's structural
        violations (cost.check_plan): the first, a root cause (the rules are ordered so that
        "tp=3 does not divide heads" comes before its consequence "dp=5.33 is not whole"), and
        how many more there are."""
        choices = self.choice_fields()
        if choices:
            raise SpecError("this value is a choice (a list or a range); give one value to "
                            "evaluate a plan, or run `tuner search` to search over it",
                            file=self.file, field=choices[0])
        try:
            model = self.model.to_model_spec()
            training = self.training.to_training_spec()
            cluster = self.cluster.to_cluster_spec(training.precision)
        except SpecError as err:
            raise err.with_file(self.file) from err
        plan = self.plan.record().to_plan()
        if check:
            try:
                check_plan(model, cluster, training, plan)
            except InvalidPlanError as err:
                raise SpecError(str(err), file=self.file, field="plan") from err
        return model, cluster, training, plan


SECTIONS: dict[str, type[BaseModel]] = {
    "": StudySpec, "model": ModelSection, "model<layers>": LayersSection,
    "model.attention": MLASection, "model.layers": LayerEntry, "training": TrainingSection,
    "cluster": ClusterSection, "cluster.gpu": GPUSection, "cluster.expansion": Expansion,
    "cluster.pools": PoolSection, "cluster.pools.gpu": GPUSection,
    "plan": PlanSection, "constraints": Constraints, "search": SearchSection,
    "stack": StackSection,
}


def parse_spec(data: Any, *, file: str = "", name: str = "study") -> StudySpec:
    """A StudySpec from already-parsed YAML data; `name` is the default study name."""
    if not isinstance(data, dict):
        got = "an empty document" if data is None else f"a {type(data).__name__}"
        raise SpecError("a spec is a YAML mapping with model, training, cluster, plan, ...; "
                        f"got {got}", file=file)
    try:
        spec = StudySpec.model_validate({"name": name, **data})
    except ValidationError as err:
        raise from_validation_error(err, file=file, sections=SECTIONS) from err
    problems = [*_precision_problems(spec), *price_problems(spec), *token_problems(spec),
                *_dedup_problems(spec), *_fp8_recipe_problems(spec)]
    if problems:
        raise one_or_many([p.with_file(file) for p in problems])
    spec._file = file
    return spec


def load_spec(path: str | Path, content: bytes | None = None, *,
              name: str | None = None) -> StudySpec:
    """Read a study spec from a YAML file (UTF-8; plain values only; no key given twice), or
    parse `content`, the bytes already read from it (a pipe, `<(command)`, reads once).
    `name` is the study's name where the spec gives none (default: the file's stem).

    Raises FileNotFoundError for a missing file and SpecError naming the file and the field
    for anything wrong in it (a SpecErrors, one line each, when several things are)."""
    path = Path(path)
    text = read_text(path) if content is None else decode_text(content, path)
    data = load_yaml(text, file=str(path))
    return parse_spec(data, file=str(path), name=name or path.stem)


def _precision_problems(spec: StudySpec) -> list[SpecError]:
    """A fixed GPU (of the cluster or of a pool) must support the training precision (a list
    of GPUs is pruned instead)."""
    precision = spec.training.precision
    gpus = [spec.cluster.gpu] + [p.gpu for p in spec.cluster.pools or ()]
    out = []
    for gpu in gpus:
        if gpu is None or isinstance(gpu, Choice):
            continue
        found = gpu_spec(gpu, precision)
        problem = precision_violation(found.peak_flops_per_s, found.name, precision)
        if problem:
            out.append(SpecError(f"{problem} or another GPU", field="training.precision"))
    return out


def _fixed_or_chosen_gpus(spec: StudySpec) -> list[Any]:
    """Every GPU the cluster, its pools or their choices may hold."""
    values = [spec.cluster.gpu] + [p.gpu for p in spec.cluster.pools or ()]
    return [v for value in values if value is not None
            for v in (value.values() if is_choice(value) else (value,))]  # type: ignore[union-attr]


def _fp8_recipe_problems(spec: StudySpec) -> list[SpecError]:
    """fp8 training whose stack states a scaling recipe that a GPU of the cluster, its pools
    or their choices cannot run (cost.precision.fp8_recipe_runs: MXFP8 on Blackwell and
    newer); a plan for it would fail at its first step."""
    recipe = spec.stack.fp8_recipe
    if spec.training.precision != "fp8" or recipe is None:
        return []
    for gpu in _fixed_or_chosen_gpus(spec):
        found = gpu_spec(gpu, spec.training.precision)
        if not fp8_recipe_runs(recipe, found.compute_capability):
            sm = f"SM{(found.compute_capability or 0) * 10:g}"
            return [SpecError(
                f"{recipe} needs SM{MXFP8_SM * 10:g} (Blackwell) or newer GPUs (Transformer "
                f"Engine's block-scaled fp8 GEMMs); {found.name} is {sm}; choose delayed, "
                "current or blockwise, or another GPU", field="stack.fp8_recipe")]
    return []


def _dedup_problems(spec: StudySpec) -> list[SpecError]:
    """A mixture of experts whose stack states ep_dedup (DeepEP's internode dispatch) on a GPU
    it does not run on (cost.deepep: SM90 and newer), any GPU of the cluster, its pools or
    their choices. Left out, the model counts NCCL's all-to-all on such a GPU."""
    if spec.stack.ep_dedup is not True or getattr(spec.model, "experts", None) is None:
        return []
    for gpu in _fixed_or_chosen_gpus(spec):
        found = gpu_spec(gpu, spec.training.precision)
        if not internode_dedup_runs(found.compute_capability):
            sm = f"SM{(found.compute_capability or 0) * 10:g}"
            return [SpecError(
                f"true needs DeepEP's internode dispatch, which runs on SM90 (Hopper) "
                f"and newer GPUs; {found.name} is {sm}; leave ep_dedup out (the model then "
                "counts NCCL's all-to-all on it) or choose another GPU",
                field="stack.ep_dedup")]
    return []
