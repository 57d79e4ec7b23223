"""Files given with --out (a calibration profile, a report, an export) are written whole: a
temporary file beside them renamed over them, so that a failure mid-write (a signal, a full
disk) leaves the file as it was, and no temporary file is left behind."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

import tuner.cli.paths
from tuner.cli import main

from .specs import tiny, write


@pytest.fixture
def stored(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 's.db'}"
    data = tiny("whole", search={"sampler": "random", "trials": 2, "seed": 0})
    result = CliRunner().invoke(main, ["search", str(write(tmp_path, data)), "--storage", url,
                                       "--json"])
    assert result.exit_code == 0, result.output
    return url


def test_a_failed_write_leaves_the_file_as_it_was(tmp_path: Path, stored: str,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "trials.csv"
    out.write_text("what was there\n", encoding="utf-8")

    def fail(src: str, dst: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tuner.cli.paths.os, "replace", fail)
    result = CliRunner().invoke(main, ["export", "whole", "--csv", "--out", str(out),
                                       "--storage", stored])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"error: {out}: cannot write the export (No space left on device); give --out a "
        "writable file"]
    assert out.read_text(encoding="utf-8") == "what was there\n"
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_written_file_has_the_permissions_a_new_file_gets(tmp_path: Path,
                                                            stored: str) -> None:
    out = tmp_path / "report.html"
    result = CliRunner().invoke(main, ["report", "whole", "--out", str(out), "--storage",
                                       stored])
    assert result.exit_code == 0, result.output
    mask = os.umask(0)
    os.umask(mask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~mask
    out.chmod(0o600)  # an existing file keeps its own
    assert CliRunner().invoke(main, ["report", "whole", "--out", str(out), "--storage",
                                     stored]).exit_code == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    assert "<html" in out.read_text(encoding="utf-8").lower()


def test_a_device_or_pipe_is_written_as_it_is(tmp_path: Path, stored: str) -> None:
    """--out /dev/stdout or a named pipe: nothing is renamed over it (a regular file in its
    place would break it)."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    read = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        result = CliRunner().invoke(main, ["export", "whole", "--json", "--out", str(fifo),
                                           "--storage", stored])
        assert result.exit_code == 0, result.output
        assert stat.S_ISFIFO(fifo.stat().st_mode)
        assert os.read(read, 1 << 16).startswith(b"[")
    finally:
        os.close(read)


def test_a_link_to_a_file_writes_the_file(tmp_path: Path, stored: str) -> None:
    real = tmp_path / "real.csv"
    real.write_text("old\n", encoding="utf-8")
    link = tmp_path / "link.csv"
    link.symlink_to(real)
    result = CliRunner().invoke(main, ["export", "whole", "--csv", "--out", str(link),
                                       "--storage", stored])
    assert result.exit_code == 0, result.output
    assert link.is_symlink() and real.read_text(encoding="utf-8").startswith("number")
