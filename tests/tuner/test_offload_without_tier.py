"""A fixed plan that offloads with no expansion tier to offload to never finishes a step: the
views say "never" where they printed a step of some 1e10 s (6.6e10 s for Llama 3 70B on 32
H100), a "nan %" share and "+nan %" what-ifs; JSON has null (it has no infinity), and the
line that says what to change stays."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from .specs import tiny, write

tuner_main: Any = __import__("tuner.cli", fromlist=["main"]).main


def _shown(tmp_path: Path, command: str) -> tuple[str, dict[str, Any]]:
    """`tuner COMMAND` of a plan offloading with no tier: its text (exit code 0, with no
    'nan' or 'inf' in it) and its JSON."""
    path = write(tmp_path, tiny("untiered", plan={"tp": 8, "micro_batch": 1,
                                                  "offload": "optimizer"},
                                cluster={"gpu": "h100-80gb", "nodes": 1, "gpus_per_node": 8}))
    text = CliRunner().invoke(tuner_main, [command, str(path)])
    assert text.exit_code == 0, text.output
    assert not re.search(r"\b(nan|inf)\b", text.output)
    out = json.loads(CliRunner().invoke(tuner_main, [command, str(path), "--json"]).stdout)
    assert out["step_time_s"] is None
    return text.output, out


def test_evaluate_says_the_step_never_ends(tmp_path: Path) -> None:
    text, out = _shown(tmp_path, "evaluate")
    assert "step time         never\n" in text
    assert "offload             never  100.0 %  <- dominant" in text
    assert "time to train     never (1e+09 tokens)" in text
    assert "cost to train     without bound" in text
    assert "set cluster.expansion.capacity or offload: none" in text
    assert out["time_breakdown_s"]["offload"] is None
    assert out["time_breakdown_s"]["compute"] > 0 and not out["feasible"]


def test_explain_says_the_step_never_ends(tmp_path: Path) -> None:
    text, out = _shown(tmp_path, "explain")
    assert "step time         never, MFU 0.0 %" in text
    assert "never 100.0 %  <- dominant" in text
    assert "2x HBM bandwidth (3.35 -> 6.70 TB/s): step never\n" in text
    assert out["terms"][0] == {"term": "offload", "label": "offload traffic", "seconds": None,
                               "share": 1.0}
