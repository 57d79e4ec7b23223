"""A study's plan in the words of the tools that run it: a fixed spec (YAML), Megatron-LM
command-line flags, NeMo 2 recipe overrides, a torchtitan TOML job config.

Each framework module maps the plan's knobs to that framework's documented option names
(cited in the module); a degree a plan record gains (expert parallelism: `ep`, `etp`) is
written wherever the framework has an option for it (launch.DEGREE_OPTIONS). A plan on pools
of several GPU types adds the uneven layer split of a pipeline across them and which nodes
hold what (export.pools). What a framework cannot express is said in a comment, never dropped
silently."""

from __future__ import annotations

from collections.abc import Callable

from ..engine.trial_spec import ChosenPlan
from . import megatron, nemo, spec, torchtitan
from .launch import LaunchPlan, launch_plan

__all__ = ["FORMATS", "LaunchPlan", "launch_plan", "render"]

FORMATS: dict[str, Callable[[ChosenPlan], str]] = {
    "spec": spec.render,
    "megatron": lambda chosen: megatron.render(launch_plan(chosen)),
    "nemo": lambda chosen: nemo.render(launch_plan(chosen)),
    "torchtitan": lambda chosen: torchtitan.render(launch_plan(chosen)),
}
"""Format name -> the text of a chosen plan in that format."""


def render(fmt: str, chosen: ChosenPlan) -> str:
    """The chosen plan as `fmt` (a key of FORMATS)."""
    return FORMATS[fmt](chosen)
