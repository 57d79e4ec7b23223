"""`tuner calibrate`: the fit recovers a known efficiency, held-out error falls, profiles apply."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from cost import DEFAULT_EFFICIENCY, evaluate
from search_spaces import load_spec
from tests.tuner.specs import tiny, write
from tuner.cli import main
from tuner.engine.calibrate import errors, fit, read_measurements, split

TRUE = DEFAULT_EFFICIENCY.with_(gemm_fraction_by_gpu=(("a100-80gb", 0.45),))


def measured_runs(tmp_path: Path) -> Path:
    """Six fixed runs of the tiny model 'measured' with a known GEMM fraction of 0.45."""
    rows = ["spec,measured_step_time_s"]
    for i, (tp, pp, mb) in enumerate([(1, 1, 1), (2, 1, 2), (4, 1, 1), (8, 1, 4), (2, 2, 1),
                                      (1, 4, 2)]):
        data = tiny(f"run{i}", plan={"tp": tp, "pp": pp, "micro_batch": mb})
        data["model"].update(hidden=2048, heads=16, seq_len=2048)  # not launch-bound
        path = write(tmp_path, data)
        spec = load_spec(path)
        seconds = float(evaluate(*spec.to_cost_inputs(), efficiency=TRUE).step_time_s)
        rows.append(f"{path.name},{seconds}")
    csv_path = tmp_path / "runs.csv"
    csv_path.write_text("\n".join(rows) + "\n")
    return csv_path


def test_fit_recovers_the_gemm_fraction_and_lowers_held_out_error(tmp_path: Path) -> None:
    rows = read_measurements(measured_runs(tmp_path))
    train, held = split(rows, 0.5, seed=0)
    fitted = fit(train, DEFAULT_EFFICIENCY)
    assert dict(fitted.gemm_fraction_by_gpu)["a100-80gb"] == pytest.approx(0.45, abs=0.02)
    before = abs(errors(held, DEFAULT_EFFICIENCY)).mean()
    after = abs(errors(held, fitted)).mean()
    assert after < before / 5 and after < 0.03


def test_a_fraction_left_at_the_end_of_its_range_is_named(tmp_path: Path) -> None:
    """Runs measured at a third of the model's time even at the top GEMM fraction leave it at
    0.95: the report says so (text and JSON); runs the range explains leave nothing there."""
    fast = measured_runs(tmp_path)
    rows = fast.read_text().splitlines()
    fast.write_text("\n".join([rows[0], *(f"{r.split(',')[0]},{float(r.split(',')[1]) / 3}"
                                          for r in rows[1:])]) + "\n")
    out = str(tmp_path / "p.yaml")
    text = CliRunner().invoke(main, ["calibrate", str(fast), "--out", out])
    assert text.exit_code == 0, text.output
    assert "note: gemm_fraction[a100-80gb] = 0.9" in text.output
    assert "the high end of its range [0.2, 0.95]" in text.output
    assert "faster than this part of the model can explain" in text.output
    data = json.loads(CliRunner().invoke(main, ["calibrate", str(fast), "--out", out,
                                                "--json"]).stdout)
    assert [(b["parameter"], b["bound"]) for b in data["at_bounds"]] == [
        ("gemm_fraction[a100-80gb]", "high")]
    plain = json.loads(CliRunner().invoke(main, ["calibrate", str(measured_runs(tmp_path)),
                                                 "--out", out, "--json"]).stdout)
    assert plain["at_bounds"] == []


def test_cli_writes_a_profile_that_specs_apply(tmp_path: Path) -> None:
    out = tmp_path / "profile.yaml"
    result = CliRunner().invoke(main, ["calibrate", str(measured_runs(tmp_path)), "--out",
                                       str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert "held_out" in result.output
    profile = yaml.safe_load(out.read_text())
    assert profile["gemm_fraction_by_gpu"]["a100-80gb"] == pytest.approx(0.45, abs=0.02)
    data = tiny("calibrated", plan={"tp": 2})
    data["model"].update(hidden=2048, heads=16, seq_len=2048)  # not launch-bound
    data["calibration"] = "profile.yaml"
    spec = load_spec(write(tmp_path, data))
    slow = float(evaluate(*spec.to_cost_inputs(), efficiency=spec.efficiency()).step_time_s)
    fast = float(evaluate(*spec.to_cost_inputs()).step_time_s)
    assert slow > fast


@pytest.mark.parametrize(("content", "words"), [
    ("spec,measured_step_time_s\nmissing.yaml,1.0\n", "missing.yaml"),
    ("spec,measured_step_time_s\n,1.0\n", "spec"),
    ("spec,measured_step_time_s\nx.yaml,-3\n", "measured_step_time_s"),
    ("spec,measured_step_time_s\n", "no measurements"),
    ("spec\n", "no column measured_step_time_s in the header (its columns are spec)"),
    ("", "no column spec in the header (it has no header line)"),
])
def test_bad_measurements_exit_2_with_one_line(tmp_path: Path, content: str, words: str) -> None:
    csv_path = tmp_path / "bad.csv"
    csv_path.write_text(content)
    result = CliRunner().invoke(main, ["calibrate", str(csv_path), "--out",
                                       str(tmp_path / "p.yaml")])
    assert result.exit_code == 2
    assert words in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


def _too_big(tmp_path: Path, name: str) -> Path:
    """A fixed run the model cannot place: GPT-3 175B on one node of eight A100."""
    return write(tmp_path, {"name": name, "model": "gpt3-175b",
                            "training": {"global_batch": 64, "precision": "bf16"},
                            "cluster": {"gpu": "a100-80gb", "nodes": 1, "gpus_per_node": 8},
                            "plan": {"tp": 8, "pp": 1, "micro_batch": 1}})


def test_runs_the_model_cannot_place_are_refused_with_one_line(tmp_path: Path) -> None:
    big = _too_big(tmp_path, "big")
    csv_path = tmp_path / "big.csv"
    csv_path.write_text(f"spec,measured_step_time_s\n{big.name},30\n{big.name},31\n")
    out = tmp_path / "p.yaml"
    result = CliRunner().invoke(main, ["calibrate", str(csv_path), "--out", str(out)])
    assert result.exit_code == 2 and "Traceback" not in result.output
    (line,) = result.output.strip().splitlines()
    assert "fits in memory" in line and "(big)" in line and "zero, recompute" in line
    assert not out.exists()  # nothing written


def test_held_out_runs_that_do_not_fit_are_reported(tmp_path: Path) -> None:
    runs = measured_runs(tmp_path)
    big = _too_big(tmp_path, "big")
    rows = [*runs.read_text().splitlines()[:3], f"{big.name},30"]  # 2 fitting, 1 not
    runs.write_text("\n".join(rows) + "\n")
    result = CliRunner().invoke(main, ["calibrate", str(runs), "--out",
                                       str(tmp_path / "p.yaml"), "--holdout", "0.34"])
    assert result.exit_code == 0, result.output
    assert "held_out    1 run:  none fits in memory under the model" in result.output


def test_a_bad_profile_names_the_calibration_field(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text("efficiency: {gemm_fraction: 3}\n")
    data = tiny("badprofile", plan={"tp": 2})
    data["calibration"] = "p.yaml"
    result = CliRunner().invoke(main, ["evaluate", str(write(tmp_path, data))])
    assert result.exit_code == 2 and "calibration" in result.output


@pytest.mark.parametrize(("profile", "words"), [
    ("efficiency: 5\n", "efficiency: must be a mapping of field: value"),  # a traceback
    ("efficiency: {gemm_fraction: .nan}\n", "efficiency.gemm_fraction: must be a finite"),
    ("efficiency: {network_fraction: 0}\n", "efficiency.network_fraction: must be more than 0"),
    ("efficiency: {hbm_fraction: 0}\n", "efficiency.hbm_fraction: must be more than 0"),
    ("efficiency: {ps_bytes_per_s: 0}\n", "efficiency.ps_bytes_per_s: must be more than 0"),
    ("gemm_fraction_by_gpu: {a100-80gb: .inf}\n", "gemm_fraction_by_gpu.a100-80gb: must be"),
    ("efficency: {gemm_fraction: 0.5}\n", "efficency: unknown section 'efficency'; did you "
                                          "mean 'efficiency'?"),
    ("efficiency: {gemm_fractoin: 0.5}\n", "efficiency: unknown field 'gemm_fractoin'; did "
                                             "you mean 'gemm_fraction'? known: "),
    ("", "a profile is a mapping with `efficiency`"),
    ("directory", "cannot be read"),
    # a setting took any number (`params: 0`) and refused every name, the right ones too
    ("efficiency: {params: 0}\n", "efficiency.params: must be one of bf16, fp32, fp8"),
    ("efficiency: {main_grads: 1.5}\n", "efficiency.main_grads: must be one of fp32, bf16"),
    ("efficiency: {params: bf17}\n", "efficiency.params: must be one of bf16, fp32, fp8"),
    ("efficiency: {kernels: null}\n", "efficiency.kernels: must be one of fused, eager"),
    ("efficiency: {autocast: 0}\n", "efficiency.autocast: must be one of true, false"),
    ("efficiency: {reshard_after_forward: 0}\n", "efficiency.reshard_after_forward: must be "
                                                  "one of true, false, unless_pipelined"),
    ("efficiency: {offload_modules: moe_act}\n", "efficiency.offload_modules: must be a list"),
    # a GPU's null fraction became 0
    ("gemm_fraction_by_gpu: {a100-80gb: null}\n", "gemm_fraction_by_gpu.a100-80gb: must be a "
                                                   "number more than 0, got null"),
])
def test_a_profile_that_would_change_nothing_or_break_the_model_is_refused(
        tmp_path: Path, profile: str, words: str) -> None:
    """Before: a NaN or a zero rate gave a null step time on a 'feasible' plan, a
    misspelt section or an empty file applied no calibration without a word, and a
    non-mapping section or a zero server rate was a traceback (exit 1)."""
    if profile == "directory":
        (tmp_path / "p.yaml").mkdir()
    else:
        (tmp_path / "p.yaml").write_text(profile)
    data = tiny("badprofile", plan={"tp": 2})
    data["calibration"] = "p.yaml"
    spec = write(tmp_path, data)
    result = CliRunner().invoke(main, ["evaluate", str(spec), "--json"])
    assert result.exit_code == 2 and not result.stdout, result.output
    assert result.stderr.startswith(f"error: {spec}: calibration: {tmp_path / 'p.yaml'}: "
                                    f"{words}"), result.stderr
    assert len(result.stderr.splitlines()) == 1


def test_a_profile_sets_the_stack_settings_the_spec_s_stack_takes(tmp_path: Path) -> None:
    """A profile's `params: fp32` (a name the spec's stack.params takes) applies, as the
    spec's own stack does; before, every name was refused as no number."""
    data = tiny("settings", plan={"tp": 2})
    plain = CliRunner().invoke(main, ["evaluate", str(write(tmp_path, data)), "--json"])
    (tmp_path / "p.yaml").write_text("efficiency: {params: fp32, offload_modules: [moe_act], "
                                     "reshard_after_forward: unless_pipelined}\n")
    data["calibration"] = "p.yaml"
    profiled = CliRunner().invoke(main, ["evaluate", str(write(tmp_path, data)), "--json"])
    data.pop("calibration")
    data["stack"] = {"params": "fp32"}
    stacked = CliRunner().invoke(main, ["evaluate", str(write(tmp_path, data)), "--json"])
    assert (plain.exit_code, profiled.exit_code, stacked.exit_code) == (0, 0, 0), \
        profiled.output
    memory = [json.loads(r.stdout)["memory_per_gpu_bytes"] for r in (plain, profiled, stacked)]
    assert memory[1] == memory[2] != memory[0]


