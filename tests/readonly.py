"""A directory this process cannot write, for the tests that read studies from one: made
read-only by its mode (0o555) for an unprivileged user, by a read-only bind mount for root
(whom modes do not stop); the test is skipped, saying why, where neither is possible."""

from __future__ import annotations

import contextlib
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = ["read_only_directory"]


def _run(*args: str) -> bool:
    return subprocess.run(args, capture_output=True, check=False).returncode == 0


@contextlib.contextmanager
def read_only_directory(path: Path) -> Iterator[Path]:
    """`path` (an existing directory) read-only for the duration of the block."""
    if os.geteuid() != 0:
        path.chmod(0o555)
        try:
            yield path
        finally:
            path.chmod(0o755)
        return
    if not (_run("mount", "--bind", str(path), str(path))
            and _run("mount", "-o", "remount,ro,bind", str(path))):
        _run("umount", "--lazy", str(path))
        pytest.skip("root cannot be kept from writing here (no read-only bind mount)")
    try:
        if os.access(path, os.W_OK):
            pytest.skip("the read-only mount is still writable")
        yield path
    finally:  # lazily: the storages read in the block may still hold the files open
        _run("umount", "--lazy", str(path))
