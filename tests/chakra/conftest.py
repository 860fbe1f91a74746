"""Fixtures for the Chakra tests."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from chakra_testdata import CHAKRA0_GZ


@pytest.fixture(scope="session")
def chakra0_plain(tmp_path_factory) -> Path:
    """chakra.0.et decompressed to a plain file (as upstream ships it)."""
    p = tmp_path_factory.mktemp("chakra0") / "chakra.0.et"
    p.write_bytes(gzip.decompress(CHAKRA0_GZ.read_bytes()))
    return p