def test_each_run_is_fitted_on_its_own_stack(tmp_path: Path) -> None:
    """Runs on an older stack (no flash attention, no TP overlap: the spec's `stack`) and on a
    current one, measured with one GEMM fraction: the fit recovers it only because each row is
    predicted on its own software."""
    rows = ["spec,measured_step_time_s"]
    for i, (tp, old) in enumerate([(1, True), (2, True), (4, False), (8, False), (2, False)]):
        data = tiny(f"stack{i}", plan={"tp": tp, "sequence_parallel": tp > 1})
        data["model"].update(hidden=2048, heads=16)
        if old:
            data["stack"] = {"flash_attention": False, "tp_overlap": 0.0}
        path = write(tmp_path, data)
        spec = load_spec(path)
        seconds = float(evaluate(*spec.to_cost_inputs(), efficiency=spec.stack.apply(TRUE))
                        .step_time_s)
        rows.append(f"{path.name},{seconds}")
    (tmp_path / "runs.csv").write_text("\n".join(rows) + "\n")
    fitted = fit(read_measurements(tmp_path / "runs.csv"), DEFAULT_EFFICIENCY)
    assert dict(fitted.gemm_fraction_by_gpu)["a100-80gb"] == pytest.approx(0.45, abs=0.005)


CNN_TRUE = DEFAULT_EFFICIENCY.with_(layers_fraction_by_gpu=(("k80", 0.5), ("p100", 1.4)),
                                    step_overhead_s=0.02, ps_bytes_per_s=0.5e9)


