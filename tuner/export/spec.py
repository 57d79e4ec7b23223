"""The chosen plan as a fixed spec file: the study's spec with the plan and cluster fixed
(`tuner evaluate` and `tuner explain` take it as it is)."""

from __future__ import annotations

import yaml

from ..engine.trial_spec import ChosenPlan

__all__ = ["render"]


def render(chosen: ChosenPlan) -> str:
    """YAML, in the order the study's spec was written."""
    header = (f"# {chosen.spec.name}: trial {chosen.trial} of study "
              f"{chosen.spec.name.rsplit('-trial-', 1)[0]}, a fixed plan "
              f"({chosen.result.step_time_s:.3f} s per step predicted)\n")
    return header + yaml.safe_dump(chosen.data, sort_keys=False)
