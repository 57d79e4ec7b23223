"""A spec given as a pipe (`tuner evaluate <(generate-spec)`, `/dev/stdin`) can be read once
only: `tuner evaluate` and `tuner search` read its bytes once and parse those, where they read
the file a second time (the answer cache's bytes, then the spec; the spec, then the text the
study stores) and got an empty document, or stored an empty spec that no later command could
parse."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from click.testing import CliRunner

from tuner.cli import main

from .specs import EXAMPLES

FIXED = EXAMPLES / "gpt3-175b-a100-fixed.yaml"


@contextmanager
def _pipe(data: bytes) -> Iterator[str]:
    """/dev/fd/N of a pipe holding `data` (what bash's `<(cat FILE)` gives a command)."""
    read, write = os.pipe()
    try:
        os.write(write, data)
        os.close(write)
        yield f"/dev/fd/{read}"
    finally:
        os.close(read)


def test_evaluate_reads_a_spec_from_a_pipe() -> None:
    with _pipe(FIXED.read_bytes()) as path:
        result = CliRunner().invoke(main, ["evaluate", path, "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["model"] == "gpt3-175b"


def test_search_stores_the_spec_it_read_from_a_pipe(tmp_path: Path) -> None:
    storage = f"sqlite:///{tmp_path / 's.db'}"
    with _pipe(FIXED.read_bytes()) as path:
        searched = CliRunner().invoke(main, ["search", path, "--storage", storage])
    assert searched.exit_code == 0, searched.output
    best = CliRunner().invoke(main, ["best", "gpt3-175b-a100-fixed", "--storage", storage])
    assert best.exit_code == 0, best.output