CNN_RUNS = (("k80", 1, 1), ("k80", 4, 1), ("p100", 1, 1), ("p100", 2, 1), ("p100", 4, 1),
            ("p100", 4, 2), ("k80", 2, 2), ("p100", 3, 1))
"""(GPU, workers, parameter servers) of each run."""


def cnn_runs(tmp_path: Path, runs: tuple[tuple[str, int, int], ...] = CNN_RUNS) -> Path:
    """CM-DARE-style runs (CIFAR ResNet-32 on 1-4 K80 or P100 workers, one or two parameter
    servers) 'measured' with known layers fractions, per-step overhead and server rate."""
    rows = ["spec,measured_step_time_s"]
    for gpu, workers, servers in runs:
        data = {"name": f"{gpu}-{workers}-{servers}", "model": "resnet-32-t2t",
                "training": {"global_batch": 128 * workers, "precision": "fp32"},
                "cluster": {"gpu": gpu, "nodes": workers, "gpus_per_node": 1,
                            "scale_out_bandwidth": "16 Gbit/s",
                            "parameter_server_bandwidth": "8 Gbit/s"},
                "plan": {"micro_batch": 128, "sync": "parameter_server",
                         "parameter_servers": servers}}
        path = write(tmp_path, data)
        spec = load_spec(path)
        seconds = float(evaluate(*spec.to_cost_inputs(), efficiency=CNN_TRUE).step_time_s)
        rows.append(f"{path.name},{seconds}")
    csv_path = tmp_path / "cnn.csv"
    csv_path.write_text("\n".join(rows) + "\n")
    return csv_path


