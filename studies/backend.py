"""The storage behind a study: Optuna puts a cache (_CachedStorage) in front of an RDBStorage,
and the code that reads the database itself (heartbeats, finish times, one transaction) needs
the storage behind it."""

from __future__ import annotations

import optuna

__all__ = ["backend"]


def backend(study: optuna.Study) -> optuna.storages.BaseStorage:
    """The study's storage, behind Optuna's cache where there is one (a JournalStorage is
    not behind one: its own `_backend` is the file it writes)."""
    storage = study._storage
    if isinstance(storage, optuna.storages.JournalStorage):
        return storage
    return getattr(storage, "_backend", storage)
