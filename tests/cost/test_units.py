"""Human units: sizes, bandwidths, durations; good input and one clear error for bad."""

from __future__ import annotations

import pytest

from lumos.cost.units import parse_bandwidth, parse_duration, parse_size
from lumos.errors import ConfigError


@pytest.mark.parametrize(("text", "expected"), [
    ("1MiB", 1 << 20), ("64KB", 64_000), ("64kB", 64_000), ("4096", 4096), ("2GiB", 2 << 30),
    ("1.5KiB", 1536), ("10B", 10), (" 3 MB ", 3_000_000), (7, 7),
])  # fmt: skip
def test_sizes(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "MiB", "1XB", "1Mb", "-1", "0.5B", "1 MiB/s", -3])
def test_bad_sizes(text):
    with pytest.raises(ConfigError):
        parse_size(text)


@pytest.mark.parametrize(("text", "expected"), [
    ("50GB/s", 50e9), ("400Gb/s", 50e9), ("400Gbps", 50e9), ("25GiB/s", 25 * 2**30),
    ("1e9", 1e9), ("24 GB/s", 24e9), ("100MB/s", 100e6),
])  # fmt: skip
def test_bandwidths(text, expected):
    assert parse_bandwidth(text) == pytest.approx(expected)


def test_binary_prefixes_read_gb_as_2_to_30():
    assert parse_bandwidth("50GB/s", binary_prefixes=True) == 50 * 2**30


@pytest.mark.parametrize("text", ["fast", "0GB/s", "50GB", "50 GB/h", "-1GB/s", "inf"])
def test_bad_bandwidths(text):
    with pytest.raises(ConfigError):
        parse_bandwidth(text)


@pytest.mark.parametrize(("text", "expected"), [
    ("500ns", 500), ("2us", 2000), ("2µs", 2000), ("1.5ms", 1_500_000), ("1s", 10**9),
    ("250", 250), (0, 0),
])  # fmt: skip
def test_durations(text, expected):
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["soon", "5 min", "-1ns", "1h", ""])
def test_bad_durations(text):
    with pytest.raises(ConfigError):
        parse_duration(text)


# --- edges and exact messages (each kills a mutant that the tests above let live) ----------------
def test_zero_bytes_and_zero_ns_are_valid():
    assert parse_size(0) == 0 and parse_size("0") == 0 and parse_size("0KiB") == 0
    assert parse_duration(0) == 0 and parse_duration("0ms") == 0


@pytest.mark.parametrize("parse", [parse_size, parse_bandwidth, parse_duration])
@pytest.mark.parametrize("flag", [True, False])
def test_a_bool_is_not_a_number(parse, flag):
    """``True`` is an int to Python, not a quantity to a user: it is refused as text would be."""
    with pytest.raises(ConfigError, match=f"^{flag!r} is not a "):
        parse(flag)


def test_numbers_are_the_internal_unit():
    """A number (not text) is bytes/s or ns as given; a bandwidth may be below 1 byte/s."""
    assert parse_bandwidth(25e9) == 25e9 and parse_bandwidth(3) == 3.0
    assert parse_bandwidth("0.5") == 0.5 and parse_bandwidth(0.25) == 0.25
    assert parse_duration(7) == 7


@pytest.mark.parametrize(("parse", "text", "message"), [
    (parse_size, -3, "size -3 is negative"),
    (parse_size, "1Mb", "'1Mb' is not a size (e.g. 1MiB, 64KB, 4096)"),
    (parse_size, "0.5B", "'0.5B' is not a whole number of bytes"),
    (parse_bandwidth, "fast", "'fast' is not a bandwidth (e.g. 50GB/s, 400Gb/s, 25GiB/s)"),
    (parse_bandwidth, "0GB/s", "bandwidth '0GB/s' must be positive and finite"),
    (parse_bandwidth, "1e999", "bandwidth '1e999' must be positive and finite"),
    (parse_duration, "soon", "'soon' is not a duration (e.g. 500ns, 2us, 1ms)"),
    (parse_duration, "1e999ns", "duration '1e999ns' must be non-negative and finite"),
    (parse_duration, -1.0, "-1.0 is not a duration"),
])  # fmt: skip
def test_each_error_names_the_text_and_the_problem(parse, text, message):
    with pytest.raises(ConfigError) as err:
        parse(text)
    assert str(err.value).startswith(message)
