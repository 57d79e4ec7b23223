"""`tuner evaluate` of a dense transformer imports what it evaluates and nothing it does not:
neither the mixture-of-experts nor the CNN workloads of `cost` (their modules are imported on
first use, cost.__init__), nor the built-in networks, nor the sweeps' chunked evaluation, nor
`logging` (nothing it runs logs: tuner.cli.main leaves logging unconfigured for it). An MoE
spec and a network spec, evaluated in the same way, import theirs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .specs import EXAMPLES

ROOT = Path(__file__).resolve().parents[2]
UNUSED = ("cost.moe", "cost.moe_time", "cost.layers", "cost.layers_time",
          "search_spaces.networks", "tuner.engine.evaluation", "logging")
_DENSE = EXAMPLES / "gpt3-175b-a100-fixed.yaml"
_MOE = ("model: deepseek-v3\ntraining: {global_batch: 512}\n"
        "cluster: {gpu: h100-80gb, nodes: 32}\nplan: {pp: 8, ep: 32}\n")
_NETWORK = ("model: resnet-50\ntraining: {global_batch: 256, precision: fp16}\n"
            "cluster: {gpu: a100-80gb, nodes: 1}\nplan: {micro_batch: 32}\n")


def _imported(*args: str) -> list[str]:
    """The modules of UNUSED imported by `tuner ARGS...` in a new interpreter (with no cache
    of answers)."""
    probe = ("import json, sys\nfrom tuner.cli import main\n"
             f"try:\n    main({list(args)!r})\nexcept SystemExit as e:\n"
             "    assert not e.code, e.code\n"
             f"print(json.dumps([m for m in {UNUSED!r} if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, check=True, env={**os.environ, "TUNER_CACHE_DIR": "off"})
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def test_a_dense_model_imports_no_moe_cnn_or_sweep_modules() -> None:
    assert _imported("evaluate", str(_DENSE)) == []


@pytest.mark.parametrize("args", [["--help"], ["catalog"], ["evaluate", "--help"]])
def test_help_and_catalog_import_no_logging(args: list[str]) -> None:
    assert "logging" not in _imported(*args)


def test_debug_configures_logging() -> None:
    assert "logging" in _imported("--debug", "evaluate", str(_DENSE))


@pytest.mark.parametrize(("text", "needed"), [(_MOE, "cost.moe"), (_NETWORK, "cost.layers")])
def test_a_moe_or_network_spec_imports_its_workload(tmp_path: Path, text: str,
                                                     needed: str) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(text)
    assert needed in _imported("evaluate", str(spec))
