"""The objectives' names as Optuna's metric names (`Study.set_metric_names`), so that
optuna-dashboard and Optuna's plots label the values ("time_to_train (days)", not "Objective
0")."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Sequence

import optuna
import sqlalchemy.exc

__all__ = ["OBJECTIVE_UNITS", "metric_names", "name_metrics"]

OBJECTIVE_UNITS = {"throughput": "tokens/s", "time_to_train": "days", "cost": "USD"}
"""Each objective of shared/SPEC.md by the unit its stored values are in (tokens/s is
samples/s for a layers model)."""
_LOG = logging.getLogger(__name__)


def metric_names(objectives: Sequence[str]) -> list[str]:
    """'throughput (tokens/s)', 'time_to_train (days)', 'cost (USD)'."""
    return [f"{o} ({OBJECTIVE_UNITS[o]})" if o in OBJECTIVE_UNITS else str(o) for o in objectives]


def name_metrics(study: optuna.Study) -> None:
    """Give the study's values the names of its objectives (stored as `objectives` by
    studies.metadata), unless they have them or the storage cannot be written (read-only)."""
    objectives = list(study.user_attrs.get("objectives", []))
    names = metric_names(objectives)
    if len(names) != len(study.directions) or study.metric_names == names:
        return
    try:
        with warnings.catch_warnings():  # set_metric_names is experimental in Optuna 5
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(names)
    except (optuna.exceptions.StorageInternalError, sqlalchemy.exc.SQLAlchemyError,
            OSError) as err:
        _LOG.debug("metric names not stored (%s): the storage is read-only", err)
