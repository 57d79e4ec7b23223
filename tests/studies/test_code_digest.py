"""The cost model's version digest (studies.identity.code_digest): layout, comments and
docstrings do not move it; a formula does; it is the same in every process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from studies.identity import CACHE_ENV, cache_root, cached_code_digest, code_digest

FORMULA = '''
def bubble_s(stages, virtual, microbatch_s):
    return (stages - 1) / virtual * microbatch_s


def kind(name):
    return name in {"ring", "tree", "hierarchical", "direct"}
'''

LAID_OUT_ANEW = '''"""A module docstring."""

# a comment


def bubble_s(stages, virtual, microbatch_s):
    """Idle time per step of one stage under (interleaved) 1F1B."""
    # Narayanan et al., SC'21
    return (stages - 1) / virtual * microbatch_s  # seconds


def kind(name):
    """A sync algorithm's name?"""
    return name in {"ring", "tree", "hierarchical", "direct"}
'''


def _digest(tmp_path: Path, text: str) -> str:
    folder = tmp_path / "pkg"
    folder.mkdir(exist_ok=True)
    (folder / "model.py").write_text(text, encoding="utf-8")
    return code_digest(folder)


def test_comments_docstrings_and_blank_lines_do_not_move_it(tmp_path: Path) -> None:
    assert _digest(tmp_path, FORMULA) == _digest(tmp_path, LAID_OUT_ANEW)


def test_a_changed_formula_moves_it(tmp_path: Path) -> None:
    before = _digest(tmp_path, FORMULA)
    assert _digest(tmp_path, FORMULA.replace("(stages - 1)", "stages")) != before
    assert _digest(tmp_path, FORMULA.replace('"direct"', '"star"')) != before


def test_it_is_the_same_in_every_process(tmp_path: Path) -> None:
    here = _digest(tmp_path, FORMULA)
    for seed in ("1", "2"):
        done = subprocess.run(
            [sys.executable, "-c", "import sys; from pathlib import Path; "
             "from studies.identity import code_digest; print(code_digest(Path(sys.argv[1])))",
             str(tmp_path / "pkg")], capture_output=True, text=True, check=True,
            env={"PYTHONHASHSEED": seed, "PATH": ""}, cwd=Path(__file__).resolve().parents[2])
        assert done.stdout.strip() == here


def test_the_cached_digest_is_the_digest_and_follows_every_change(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    folder = tmp_path / "pkg"
    _digest(tmp_path, FORMULA)
    first = cached_code_digest(folder)
    assert first == code_digest(folder) == cached_code_digest(folder)
    (entry,) = (tmp_path / "cache" / "code-digest").iterdir()
    (folder / "model.py").write_text(FORMULA.replace("- 1", "- 2"), encoding="utf-8")
    assert cached_code_digest(folder) == code_digest(folder) != first
    (folder / "other.py").write_text("X = 1\n", encoding="utf-8")
    assert cached_code_digest(folder) == code_digest(folder)
    assert len(list(entry.parent.iterdir())) == 3
    (folder / "other.py").unlink()
    (folder / "model.py").write_text(FORMULA, encoding="utf-8")
    entry.write_text("damaged")
    assert cached_code_digest(folder) == first


def test_off_keeps_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(CACHE_ENV, "off")
    _digest(tmp_path, FORMULA)
    assert cached_code_digest(tmp_path / "pkg") == code_digest(tmp_path / "pkg")
    assert cache_root() is None
