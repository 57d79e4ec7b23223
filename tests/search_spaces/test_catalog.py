"""The built-in catalogs: every required entry present, sourced, positive, in SI units."""

from __future__ import annotations

import dataclasses
from importlib import resources

import pytest
import yaml

from cost import GPUSpec, ModelSpec, MoEModelSpec, parameter_count
from search_spaces import SpecError, gpu_catalog, gpu_info, model_catalog, model_info
from search_spaces.networks import network_catalog

REQUIRED_GPUS = ("v100-16gb", "v100-32gb", "a100-40gb", "a100-80gb", "h100-80gb", "h200",
                 "b200", "b300", "gb200", "gb300", "mi300x", "k80", "p100", "t4")
REQUIRED_MODELS = ("gpt3-175b", "gpt3-13b", "megatron-530b", "megatron-1t", "bloom-176b",
                   "llama2-70b", "llama3-8b", "llama3-70b", "llama3-405b")
_NOT_FIGURES = ("description", "year", "sources")
# The node shape is a convention stated in the header of gpus.yaml ("gpus_per_node: GPUs in the
# usual server", "scale_up_domain: GPUs sharing one NVLink domain"), not sourced per entry yet.
_CONVENTIONS = ("gpus_per_node", "scale_up_domain")


def _raw_gpus() -> dict[str, dict[str, object]]:
    text = resources.files("search_spaces").joinpath("catalog").joinpath("gpus.yaml")
    return yaml.safe_load(text.read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", REQUIRED_GPUS)
def test_required_gpus_are_present(name: str) -> None:
    assert name in gpu_catalog()


@pytest.mark.parametrize("name", REQUIRED_MODELS)
def test_required_models_are_present(name: str) -> None:
    assert name in model_catalog()


@pytest.mark.parametrize("name", REQUIRED_GPUS)
def test_every_gpu_figure_has_a_source(name: str) -> None:
    entry = _raw_gpus()[name]
    sources = entry["sources"]
    assert isinstance(sources, dict)
    missing = [key for key in entry
               if key not in (*_NOT_FIGURES, *_CONVENTIONS) and key not in sources]
    assert not missing, f"{name}: no source for {missing}"
    assert all(str(text).strip() for text in sources.values())


@pytest.mark.parametrize("name", REQUIRED_GPUS)
def test_gpu_values_are_positive(name: str) -> None:
    gpu = gpu_catalog()[name]
    numbers = {f.name: getattr(gpu, f.name) for f in dataclasses.fields(gpu)
               if isinstance(getattr(gpu, f.name), (int, float))}
    assert all(v > 0 for v in numbers.values()), numbers
    assert gpu.peak_flops_per_s and all(v > 0 for v in gpu.peak_flops_per_s.values())
    assert gpu.scale_up_domain_gpus >= 1 and gpu.gpus_per_node >= 1


def test_a100_80gb_figures() -> None:
    gpu = gpu_catalog()["a100-80gb"]
    assert gpu.hbm_capacity_bytes == 80 * 2**30
    assert gpu.peak_for("bf16") == 312e12
    assert gpu.scale_out_bandwidth_bytes_per_s == 25e9  # 200 Gbit/s, in bytes/s
    assert gpu.peak_for("fp8") == 0.0


def test_h100_network_in_bytes_per_s() -> None:
    gpu = gpu_catalog()["h100-80gb"]
    assert gpu.scale_out_bandwidth_bytes_per_s == 50e9
    assert gpu.scale_up_latency_s == 2e-6


@pytest.mark.parametrize("name", REQUIRED_MODELS)
def test_models_have_consistent_shapes(name: str) -> None:
    model = model_catalog()[name]
    assert model.hidden % model.heads == 0
    assert model.heads % model.kv_heads == 0
    assert model_info()[name]["source"]


def test_published_parameter_counts() -> None:
    """GPT-3 175B (Brown et al. 2020, Table 2.1) and Llama 3 70B (Llama Team 2024), within 2 %."""
    assert parameter_count(model_catalog()["gpt3-175b"]) == pytest.approx(175e9, rel=0.02)
    assert parameter_count(model_catalog()["llama3-70b"]) == pytest.approx(70.6e9, rel=0.02)


def test_catalogs_are_read_only_and_cached() -> None:
    assert gpu_catalog() is gpu_catalog()
    with pytest.raises(TypeError):
        gpu_catalog()["x"] = gpu_catalog()["t4"]  # type: ignore[index]
    assert "description" in gpu_info()["h100-80gb"]


def test_every_catalog_entry_converts() -> None:
    """Entries are converted when first looked up (search_spaces.catalog): each one does, to
    its cost type, and is kept."""
    gpus, models = gpu_catalog(), model_catalog()
    assert all(isinstance(gpus[name], GPUSpec) for name in gpus)
    assert all(isinstance(models[name], ModelSpec) for name in models)
    assert isinstance(models["deepseek-v3"], MoEModelSpec)
    assert gpus["h100-80gb"] is gpus["h100-80gb"]
    assert list(gpus) == list(_raw_gpus()) and len(gpus) == len(_raw_gpus())


def test_no_network_has_a_models_name() -> None:
    """A model's name is looked up among the models before the networks (resolve_model)."""
    assert not set(model_catalog()) & set(network_catalog())


@pytest.mark.parametrize("filename", ["gpus.yaml", "models.yaml"])
def test_each_entry_parsed_alone_is_the_files_entry(filename: str) -> None:
    """The catalog parses only the entries a spec looks up (catalog._Entries): cut at the
    lines that start a top-level key, every shipped entry is what parsing the whole file
    gives, with the same names in the same order, and no shipped file needs the whole parse."""
    from search_spaces import catalog
    from search_spaces.yaml_io import FastStrictLoader

    text = resources.files("search_spaces").joinpath("catalog", filename).read_text("utf-8")
    whole = yaml.load(text, Loader=FastStrictLoader)
    lazy = catalog._Entries(text, filename)
    assert list(lazy) == list(whole) and len(lazy) == len(whole)
    assert all(lazy[name] == whole[name] for name in reversed(list(whole)))
    assert lazy._whole is None


@pytest.mark.parametrize("text", [
    "# header\n'quoted': {a: 1}\nplain: {a: 2}\n",          # a key the lines do not show
    "first: {a: 1}\n---\nsecond: {a: 2}\n",                  # a second document
    "{first: {a: 1}, second: {a: 2}}\n",                     # flow style
    "first:\n  a: 1\nfirst:\n  a: 2\n",                      # a key given twice
    "- a\n- b\n",                                            # not a mapping
])
def test_a_file_the_lines_cannot_cut_reads_as_a_whole(text: str) -> None:
    """What parsing the whole file gives, value or error, whichever entry is asked for."""
    from search_spaces import catalog
    from search_spaces.yaml_io import FastStrictLoader

    try:
        whole = yaml.load(text, Loader=FastStrictLoader)
    except yaml.YAMLError as err:
        with pytest.raises(type(err)):
            lazy = catalog._Entries(text, "x.yaml")
            [lazy[name] for name in lazy]
        return
    if not isinstance(whole, dict):
        with pytest.raises(SpecError, match="must be a mapping"):
            catalog._Entries(text, "x.yaml")
        return
    lazy = catalog._Entries(text, "x.yaml")
    assert {name: lazy[name] for name in lazy} == whole
