"""Optuna samplers by the names of shared/SPEC.md (`search.sampler`)."""

from __future__ import annotations

import importlib.util
from typing import TYPE_CHECKING

from search_spaces import SpecError

if TYPE_CHECKING:
    import optuna

__all__ = ["SAMPLERS", "make_sampler"]

SAMPLERS = ("auto", "tpe", "nsga2", "gp", "random", "exhaustive")


def make_sampler(name: str, *, seed: int | None, objectives: int) -> optuna.samplers.BaseSampler:
    """TPE (multivariate, with the constant liar so that parallel workers spread out), NSGA-II,
    Gaussian-process BO (needs PyTorch) or random. `exhaustive` sweeps instead of sampling
    (and `auto` resolves to it or to an Optuna sampler, tuner.engine.auto): they get a
    random sampler, which nothing asks."""
    import optuna  # here, not at import: SAMPLERS is read by commands that start fast

    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, multivariate=True, constant_liar=True,
                                          n_startup_trials=10)
    if name == "nsga2":
        size = 20 if objectives > 1 else 30
        return optuna.samplers.NSGAIISampler(seed=seed, population_size=size)
    if name == "gp":
        if importlib.util.find_spec("torch") is None:
            raise SpecError("the gp sampler needs PyTorch: pip install torch, or choose "
                            "tpe, nsga2 or random", field="search.sampler")
        return optuna.samplers.GPSampler(seed=seed)
    if name in ("random", "exhaustive", "auto"):
        return optuna.samplers.RandomSampler(seed=seed)
    raise SpecError(f"unknown sampler {name!r}; choose one of {', '.join(SAMPLERS)}",
                    field="search.sampler")
