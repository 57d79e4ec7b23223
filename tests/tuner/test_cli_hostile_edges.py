"""Hostile input of issue 15, one test per item: exit code 2, one line on stderr (one per error
for a spec with several), nothing on stdout, and the study database it was pointed at holding
what it held (compared by its SQL dump, as tests/tuner/test_cli_hostile.py does)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from tests.hostile_specs import CUSTOM_GPU, VALID
from tuner.cli import main

from .specs import write
from .stored import database_digest, stored_study


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A study database holding one small finished study 'kept': (its file, its URL)."""
    return stored_study(tmp_path_factory.mktemp("hostile-edges"))


_digest = database_digest



def _refused(args: list[str], db: Path, *, lines: int = 1) -> list[str]:
    """Run the CLI; it must exit 2 with `lines` lines on stderr, nothing on stdout, and leave
    the database as it was. Returns the lines."""
    before = _digest(db)
    result = CliRunner().invoke(main, args)
    err = result.stderr.strip().splitlines()
    assert result.exit_code == 2, (args, result.output, result.exception)
    assert len(err) == lines and "Traceback" not in result.stderr, result.stderr
    assert all(line.startswith("error: ") for line in err) and not result.stdout
    assert _digest(db) == before
    return err


def _spec(**cluster: Any) -> dict[str, Any]:
    data = {"name": "kept", **copy.deepcopy(VALID)}
    data["cluster"].update(cluster)
    return data


def _both(spec: Path, stored: tuple[Path, str], starts: str, *, lines: int = 1) -> None:
    """`tuner evaluate SPEC` and `tuner search SPEC` (on the stored study's name) refuse it."""
    db, url = stored
    for args in (["evaluate", str(spec), "--json"], ["search", str(spec), "--storage", url]):
        err = _refused(args, db, lines=lines)
        assert err[0].startswith(f"error: {spec}: {starts}"), (err[0], starts)


_BARE = [
    ({"scale_out_bandwidth": 400}, "cluster.scale_out_bandwidth", '"400 Gbit/s"'),
    ({"gpu": {**CUSTOM_GPU, "peak_flops": 835}}, "cluster.gpu.peak_flops", '"835 TFLOP/s"'),
    ({"gpu": {**CUSTOM_GPU, "hbm_capacity": 94}}, "cluster.gpu.hbm_capacity", '"94 GiB"'),
    ({"scale_out_bandwidth_per_node": "12"}, "cluster.scale_out_bandwidth_per_node",
     '"12 Gbit/s"'),
]


@pytest.mark.parametrize(("cluster", "field", "meant"), _BARE,
                         ids=[c[1] for c in _BARE])
def test_a_bare_number_meant_with_a_unit(stored: tuple[Path, str], tmp_path: Path,
                                         cluster: dict[str, Any], field: str, meant: str
                                         ) -> None:
    spec = write(tmp_path, _spec(**cluster))
    _both(spec, stored, f"{field}: ")
    err = _refused(["evaluate", str(spec)], stored[0])
    assert f"did you mean {meant}?" in err[0]


def test_scale_out_bandwidth_per_gpu_and_per_node(stored: tuple[Path, str],
                                                  tmp_path: Path) -> None:
    spec = write(tmp_path, _spec(scale_out_bandwidth="400 Gbit/s",
                                 scale_out_bandwidth_per_node="3.2 Tbit/s"))
    _both(spec, stored, "cluster.scale_out_bandwidth_per_node: give the scale-out bandwidth "
                        "once: scale_out_bandwidth (per GPU) or scale_out_bandwidth_per_node")


def test_a_key_given_twice(stored: tuple[Path, str], tmp_path: Path) -> None:
    spec = tmp_path / "dup.yaml"
    text = yaml.safe_dump(_spec(), sort_keys=False)
    spec.write_text(text + "cluster: {gpu: h100-80gb, nodes: 2, gpus_per_node: 8}\n",
                    encoding="utf-8")
    _both(spec, stored, "line ")
    assert "key 'cluster' is given twice" in _refused(["evaluate", str(spec)], stored[0])[0]


def test_a_misspelt_section(stored: tuple[Path, str], tmp_path: Path) -> None:
    data = _spec()
    data["clustr"] = data.pop("cluster")
    spec = write(tmp_path, data)
    _both(spec, stored, "clustr: unknown field 'clustr' at the top level; did you mean "
                        "'cluster' (required, and missing)?")


@pytest.mark.parametrize(("content", "words"), [
    (bytes(range(256)) * 8, "a binary file"),
    (yaml.safe_dump(_spec(), allow_unicode=True).replace("gpt3-1.3b", "gpt3-1.3b  # \u00e9t\u00e9")
     .encode("latin-1"), "not UTF-8 text"),
], ids=["binary", "latin-1"])
def test_a_file_that_is_not_utf8_text(stored: tuple[Path, str], tmp_path: Path,
                                      content: bytes, words: str) -> None:
    spec = tmp_path / "bad.yaml"
    spec.write_bytes(content)
    _both(spec, stored, words)


def test_every_error_of_a_spec_at_once(stored: tuple[Path, str], tmp_path: Path) -> None:
    data = _spec(nodes=0, scale_out_bandwidth=400)
    data["plan"]["recompute"] = "selectiv"
    spec = write(tmp_path, data)
    _both(spec, stored, "cluster.nodes: ", lines=3)
    err = _refused(["evaluate", str(spec)], stored[0], lines=3)
    assert [e.split(": ")[2] for e in err] == ["cluster.nodes", "cluster.scale_out_bandwidth",
                                                "plan.recompute"]


