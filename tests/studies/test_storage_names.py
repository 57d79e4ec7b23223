"""Messages name a storage as the user gave it (its redacted URL or journal path), whatever
object holds it: a journal, or the cache Optuna puts in front of an RDB storage (what
`study._storage` is, which `tuner resume` and `tuner worker` check a study through)."""

from __future__ import annotations

from pathlib import Path

import pytest

from studies import StudyError, create_or_continue, load_study, open_storage

from .builders import gpt3_text, spec_of, storage_in


def test_a_journal_is_named_by_its_url(tmp_path: Path) -> None:
    url = f"journal:///{tmp_path / 'team.log'}"
    storage = open_storage(url)
    with pytest.raises(StudyError) as err:
        load_study(storage, "nope")
    assert f"in {url};" in str(err.value) and "JournalStorage" not in str(err.value)


def test_a_journal_path_is_named_as_given(tmp_path: Path) -> None:
    path = str(tmp_path / "team.log")
    with pytest.raises(StudyError) as err:
        load_study(open_storage(path), "nope")
    assert f"in {path};" in str(err.value)


def test_the_cache_in_front_of_a_database_is_named_by_its_url(tmp_path: Path) -> None:
    text = gpt3_text()
    study = create_or_continue(storage_in(tmp_path), spec_of(text), text,
                               directions=["maximize"], target_trials=1)
    with pytest.raises(StudyError) as err:
        load_study(study._storage, "nope")
    assert f"in sqlite:///{tmp_path / 'studies.db'};" in str(err.value)
    assert "CachedStorage" not in str(err.value)
