"""A study's trial counts under one name in every answer: the HTTP API's status (and
`tuner worker --json`) says `target`, `completed`, `failed`, where `tuner studies --json` (and
GET /v1/studies) said only `target_trials`, `complete`, `fail`, and `tuner search --json` only
`trials` (the complete ones: `tuner studies` counts every trial under that name). Each now
also gives `target`, `completed` and `failed` where it counts them; the old names stay."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from studies import load_study, open_storage
from tuner.cli import main
from tuner.serve.models import StudySummary
from tuner.serve.progress import status

from .specs import searched_tiny


def test_the_counts_have_the_same_names_in_search_studies_and_status(tmp_path: Path) -> None:
    storage, search = searched_tiny(tmp_path, "counted", 6)
    runner = CliRunner()
    listed = runner.invoke(main, ["studies", "--storage", storage, "--json"])
    assert listed.exit_code == 0, listed.output
    row = json.loads(listed.stdout)[0]
    StudySummary.model_validate(row)
    store = open_storage(storage, heartbeat_interval_s=None, create=False)
    now = status(load_study(store, "counted"), live=0, error=None)
    for answer in (search, row):
        assert answer["target"] == now["target"] == 6
        assert answer["completed"] == now["completed"]
    assert row["failed"] == now["failed"] == row["fail"]
    assert row["completed"] == row["complete"] == search["trials"]
    assert row["target"] == row["target_trials"]
