"""search_spaces.wording.counted: the counts of every package's messages."""

from __future__ import annotations

from search_spaces.wording import counted


def test_one_is_singular_and_every_other_count_plural_with_separators() -> None:
    assert counted(1, "plan") == "1 plan"
    assert counted(0, "plan") == "0 plans"
    assert counted(3960, "plan") == "3,960 plans"
    assert counted(1, "completed trial") == "1 completed trial"