def test_cnn_runs_fit_layers_fractions_overhead_and_server_rate(tmp_path: Path) -> None:
    """As CM-DARE fitted its regressions: each GPU's speed on the workload, the per-step
    overhead and the servers' rate are recovered from a few runs, and the runs held out are
    then predicted."""
    from tuner.engine.calibrate import parameters

    rows = read_measurements(cnn_runs(tmp_path))
    names = [p.name for p in parameters(rows)]
    assert names == ["layers_fraction[k80]", "layers_fraction[p100]", "step_overhead_s",
                     "ps_bytes_per_s", "ps_update_s"]
    train, held = split(rows, 0.25, seed=0)
    fitted = fit(train, DEFAULT_EFFICIENCY)
    assert abs(errors(train, fitted)).max() < 0.02
    assert abs(errors(held, fitted)).max() < 0.05 < abs(errors(held, DEFAULT_EFFICIENCY)).max()


def test_a_cnn_profile_round_trips_through_its_file(tmp_path: Path) -> None:
    """The file, not the fit (the test above): one run per GPU, with parameter servers, so
    that the profile holds every kind of fitted value (a quarter of the eight runs' time)."""
    out = tmp_path / "cnn.yaml"
    runs = cnn_runs(tmp_path, (("k80", 2, 2), ("p100", 4, 1)))
    result = CliRunner().invoke(main, ["calibrate", str(runs), "--out", str(out),
                                       "--holdout", "0"])
    assert result.exit_code == 0, result.output
    profile = yaml.safe_load(out.read_text())
    assert set(profile["layers_fraction_by_gpu"]) == {"k80", "p100"}
    from search_spaces import load_profile

    loaded = load_profile(out)
    assert dict(loaded.layers_fraction_by_gpu) == profile["layers_fraction_by_gpu"]
    assert loaded.ps_bytes_per_s == profile["efficiency"]["ps_bytes_per_s"]


@pytest.mark.parametrize("value", ["inf", "nan", "-inf"])
def test_a_measured_time_that_is_no_number_of_seconds_is_refused(tmp_path: Path,
                                                                 value: str) -> None:
    runs = measured_runs(tmp_path)
    lines = runs.read_text().splitlines()
    lines[2] = f"{lines[2].split(',')[0]},{value}"
    runs.write_text("\n".join(lines) + "\n")
    out = tmp_path / "p.yaml"
    result = CliRunner().invoke(main, ["calibrate", str(runs), "--out", str(out)])
    assert result.exit_code == 2, result.output
    assert "row 3" in result.output and "measured_step_time_s" in result.output
    assert not out.exists()


def test_a_holdout_that_is_no_number_is_refused(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["calibrate", str(measured_runs(tmp_path)), "--out",
                                       str(tmp_path / "p.yaml"), "--holdout", "nan"])
    assert result.exit_code == 2 and "--holdout" in result.output, result.output


@pytest.mark.parametrize("target", ["runs.csv", "run0.yaml"])
def test_the_profile_never_overwrites_what_it_reads(tmp_path: Path, target: str) -> None:
    """--out naming the measurements or one of their specs would replace it by the profile."""
    runs = measured_runs(tmp_path)
    before = (tmp_path / target).read_bytes()
    result = CliRunner().invoke(main, ["calibrate", str(runs), "--out", str(tmp_path / target)])
    assert result.exit_code == 2 and "--out" in result.output and target in result.output
    assert (tmp_path / target).read_bytes() == before


