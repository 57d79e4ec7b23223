"""The chosen plan as a fixed spec file: the study's spec with the plan and cluster fixed
(`tuner evaluate` and `tuner explain` take it as it is)."""

from __future__ import annotations

import yaml

from ..engine.trial_spec import ChosenPlan

__all__ = ["render"]


def render(chosen: ChosenPlan) -> str:
    """YAML, in the order the study's spec was written. A calibration profile is named by its
    absolute path: the study's spec named it relative to that spec's file, and the file
    written here may go anywhere (`tuner plan NAME --as spec > plans/best.yaml`)."""
    name = _on_one_line(chosen.spec.name)
    header = (f"# {name}: trial {chosen.trial} of study {name.rsplit('-trial-', 1)[0]}, a "
              f"fixed plan ({chosen.result.step_time_s:.3f} s per step predicted)\n")
    data = dict(chosen.data)
    profile = chosen.spec.calibration_path()
    if profile is not None:
        data["calibration"] = str(profile.resolve())
    return header + yaml.safe_dump(data, sort_keys=False)


def _on_one_line(text: str) -> str:
    """`text` with the characters that end a line (for YAML: U+0085, U+2028, U+2029 too) as
    escapes: a study's name holding one cut the comment above the spec, and its rest was read
    as YAML (`tuner plan NAME --as spec | tuner evaluate -`: "malformed YAML")."""
    return "".join(c.encode("unicode_escape").decode("ascii") if len(f"a{c}a".splitlines()) > 1
                   else c for c in text)
