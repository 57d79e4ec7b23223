"""How to run a search (`SearchOptions`) and the checks of a spec made before any search,
without Optuna: the command line builds them before it imports Optuna (tuner.engine.forked)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from search_spaces import SpecError, StudySpec

from .interrupt import Stop

__all__ = ["SearchOptions", "check_objectives"]


@dataclass(frozen=True)
class SearchOptions:
    """Command-line overrides of the spec's `search` section, and how to run: `progress`
    (a bar on the terminal), `stop` (a stop request, signals routed to it by the caller),
    `notify` (one-line messages for the user), `worker` (an unseeded sampler, so that workers
    propose different plans)."""

    sampler: str | None = None
    trials: int | None = None
    seed: int | None = None
    timeout: float | None = None
    progress: bool = False
    sweep_inner: bool = True
    stop: Stop | None = None
    notify: Callable[[str], None] | None = None
    worker: bool = False

    def say(self, message: str) -> None:
        if self.notify is not None:
            self.notify(message)


def check_objectives(spec: StudySpec) -> None:
    """SpecError for an objective or constraint that needs training.tokens, not given."""
    needs_tokens = {"time_to_train", "cost"} & set(spec.objective)
    needs_tokens |= {c for c in ("max_cost", "max_days") if getattr(spec.constraints, c)}
    if needs_tokens and not spec.training.tokens:
        raise SpecError(f"{sorted(needs_tokens)[0]} needs the tokens to train; set "
                        "training.tokens (e.g. 300e9)", file=spec.file, field="training.tokens")
