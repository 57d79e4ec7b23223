"""The README's `curl` session (its ```shell-session block), run against a real `tuner serve`:
every command after `tuner serve &` runs in bash with `localhost:8080` replaced by the test
server's address and must exit 0; the output the README shows after it must be what it
prints, line by line (digits aside), up to a `...`."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from .serving import ROOT, serving

_BLOCK = re.compile(r"^```shell-session\n(.*?)^```", re.MULTILINE | re.DOTALL)

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl")


def session() -> list[tuple[str, list[str]]]:
    """(command, shown output) for each `$ ` line of the README's shell-session blocks."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    steps: list[tuple[str, list[str]]] = []
    for block in _BLOCK.findall(text):
        for line in block.splitlines():
            if line.startswith("$ "):
                steps.append((line[2:], []))
            elif steps:
                steps[-1][1].append(line)
    return steps


def _shape(line: str) -> str:
    return re.sub(r"[\d.,]+", "#", line).strip()


def test_the_readme_shows_a_serve_and_curl_session() -> None:
    commands = [c for c, _ in session()]
    assert commands and commands[0].startswith("tuner serve")
    assert sum(c.startswith("curl") for c in commands) >= 4


def test_the_readme_curl_session_runs(tmp_path: Path) -> None:
    (tmp_path / "search_spaces").symlink_to(ROOT / "search_spaces", target_is_directory=True)
    with serving(tmp_path, f"sqlite:///{tmp_path / 'readme.db'}") as server:
        address = server.url.removeprefix("http://")
        for command, shown in session()[1:]:
            done = subprocess.run(["bash", "-c", command.replace("localhost:8080", address)],
                                  cwd=tmp_path, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, f"$ {command}\n{done.stderr}"
            printed = done.stdout.splitlines()
            for i, line in enumerate(shown):
                if line == "...":
                    break
                assert i < len(printed) and _shape(printed[i]) == _shape(line), \
                    f"$ {command}: README shows {line!r}, got {printed[i:i + 1]}"
    assert (tmp_path / "gpt3-175b-1024-a100.html").is_file()
