"""parse_quantity: every unit form to SI, bits vs bytes, wrong kinds and bad values refused."""

from __future__ import annotations

import math

import pytest

from search_spaces import SpecError, parse_quantity


@pytest.mark.parametrize(
    ("text", "kind", "expected"),
    [
        ("80 GiB", "bytes", 80 * 2**30),
        ("141 GB", "bytes", 141e9),
        ("1e9 B", "bytes", 1e9),
        ("16 MiB", "bytes", 16 * 2**20),
        ("3.35 TB/s", "bytes_per_s", 3.35e12),
        ("900 GB/s", "bytes_per_s", 900e9),
        ("50 GB/s", "bytes_per_s", 50e9),
        ("400 Gbit/s", "bytes_per_s", 50e9),
        ("400 Gb/s", "bytes_per_s", 50e9),
        ("400 Gbps", "bytes_per_s", 50e9),
        ("989 TFLOP/s", "flops_per_s", 989e12),
        ("989 TFLOPS", "flops_per_s", 989e12),
        ("2 us", "seconds", 2e-6),
        ("5 µs", "seconds", 5e-6),
        ("3 ms", "seconds", 3e-3),
        ("1.5 s", "seconds", 1.5),
        ("2 h", "seconds", 7200.0),
        ("300e9", "count", 300e9),
        ("3.43 USD", "usd", 3.43),
        ("$3.43", "usd", 3.43),
    ],
)
def test_units_parse_to_si(text: str, kind: str, expected: float) -> None:
    assert parse_quantity(text, kind, field="f") == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("value", [8, 8.5, 0, 300e9])
def test_plain_numbers_are_base_units(value: float) -> None:
    assert parse_quantity(value, "bytes_per_s", field="f") == value


def test_bits_are_an_eighth_of_bytes() -> None:
    as_bits = parse_quantity("800 Gbit/s", "bytes_per_s", field="f")
    assert as_bits == parse_quantity("100 GB/s", "bytes_per_s", field="f")
    assert parse_quantity("8 Gb", "bytes", field="f") == 1e9


def test_binary_and_decimal_prefixes_differ() -> None:
    assert parse_quantity("1 GiB", "bytes", field="f") == 2**30
    assert parse_quantity("1 GB", "bytes", field="f") == 1e9


@pytest.mark.parametrize(
    ("value", "kind"),
    [
        ("80 GB/s", "bytes"),
        ("80 GiB", "bytes_per_s"),
        ("989 TFLOP/s", "bytes_per_s"),
        ("5 us", "bytes"),
        ("80 GiB", "count"),
        ("eighty GiB", "bytes"),
        ("80 parsecs", "bytes"),
        ("", "bytes"),
        (-1, "bytes"),
        ("-5 GB", "bytes"),
        (math.nan, "seconds"),
        (math.inf, "seconds"),
        ("inf", "count"),
        (True, "count"),
        (None, "count"),
        ([80], "bytes"),
    ],
)
def test_bad_values_name_the_field_and_an_example(value: object, kind: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_quantity(value, kind, field="cluster.gpu.hbm_capacity")
    assert caught.value.field == "cluster.gpu.hbm_capacity"
    assert "e.g." in str(caught.value)
    assert "\n" not in str(caught.value)


def test_wrong_kind_says_what_it_is() -> None:
    with pytest.raises(SpecError, match="bandwidth"):
        parse_quantity("80 GB/s", "bytes", field="f")


def test_unknown_kind_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="unknown quantity kind"):
        parse_quantity(1, "watts", field="f")


def test_a_quantity_that_must_be_positive_says_so_for_negatives_and_zero() -> None:
    """search.timeout and the GPU's bandwidths must be above 0: -1 and 0 get the same line,
    where -1 was told ">= 0" and 0 then "greater than 0"."""
    import pytest

    from search_spaces import SpecError, parse_spec

    base = {"name": "t", "model": "gpt3-125m", "training": {"global_batch": 64},
            "cluster": {"gpu": "a100-80gb", "nodes": 1, "gpus_per_node": 8}}
    for value in (-1, 0, "0 s"):
        with pytest.raises(SpecError) as err:
            parse_spec({**base, "search": {"timeout": value}})
        assert f"{value!r} must be a finite number above 0" in str(err.value), err.value
    for value in (-2, 0):
        with pytest.raises(SpecError) as err:
            parse_spec({**base, "cluster": {**base["cluster"],
                                            "gpu": {"base": "a100-80gb", "hbm_bandwidth": value}}})
        assert f"{value!r} must be a finite number above 0" in str(err.value), err.value
