"""Opening a study beside the sweep: the storage (Optuna's RDB storage runs its schema
migrations, which import alembic) and the study (created, or continued after its identity is
checked) are made in a background thread while the main thread counts, measures and sweeps
the space, so that a short exhaustive search does not wait for its storage twice. A thread
overlaps little with a sweep in this process (the interpreter lock); where the command line
forked the sweep (tuner.engine.forked), the main thread only waits for the child."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import optuna

from studies import swept

__all__ = ["StorageSource", "StudyOpening", "storage_of"]

StorageSource = optuna.storages.BaseStorage | Callable[[], optuna.storages.BaseStorage]
"""A storage, or a function that opens one (called in the background)."""


def storage_of(source: StorageSource) -> optuna.storages.BaseStorage:
    """The storage itself, opening it when `source` is a function."""
    return source if isinstance(source, optuna.storages.BaseStorage) else source()


class StudyOpening:
    """`open_study` running in a thread; `study()` waits for it (and raises what it raised),
    `settled()` is True once it failed or found the study's problem already swept (the sweep
    beside it can stop)."""

    def __init__(self, open_study: Callable[[], optuna.Study]) -> None:
        self._open = open_study
        self._study: optuna.Study | None = None
        self._error: BaseException | None = None
        self.swept: dict[str, Any] | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="open-study", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._study = self._open()
            self.swept = swept(self._study)
        except BaseException as err:  # handed to the main thread by study()
            self._error = err
        finally:
            self._done.set()

    def settled(self) -> bool:
        return self._done.is_set() and (self._error is not None or self.swept is not None)

    def study(self) -> optuna.Study:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._study is not None  # set whenever no error was
        return self._study
