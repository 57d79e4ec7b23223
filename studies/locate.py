"""Which storage a command uses: `--storage`, else $TUNER_STORAGE, else the default
`sqlite:///studies.db`; with the default, studies made when the default was
`sqlite:///studies/studies.db` (until version 0.1) are still found there, with a note."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import optuna

from .errors import StudyError
from .storage import DEFAULT_STORAGE_URL, ENV_VAR, open_storage, storage_url

__all__ = ["LEGACY_STORAGE_URL", "Located", "locate_storage"]

LEGACY_STORAGE_URL = "sqlite:///studies/studies.db"
"""The default storage until version 0.1: `studies/studies.db` under the current directory."""
_LEGACY_FILE = Path("studies") / "studies.db"
_DEFAULT_FILE = Path("studies.db")


@dataclass(frozen=True)
class Located:
    """The storage URL to use, and a note for the user ('' when there is nothing to say)."""

    url: str
    note: str = ""


def _names(url: str, path: Path) -> set[str]:
    """The study names in a SQLite file (none when it is missing or unreadable)."""
    if not path.is_file():
        return set()
    try:
        storage = open_storage(url, heartbeat_interval_s=None, create=False, read_only=True)
        return set(optuna.study.get_all_study_names(storage))
    except StudyError:
        return set()


def _legacy_note(what: str, then: str = "to use it without this note") -> str:
    return (f"note: {what} studies/studies.db, the default storage of earlier versions (now "
            f"studies.db); give --storage {LEGACY_STORAGE_URL} {then}")


def locate_storage(cli_value: str | None, *, study: str | None = None) -> Located:
    """The storage for a command on `study` (or on every study, for a listing).

    Only with the default (no --storage, no $TUNER_STORAGE) and a `studies/studies.db` under
    the current directory: a study found there and not in `studies.db` is used there; a
    listing reads it when `studies.db` does not exist, and says how many studies it holds
    when both do."""
    url = storage_url(cli_value)
    if cli_value or os.environ.get(ENV_VAR) or not _LEGACY_FILE.is_file():
        return Located(url)
    legacy = _names(LEGACY_STORAGE_URL, _LEGACY_FILE)
    if study is not None:
        if study in legacy and study not in _names(DEFAULT_STORAGE_URL, _DEFAULT_FILE):
            return Located(LEGACY_STORAGE_URL, _legacy_note(f"study '{study}' is in"))
        return Located(url)
    if not _DEFAULT_FILE.is_file():
        return Located(LEGACY_STORAGE_URL, _legacy_note("listing"))
    if legacy:
        return Located(url, _legacy_note(
            f"{len(legacy)} more {'study is' if len(legacy) == 1 else 'studies are'} in",
            "to list them"))
    return Located(url)
