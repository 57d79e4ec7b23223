"""The boundary between users and the cost model: study specs in YAML, quantities with units,
the GPU and model catalogs, declarative choices, the conversion to `cost` inputs, and the
search space (each knob's valid values, derived from cost.validity, and the valid plans).

May import `cost`, pydantic and PyYAML; knows nothing of Optuna (shared/STYLE.md, sec. 1, 10).
"""

from .calibration import load_profile, profile_text
from .catalog import gpu_catalog, gpu_info, model_catalog, model_info
from .choices import Choice, IntRange, is_choice
from .cluster import ClusterSection, Expansion, GPUSection
from .errors import SpecError, SpecErrors
from .headroom import parse_headroom, required_free_bytes
from .plan import PLAN_FIELDS, PlanSection
from .sections import (
    OBJECTIVES,
    Constraints,
    ModelSection,
    SearchSection,
    StackSection,
    TrainingSection,
)
from .space import (
    CLUSTER_KNOBS,
    GRID_PLANS,
    INNER_KNOBS,
    OUTER_PLAN_KNOBS,
    Space,
    encode_plan_values,
)
from .spec import CostInputs, StudySpec, load_spec, parse_spec
from .units import KINDS, parse_quantity
from .yaml_io import load_yaml, read_text

__all__ = [
    "CLUSTER_KNOBS",
    "GRID_PLANS",
    "INNER_KNOBS",
    "KINDS",
    "OBJECTIVES",
    "OUTER_PLAN_KNOBS",
    "PLAN_FIELDS",
    "Choice",
    "ClusterSection",
    "Constraints",
    "CostInputs",
    "Expansion",
    "GPUSection",
    "IntRange",
    "ModelSection",
    "PlanSection",
    "SearchSection",
    "Space",
    "SpecError",
    "SpecErrors",
    "StackSection",
    "StudySpec",
    "TrainingSection",
    "encode_plan_values",
    "gpu_catalog",
    "gpu_info",
    "is_choice",
    "load_profile",
    "load_spec",
    "load_yaml",
    "model_catalog",
    "model_info",
    "parse_headroom",
    "parse_quantity",
    "parse_spec",
    "profile_text",
    "read_text",
    "required_free_bytes",
]
