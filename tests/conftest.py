"""Every test gets its own, empty cache of `tuner evaluate`'s results (tuner.cli.evaluated), so
that no test reads what another (or the user) cached, and the suite writes nothing under the
user's home; the variable reaches the processes a test starts too."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _own_evaluate_cache(tmp_path_factory: pytest.TempPathFactory,
                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TUNER_CACHE_DIR", str(tmp_path_factory.mktemp("evaluate-cache")))

