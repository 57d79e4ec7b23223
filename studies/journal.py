"""A journal-file storage whose running trials name their worker from the moment they run.

A journal has no heartbeats, so studies.recovery tells a dead worker's trial by the worker it
records (WORKER_ATTR). Recording it in the objective would leave a window, while the sampler
proposes, in which a killed worker's trial names nobody and waits JOURNAL_STALE_S to be
recovered; this storage records it right after the trial is created or taken from the queue.
"""

from __future__ import annotations

from typing import Any

import optuna
from optuna.trial import TrialState

from .recovery import WORKER_ATTR, worker_identity

__all__ = ["StampingJournalStorage"]


class StampingJournalStorage(optuna.storages.JournalStorage):
    """JournalStorage that stamps each trial this process starts running with its worker, and
    keeps the `url` it was opened from (the name messages give it, as an RDB storage's)."""

    def __init__(self, backend: Any, *, url: str = "") -> None:
        super().__init__(backend)
        self.url = url

    def create_new_trial(self, study_id: int, template_trial: Any = None) -> int:
        trial_id = super().create_new_trial(study_id, template_trial)
        if template_trial is None or template_trial.state == TrialState.RUNNING:
            self._stamp(trial_id)
        return trial_id

    def set_trial_state_values(self, trial_id: int, state: TrialState,
                               values: Any = None) -> bool:
        taken = super().set_trial_state_values(trial_id, state, values)
        if taken and state == TrialState.RUNNING:
            self._stamp(trial_id)
        return taken

    def _stamp(self, trial_id: int) -> None:
        number = self.get_trial_number_from_id(trial_id)
        self.set_trial_system_attr(trial_id, WORKER_ATTR, {**worker_identity(), "trial": number})
