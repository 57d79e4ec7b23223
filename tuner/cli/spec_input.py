"""A spec given as `-`: read from standard input, as Unix tools read `-` (`tuner plan NAME
--as spec | tuner evaluate -`). Its errors name `<stdin>`; a spec there without `name` is
named `stdin`; a relative `calibration` is relative to the current directory."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from search_spaces import StudySpec

__all__ = ["STDIN", "STDIN_FILE", "STDIN_NAME", "is_stdin", "load_given", "read_given"]

STDIN = "-"
STDIN_FILE = "<stdin>"
STDIN_NAME = "stdin"


def is_stdin(path: str) -> bool:
    return path == STDIN


def read_given(path: str) -> bytes:
    """The bytes of the spec at `path`, or of standard input for `-` (which gives them once:
    read them once). OSError where a file cannot be read."""
    return sys.stdin.buffer.read() if is_stdin(path) else Path(path).read_bytes()


def load_given(path: str, content: bytes | None = None) -> StudySpec:
    """search_spaces.load_spec of `path`, standard input for `-` (its bytes `content` where
    already read)."""
    from search_spaces import load_spec

    if not is_stdin(path):
        return load_spec(path, content)
    data = read_given(path) if content is None else content
    return load_spec(STDIN_FILE, data, name=STDIN_NAME)
