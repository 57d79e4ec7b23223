"""The storage behind a study: Optuna puts a cache (_CachedStorage) in front of an RDBStorage,
and the code that reads the database itself (heartbeats, finish times, one transaction) needs
the storage behind it."""

from __future__ import annotations

import optuna

__all__ = ["backend"]


def backend(study: optuna.Study) -> optuna.storages.BaseStorage:
    """The study's storage, behind Optuna's cache where there is one."""
    storage = study._storage
    return getattr(storage, "_backend", storage)
