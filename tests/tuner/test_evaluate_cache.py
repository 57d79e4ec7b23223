"""The cache of `tuner evaluate`'s results (tuner.cli.evaluated): a spec evaluated again is read
from it without pydantic, and every change its result depends on is a miss: the spec's bytes,
its path (the default name), its calibration profile, the packages' code and catalogs; a
damaged entry is a miss, and TUNER_CACHE_DIR=off writes nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from tuner.cli import evaluated, main

from .specs import EXAMPLES

ROOT = Path(__file__).resolve().parents[2]
FIXED = EXAMPLES / "gpt3-175b-a100-fixed.yaml"


def _json(spec: Path) -> dict[str, object]:
    result = CliRunner().invoke(main, ["evaluate", str(spec), "--json"])
    assert result.exit_code == 0, result.output
    found: dict[str, object] = json.loads(result.stdout)
    return found


def _uncached(spec: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, object]:
    with monkeypatch.context() as m:
        m.setenv(evaluated.CACHE_ENV, "off")
        return _json(spec)


def _entries() -> list[Path]:
    return sorted((Path(os.environ[evaluated.CACHE_ENV]) / "evaluate").glob("*.json"))


def _copy(tmp_path: Path, name: str = "spec.yaml") -> Path:
    spec = tmp_path / name
    shutil.copyfile(FIXED, spec)
    return spec


def _imported(spec: Path) -> list[str]:
    """Which of numpy, pydantic and PyYAML `tuner evaluate SPEC` imports, in a new process."""
    probe = ("import sys\nfrom tuner.cli import main\n"
             f"try:\n    main(['evaluate', {str(spec)!r}])\nexcept SystemExit:\n    pass\n"
             "print('imported:', *(m for m in ('numpy', 'pydantic', 'yaml') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, check=True)
    return done.stdout.strip().splitlines()[-1].split()[1:]


def test_a_second_evaluation_is_read_without_pydantic_or_numpy(tmp_path: Path) -> None:
    spec = _copy(tmp_path)
    assert _imported(spec) == ["numpy", "pydantic", "yaml"]
    assert len(_entries()) == 1
    assert _imported(spec) == []


def test_the_cached_answer_is_the_evaluated_one(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    spec, other = _copy(tmp_path), _copy(tmp_path, "other.yaml")
    for args in (["evaluate", str(spec)], ["evaluate", str(spec), "--json"],
                 ["evaluate", str(spec), str(other), "--json"]):
        with monkeypatch.context() as m:
            m.setenv(evaluated.CACHE_ENV, "off")
            uncached = CliRunner().invoke(main, args).stdout
        first, second = (CliRunner().invoke(main, args).stdout for _ in range(2))
        assert uncached == first == second, args
    assert len(_entries()) == 2


def test_a_changed_spec_is_evaluated_again(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _copy(tmp_path)
    before = _json(spec)
    data = yaml.safe_load(spec.read_text())
    data["plan"]["micro_batch"] = 2
    spec.write_text(yaml.safe_dump(data))
    after = _json(spec)
    assert after != before and after == _uncached(spec, monkeypatch)


def test_the_same_bytes_under_another_name_are_another_entry(tmp_path: Path) -> None:
    one, other = _copy(tmp_path, "one.yaml"), _copy(tmp_path, "other.yaml")
    named = [CliRunner().invoke(main, ["evaluate", str(p)]).stdout.splitlines()[0]
             for p in (one, other, one, other)]
    if "name" not in yaml.safe_load(FIXED.read_text()):
        assert named == ["one", "other", "one", "other"]
    assert len(_entries()) == 2


def test_a_changed_or_removed_profile_is_a_miss(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _copy(tmp_path)
    data = yaml.safe_load(spec.read_text())
    data["calibration"] = "profile.yaml"
    spec.write_text(yaml.safe_dump(data))
    profile = tmp_path / "profile.yaml"
    profile.write_text("efficiency: {gemm_fraction: 0.5}\n")
    slow = _json(spec)
    profile.write_text("efficiency: {gemm_fraction: 0.9}\n")
    fast = _json(spec)
    assert fast != slow and fast == _uncached(spec, monkeypatch)
    profile.unlink()
    result = CliRunner().invoke(main, ["evaluate", str(spec)])
    assert result.exit_code == 2 and "calibration" in result.output


def test_changed_code_or_catalog_changes_the_digest(tmp_path: Path) -> None:
    for package in ("cost", "search_spaces", "tuner"):
        shutil.copytree(ROOT / package, tmp_path / package,
                        ignore=shutil.ignore_patterns("__pycache__", "examples"))
    digest = evaluated.code_digest_of(tmp_path)
    assert digest == evaluated.code_digest_of(tmp_path)
    for changed in ("cost/price.py", "search_spaces/catalog/gpus.yaml", "tuner/views/text.py"):
        path = tmp_path / changed
        kept, stat = path.read_bytes(), path.stat()
        path.write_bytes(kept + b"\n# changed\n")
        assert evaluated.code_digest_of(tmp_path) != digest, changed
        path.write_bytes(kept)  # the same bytes written again: a new modification time
        assert evaluated.code_digest_of(tmp_path) != digest, changed
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert evaluated.code_digest_of(tmp_path) == digest


def test_another_code_digest_is_a_miss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _copy(tmp_path)
    _json(spec)
    data = spec.read_bytes()
    assert evaluated.load(str(spec), data) is not None
    monkeypatch.setattr(evaluated, "code_digest", lambda: "another version of the code")
    assert evaluated.load(str(spec), data) is None


def test_a_damaged_entry_is_a_miss(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _copy(tmp_path)
    _json(spec)
    (entry,) = _entries()
    entry.write_bytes(b"not JSON")
    assert _json(spec) == _uncached(spec, monkeypatch)


def test_off_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _copy(tmp_path)
    _uncached(spec, monkeypatch)
    assert _entries() == []


def test_a_bad_spec_is_never_cached(tmp_path: Path) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_text("model: gpt3-175b\n")
    for _ in range(2):
        result = CliRunner().invoke(main, ["evaluate", str(spec)])
        assert result.exit_code == 2
    assert _entries() == []


@pytest.mark.parametrize("env", [{"TUNER_CACHE_DIR": "/x/cache"}, {"TUNER_CACHE_DIR": "off"},
                                 {"XDG_CACHE_HOME": "/x/xdg"}, {"HOME": "/x/home"}])
def test_the_folder_is_the_one_the_studies_caches_use(env: dict[str, str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    from studies.identity import cache_root

    for name in ("TUNER_CACHE_DIR", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    root = cache_root()
    assert evaluated.cache_dir() == (root / "evaluate" if root is not None else None)