@pytest.mark.parametrize(("sections", "starts"), [
    ({"objective": "cost"}, "cluster.gpu.price_per_hour: GPU 'x' has no price, and "
                            "objective: cost needs one"),
    ({"constraints": {"max_cost": 1e6}}, "cluster.gpu.price_per_hour: GPU 'x' has no price, "
                                         "and constraints.max_cost needs one"),
], ids=["objective", "constraint"])
def test_a_custom_gpu_without_a_price_for_cost(stored: tuple[Path, str], tmp_path: Path,
                                               sections: dict[str, Any], starts: str) -> None:
    spec = write(tmp_path, {**_spec(gpu=dict(CUSTOM_GPU)), **sections})
    _both(spec, stored, starts)


def test_an_on_demand_node_price_with_spot_servers(stored: tuple[Path, str],
                                                   tmp_path: Path) -> None:
    spec = write(tmp_path, _spec(price_per_node_hour=20.0, pricing="spot"))
    _both(spec, stored, "cluster.spot_price_per_node_hour: price_per_node_hour is the "
                        "on-demand price")


def test_an_unknown_base_gpu(stored: tuple[Path, str], tmp_path: Path) -> None:
    spec = write(tmp_path, _spec(gpu={"base": "h100", "price_per_hour": 2.1}))
    _both(spec, stored, "cluster.gpu.base: unknown GPU 'h100'; did you mean")


@pytest.mark.parametrize(("headroom", "words"), [("4", 'did you mean "4 GiB" or "4%"?'),
                                                 ("150%", "from 0% to under 100%")])
def test_a_bad_memory_headroom(stored: tuple[Path, str], tmp_path: Path, headroom: str,
                               words: str) -> None:
    spec = write(tmp_path, {**_spec(), "constraints": {"memory_headroom": headroom}})
    _both(spec, stored, "constraints.memory_headroom: ")
    assert words in _refused(["evaluate", str(spec)], stored[0])[0]


def test_tokens_written_without_their_exponent(stored: tuple[Path, str], tmp_path: Path
                                               ) -> None:
    data = _spec()
    data["training"]["tokens"] = 300
    _both(write(tmp_path, data), stored, "training.tokens: 300 is fewer than one optimizer step")


def test_contradictory_flags(stored: tuple[Path, str], tmp_path: Path) -> None:
    db, url = stored
    err = _refused(["export", "kept", "--csv", "--json", "--storage", url], db)
    assert err == ["error: --csv and --json contradict each other; give one of them"]
    spec = write(tmp_path, _spec())
    for flags in (["--trials", "5"], ["--timeout", "3"], ["--no-sweep"]):
        err = _refused(["search", str(spec), "--sampler", "exhaustive", *flags,
                        "--storage", url], db)
        assert f"{flags[0]} contradicts --sampler exhaustive" in err[0]
    err = _refused(["export", "kept", "--jsn", "--storage", url], db)
    assert "export: no such option" in err[0] and "--jsn" in err[0]  # click words it by release
    err = _refused(["--jsn", "export", "kept", "--storage", url], db)  # tuner's own option:
    assert ": no such option" in err[0]  # click's 4-line usage banner before
    assert "--jsn" in err[0] and err[0].endswith(" --help`")


def test_the_gp_sampler_without_pytorch_names_where_it_was_asked_for(
        stored: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """gp needs PyTorch: the line names the flag or the spec file's field that asked for it
    (it named 'search.sampler' alone, without the file, even for --sampler gp)."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "torch" else real(name, *a))
    db, url = stored
    spec = write(tmp_path, _spec())
    err = _refused(["search", str(spec), "--sampler", "gp", "--storage", url], db)
    assert err[0].startswith("error: --sampler gp: Optuna's GPSampler needs PyTorch")
    data = _spec()
    data["search"] = {"sampler": "gp"}
    spec = write(tmp_path, data)
    err = _refused(["search", str(spec), "--storage", url], db)
    assert err[0].startswith(f"error: {spec}: search.sampler: gp: Optuna's GPSampler needs")


def test_out_and_storage_in_a_missing_directory(stored: tuple[Path, str], tmp_path: Path
                                                ) -> None:
    db, url = stored
    missing = tmp_path / "not" / "here"
    for args in (["export", "kept", "--out", str(missing / "t.csv"), "--storage", url],
                 ["report", "kept", "--out", str(missing / "r.html"), "--storage", url],
                 ["calibrate", str(tmp_path / "m.csv"), "--out", str(missing / "p.yaml")]):
        err = _refused(args, db)
        assert f"directory {missing} does not exist; create it (mkdir -p {missing})" in err[0]
    spec = write(tmp_path, _spec())
    for storage in (f"sqlite:///{missing / 's.db'}", str(missing / "s.log")):
        err = _refused(["search", str(spec), "--storage", storage], db)
        assert f"directory {missing} does not exist" in err[0]
    assert not (tmp_path / "not").exists()


def test_a_binary_measurements_file(stored: tuple[Path, str], tmp_path: Path) -> None:
    csv = tmp_path / "m.csv"
    csv.write_bytes(bytes(range(256)) * 4)
    err = _refused(["calibrate", str(csv), "--out", str(tmp_path / "p.yaml")], stored[0])
    assert err[0].startswith(f"error: {csv}: a binary file")
    assert not (tmp_path / "p.yaml").exists()
