"""What `tuner evaluate` of a spec with one GPU type leaves unimported (issue 14): the search
space's enumeration and grid (search_spaces.space, .grid), the mixed-cluster model (cost.pools,
cost.mixed, cost.hetero_*, the uneven split's cost.layer_costs and cost.transformer_layers) and
the latent attention of DeepSeek's models (cost.mla); and that `search_spaces` and `cost`,
whose names are imported from their modules on first use, still give every name they list."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import search_spaces

from .specs import EXAMPLES

ROOT = Path(__file__).resolve().parents[2]
UNUSED = ("search_spaces.space", "search_spaces.grid", "cost.pools", "cost.mixed",
          "cost.hetero_dp", "cost.hetero_pipeline", "cost.layer_costs", "cost.transformer_layers",
          "cost.mla")


def _modules_after_evaluate(spec: Path, modules: tuple[str, ...] = UNUSED) -> list[str]:
    """Which of `modules` a new process imported to evaluate `spec` (no cache of answers)."""
    probe = ("import sys\nfrom tuner.cli import main\n"
             f"try:\n    main(['evaluate', {str(spec)!r}])\nexcept SystemExit:\n    pass\n"
             f"print(__import__('json').dumps([m for m in {modules!r} if m in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True,
                          text=True, check=True, env={**os.environ, "TUNER_CACHE_DIR": "off"})
    return list(json.loads(done.stdout.strip().splitlines()[-1]))


def test_evaluate_of_one_gpu_type_imports_no_enumeration_nor_pools() -> None:
    assert _modules_after_evaluate(EXAMPLES / "gpt3-175b-a100-fixed.yaml") == []


def test_every_listed_name_resolves_to_its_module() -> None:
    assert set(search_spaces._MODULE_OF) == set(search_spaces.__all__)
    for name, module in search_spaces._MODULE_OF.items():
        value = getattr(search_spaces, name)
        assert value is getattr(sys.modules[f"search_spaces.{module}"], name)


def test_the_lazy_names_of_cost_resolve_to_their_module() -> None:
    import cost

    for name, module in cost._LAZY.items():
        assert getattr(cost, name) is getattr(sys.modules[f"cost.{module}"], name)


def test_a_model_with_latent_attention_imports_it(tmp_path: Path) -> None:
    spec = tmp_path / "mla.yaml"
    spec.write_text("model: deepseek-v3\ntraining: {global_batch: 512}\n"
                    "cluster: {gpu: h100-80gb, nodes: 32}\nplan: {pp: 8, ep: 32}\n")
    assert "cost.mla" in _modules_after_evaluate(spec, ("cost.mla",))


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="NoSuchName"):
        search_spaces.NoSuchName  # noqa: B018
