"""Bare numbers too small to be meant for their field are refused with the unit meant; values
with units, zeros where zero means none, and every catalog GPU pass (issue 15)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from search_spaces import SpecError, gpu_catalog, parse_spec
from search_spaces.plausible import BOUNDS, check_bare, is_bare
from tests.hostile_specs import VALID

_GPU_FIELDS = {"hbm_capacity": "hbm_capacity_bytes",
               "hbm_bandwidth": "hbm_bandwidth_bytes_per_s",
               "scale_up_bandwidth": "scale_up_bandwidth_bytes_per_s",
               "scale_out_bandwidth": "scale_out_bandwidth_bytes_per_s"}


@pytest.mark.parametrize("name", sorted(gpu_catalog()))
def test_no_catalog_gpu_is_below_a_bound(name: str) -> None:
    """The bounds sit below every real part: the catalog's figures, written as bare numbers,
    would all be accepted."""
    gpu = gpu_catalog()[name]
    for field, attr in _GPU_FIELDS.items():
        value = getattr(gpu, attr)
        assert check_bare(value, field) == value, (name, field)
    for rate in gpu.peak_flops_per_s.values():
        assert check_bare(rate, "peak_flops") == rate
    per_node = gpu.scale_out_bandwidth_bytes_per_s * gpu.gpus_per_node
    assert check_bare(per_node, "scale_out_bandwidth_per_node") == per_node


@pytest.mark.parametrize(("field", "value", "meant"), [
    ("scale_out_bandwidth", 400, '"400 Gbit/s"'),
    ("scale_out_bandwidth", "3.125", '"3.125 Gbit/s"'),
    ("scale_out_bandwidth_per_node", 3200, '"3200 Gbit/s"'),
    ("scale_up_bandwidth", 450, '"450 GB/s"'),
    ("hbm_bandwidth", 3.35, '"3.35 TB/s"'),
    ("hbm_bandwidth", 3350, '"3350 GB/s"'),
    ("hbm_capacity", 94, '"94 GiB"'),
    ("peak_flops", 835, '"835 TFLOP/s"'),
    ("checkpoint_bandwidth", 2, '"2 GB/s"'),
    ("expansion.capacity", 512, '"512 GiB"'),
    ("parameter_server_bandwidth", 8, '"8 Gbit/s"'),
])
def test_a_bare_number_below_its_bound_names_the_unit_meant(field: str, value: Any,
                                                            meant: str) -> None:
    with pytest.raises(SpecError) as caught:
        check_bare(value, field)
    message = caught.value.message
    assert f"did you mean {meant}?" in message and "has no unit" in message
    assert BOUNDS[field].reason in message


def test_scale_out_messages_say_per_gpu_and_name_the_per_node_field() -> None:
    with pytest.raises(SpecError, match=r"per GPU, one direction.*scale_out_bandwidth_per_node"):
        check_bare(400, "scale_out_bandwidth")
    with pytest.raises(SpecError, match=r"a whole node's NICs together.*per GPU: "
                                        r"scale_out_bandwidth"):
        check_bare(400, "scale_out_bandwidth_per_node")


@pytest.mark.parametrize(("field", "value", "si"), [
    ("scale_out_bandwidth", "400 Gbit/s", 50e9),
    ("scale_out_bandwidth", "1 MB/s", 1e6),        # a unit: taken as written
    ("hbm_capacity", "512 MB", 512e6),
    ("hbm_capacity", 94e9, 94e9),                   # bare, and plausible
    ("expansion.capacity", 0, 0.0),                 # 0: no expansion tier
    ("expansion.bandwidth", 0, 0.0),
    ("peak_flops", "989e12", 989e12),
])
def test_units_plausible_bare_numbers_and_zero_pass(field: str, value: Any, si: float) -> None:
    assert check_bare(value, field) == si


def test_is_bare() -> None:
    assert is_bare(400) and is_bare(4.5) and is_bare("300e9") and is_bare(" 12 ")
    assert not is_bare("400 Gbit/s") and not is_bare(True) and not is_bare(None)


def _spec(**cluster: Any) -> dict[str, Any]:
    data = copy.deepcopy(VALID)
    data["cluster"].update(cluster)
    return data


def test_a_spec_with_bare_bandwidth_is_refused_at_its_field() -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(_spec(scale_out_bandwidth=400), file="s.yaml")
    assert caught.value.field == "cluster.scale_out_bandwidth"
    assert '"400 Gbit/s"' in caught.value.message


def test_a_bare_number_in_a_list_choice_is_refused_at_its_index() -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(_spec(scale_out_bandwidth=["100 Gbit/s", 400]), file="s.yaml")
    assert caught.value.field == "cluster.scale_out_bandwidth[1]"