def test_one_run_is_counted_in_the_singular(tmp_path: Path) -> None:
    """Three runs at --holdout 0.5: one fitted, two held out ('1 run', not '1 runs'), in the
    report and the profile's header."""
    runs = measured_runs(tmp_path)
    runs.write_text("\n".join(runs.read_text().splitlines()[:4]) + "\n")
    out = tmp_path / "p.yaml"
    result = CliRunner().invoke(main, ["calibrate", str(runs), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert "  fit         1 run:  mean |error|" in result.output
    assert "  held_out    2 runs: mean |error|" in result.output
    assert "1 run fitted, 2 runs held out (seed 0)" in out.read_text()


def test_a_missing_column_is_named_not_blamed_on_a_row(tmp_path: Path) -> None:
    """A CSV whose header lacks measured_step_time_s (here misspelt) names the file and the
    column, not "row 2" (shared/SPEC.md `tuner calibrate`: columns spec and
    measured_step_time_s)."""
    csv_path = tmp_path / "runs.csv"
    csv_path.write_text("spec,step_time_s\nx.yaml,1.0\n")
    result = CliRunner().invoke(main, ["calibrate", str(csv_path), "--out",
                                       str(tmp_path / "p.yaml")])
    assert result.exit_code == 2
    line = result.output.strip()
    assert str(csv_path) in line and "measured_step_time_s" in line and "row" not in line
    assert "spec, step_time_s" in line and len(line.splitlines()) == 1


def _one_run(tmp_path: Path, header: str, value: str) -> tuple[Path, float]:
    """A measurements CSV of run0 of measured_runs with the given header line and measured
    cell; the seconds measured_runs wrote for it."""
    runs = measured_runs(tmp_path)
    name, seconds = runs.read_text().splitlines()[1].split(",")
    runs.write_text(f"{header}\n{name},{value.format(s=float(seconds))}\n")
    return runs, float(seconds)


@pytest.mark.parametrize(("header", "value"), [
    ("\ufeffspec,measured_step_time_s", "{s}"),  # Excel's "CSV UTF-8": a byte-order mark
    ("spec, measured_step_time_s", " {s}"),  # cells padded after the comma
    ("spec,measured_step_time_s ", "{s} "),
    ("spec,measured_step_time_s", "{s} s"),  # a duration with its unit
    ("spec,measured_step_time_s", "{s:.6f}e3 ms"),
])
def test_a_spreadsheet_s_csv_and_times_with_units_are_read(tmp_path: Path, header: str,
                                                           value: str) -> None:
    """A CSV as spreadsheets save it (a byte-order mark, spaces after commas) was refused
    with "no column spec in the header (its columns are spec, ...)", the mark invisible; a
    time with its unit ("850 ms") was "not a positive number of seconds"."""
    runs, seconds = _one_run(tmp_path, header, value)
    (row,) = read_measurements(runs)
    assert row.measured_s == pytest.approx(seconds, rel=1e-5)
    result = CliRunner().invoke(main, ["calibrate", str(runs), "--out",
                                       str(tmp_path / "p.yaml")])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize(("value", "words"), [
    ("{s:.6f}e3", "x the 0.1"),  # milliseconds in the column of seconds
    ("{s:.6f}e-4", " of the 0.1"),
])
def test_a_bare_time_far_from_the_model_names_its_unit(tmp_path: Path, value: str,
                                                       words: str) -> None:
    """Milliseconds in measured_step_time_s were fitted as seconds: the GEMM fraction went to
    the end of its range, a profile was written and the note blamed launch and communication.
    Now one line names the row, the model's prediction and the unit to write; nothing is
    written. The same time with its unit is taken as written."""
    runs, _ = _one_run(tmp_path, "spec,measured_step_time_s", value)
    out = tmp_path / "p.yaml"
    result = CliRunner().invoke(main, ["calibrate", str(runs), "--out", str(out)])
    assert result.exit_code == 2, result.output
    (line,) = result.output.strip().splitlines()
    assert "row 2" in line and words in line and "measured_step_time_s" in line, line
    assert "the model predicts for run0" in line and "write the unit" in line, line
    assert not out.exists()
    runs.write_text(runs.read_text().replace("\n", " s\n").replace("_s s\n", "_s\n"))
    assert CliRunner().invoke(main, ["calibrate", str(runs), "--out", str(out)]).exit_code == 0
