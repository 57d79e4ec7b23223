"""`tuner report`: one self-contained HTML file with plotly figures, checked as text and, when
a chromium binary is present, rendered in headless Chromium (plotly draws its plots into the
DOM only when its JavaScript ran)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import optuna
import plotly.offline
import pytest
import yaml
from click.testing import CliRunner

from tests.tuner.specs import tiny, write
from tuner.cli import main
from tuner.views.report import build_report

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def storage(tmp_path_factory: pytest.TempPathFactory) -> str:
    """Studies 'tiny' (throughput over tp x pp, 20 trials), 'tiny-pareto' (time and cost over
    1, 2 or 4 nodes) and 'tiny-few' (3 trials) in one SQLite file."""
    tmp_path = tmp_path_factory.mktemp("report")
    url = f"sqlite:///{tmp_path / 'studies.db'}"
    pareto = tiny("tiny-pareto", objective=["time_to_train", "cost"],
                  cluster={"gpu": "a100-80gb", "nodes": [1, 2, 4], "gpus_per_node": 8})
    for data, trials in ((tiny(), "20"), (pareto, "12"), (tiny("tiny-few"), "3")):
        code, _, err = _run("search", str(write(tmp_path, data)), "--trials", trials,
                            "--storage", url, "--json")
        assert code == 0, err
    return url


def _report(storage: str, name: str, tmp_path: Path) -> str:
    out = tmp_path / f"{name}.html"
    code, printed, err = _run("report", name, "--storage", storage, "--out", str(out))
    assert code == 0, err
    assert printed.strip() == str(out)
    return out.read_text(encoding="utf-8")


def _figure_ids(html: str) -> list[str]:
    return re.findall(r'<div id="(fig-[\w-]+)"', html)


def test_report_is_self_contained(storage: str, tmp_path: Path) -> None:
    html = _report(storage, "tiny", tmp_path)
    plotly_js = plotly.offline.get_plotlyjs()
    inlined = html.count(plotly_js[:400])
    external = re.findall(r"<script[^>]+src=", html)
    assert inlined == 1 and external == []  # plotly.js inlined once, nothing fetched
    assert _figure_ids(html) == ["fig-time", "fig-memory", "fig-history", "fig-importance"]
    assert "<h2>Top plans</h2>" in html and "<table>" in html and "tp=" in html


def test_pareto_report_has_the_front_and_a_note_for_importances(storage: str,
                                                                tmp_path: Path) -> None:
    html = _report(storage, "tiny-pareto", tmp_path)
    ids = _figure_ids(html)
    assert "fig-pareto" in ids and "fig-history-0" in ids and "fig-history-1" in ids
    assert "fig-importance" not in ids  # one searched parameter (cluster.nodes)
    assert "importances compare two or more" in html


def test_few_trials_give_a_note_not_a_crash(storage: str, tmp_path: Path) -> None:
    html = _report(storage, "tiny-few", tmp_path)
    assert "parameter importances need at least 10" in html
    assert "fig-importance" not in _figure_ids(html)


def test_json_and_default_path(storage: str, tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, _ = _run("report", "tiny-few", "--storage", storage, "--json")
    assert code == 0 and json.loads(out) == {"report": "tiny-few.html"}
    assert (tmp_path / "tiny-few.html").is_file()


def test_the_default_file_of_a_name_with_a_slash_is_in_this_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'studies.db'}"
    data = tiny("team/tiny")
    spec = tmp_path / "spec.yaml"
    spec.write_text(yaml.safe_dump(data), encoding="utf-8")
    assert _run("search", str(spec), "--trials", "2", "--storage", url, "--json")[0] == 0
    monkeypatch.chdir(tmp_path)
    code, out, err = _run("report", "team/tiny", "--storage", url, "--json")
    assert code == 0, err
    assert json.loads(out) == {"report": "team_tiny.html"}
    assert (tmp_path / "team_tiny.html").is_file()


def test_unknown_study_and_unwritable_file_exit_2(storage: str, tmp_path: Path) -> None:
    code, _, err = _run("report", "nope", "--storage", storage)
    assert code == 2 and "no study named 'nope'" in err and len(err.strip().splitlines()) == 1
    code, _, err = _run("report", "tiny", "--storage", storage,
                        "--out", str(tmp_path / "missing" / "r.html"))
    assert code == 2 and f"directory {tmp_path / 'missing'} does not exist" in err
    assert not (tmp_path / "missing").exists()
    (tmp_path / "taken").write_text("a file", encoding="utf-8")
    code, _, err = _run("report", "tiny", "--storage", storage,
                        "--out", str(tmp_path / "taken" / "r.html"))
    assert code == 2 and "taken is a file, not a directory" in err
    assert len(err.strip().splitlines()) == 1


def _chromium() -> str | None:
    return next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)


def _headless(binary: str, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [binary, "--headless", "--no-sandbox", "--disable-gpu",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--no-first-run", f"--user-data-dir={tmp_path / 'chromium-profile'}",
         "--virtual-time-budget=5000", *args],
        capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.skipif(_chromium() is None,
                    reason="no chromium binary on PATH (.ci/run installs Debian's chromium)")
def test_plots_render_in_headless_chromium(storage: str, tmp_path: Path) -> None:
    html = _report(storage, "tiny-pareto", tmp_path)
    page = tmp_path / "tiny-pareto.html"
    binary = _chromium()
    assert binary is not None
    done = _headless(binary, tmp_path, "--dump-dom", page.as_uri())
    assert done.returncode == 0, done.stderr[-2000:]
    dom = done.stdout
    figures = len(_figure_ids(html))
    assert dom.count('class="plot-container plotly"') == figures
    assert dom.count('class="main-svg"') >= figures


def test_a_study_without_trials_gives_notes(tmp_path: Path) -> None:
    """A study made with --timeout 0 (no trial yet, single or two objectives): its history was
    empty axes, and Optuna logged "[W ...] There are no complete trials." on stderr, a line
    in another format than the tool's, once per objective. Now a note says what runs the
    trials, and stderr is empty."""
    html = build_report(optuna.create_study(study_name="empty"))
    assert "no trial has completed yet" in html and "tuner resume empty" in html
    assert "parameter importances need at least" in html
    assert "no complete trial yet" in html and _figure_ids(html) == []
    url = f"sqlite:///{tmp_path / 's.db'}"
    pareto = tiny("empty pareto", objective=["time_to_train", "cost"])
    for data in (tiny("empty one"), pareto):
        code, _, err = _run("search", str(write(tmp_path, data)), "--timeout", "0",
                            "--storage", url)
        assert code == 0, err
        out = tmp_path / f"{data['name']}.html"
        code, _, err = _run("report", str(data["name"]), "--storage", url, "--out", str(out))
        assert code == 0 and err == "", err
        assert "no complete trial yet" in out.read_text(encoding="utf-8")


def test_an_exhaustive_sweep_gets_notes_not_a_history_or_importances(tmp_path: Path) -> None:
    """A sweep stores its best results in rank order: Optuna's history and importances over
    them would describe the ranking, not the space."""
    url = f"sqlite:///{tmp_path / 'swept.db'}"
    data = tiny("tiny-swept", search={"sampler": "exhaustive"})
    code, _, err = _run("search", str(write(tmp_path, data)), "--storage", url, "--json")
    assert code == 0, err
    html = _report(url, "tiny-swept", tmp_path)
    assert _figure_ids(html) == ["fig-time", "fig-memory"]
    assert "an exhaustive sweep: every one of" in html and "no parameter importances" in html
