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
