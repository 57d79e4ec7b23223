"""The boundary between users and the cost model: study specs in YAML, quantities with units,
the GPU and model catalogs, declarative choices, the conversion to `cost` inputs, and the
search space (each knob's valid values, derived from cost.validity, and the valid plans).

May import `cost`, pydantic and PyYAML; knows nothing of Optuna (shared/STYLE.md, sec. 1, 10).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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
    "MEMORY_CONSTRAINTS",
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
    "miss_key",
    "model_catalog",
    "model_info",
    "nearest_index",
    "parse_headroom",
    "parse_quantity",
    "parse_spec",
    "profile_text",
    "read_text",
    "required_free_bytes",
]

_MODULE_OF = {
    "CLUSTER_KNOBS": "space",
    "Choice": "choices",
    "ClusterSection": "cluster",
    "Constraints": "sections",
    "CostInputs": "spec",
    "Expansion": "cluster",
    "GPUSection": "cluster",
    "GRID_PLANS": "space",
    "INNER_KNOBS": "space",
    "IntRange": "choices",
    "KINDS": "units",
    "MEMORY_CONSTRAINTS": "misses",
    "ModelSection": "sections",
    "OBJECTIVES": "sections",
    "OUTER_PLAN_KNOBS": "space",
    "PLAN_FIELDS": "plan",
    "PlanSection": "plan",
    "SearchSection": "sections",
    "Space": "space",
    "SpecError": "errors",
    "SpecErrors": "errors",
    "StackSection": "sections",
    "StudySpec": "spec",
    "TrainingSection": "sections",
    "encode_plan_values": "space",
    "gpu_catalog": "catalog",
    "gpu_info": "catalog",
    "is_choice": "choices",
    "load_profile": "calibration",
    "load_spec": "spec",
    "load_yaml": "yaml_io",
    "model_catalog": "catalog",
    "miss_key": "misses",
    "model_info": "catalog",
    "nearest_index": "misses",
    "parse_headroom": "headroom",
    "parse_quantity": "units",
    "parse_spec": "spec",
    "profile_text": "calibration",
    "read_text": "yaml_io",
    "required_free_bytes": "headroom",
}
"""The module that defines each name above: imported on first use (PEP 562), so that a
command imports only what it reads (`tuner evaluate` neither the space's enumeration nor its
grid of plans, search_spaces.space and .grid)."""


def __getattr__(name: str) -> Any:
    """`search_spaces.NAME`, imported from its module the first time it is asked for."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups find it without this function
    return value
