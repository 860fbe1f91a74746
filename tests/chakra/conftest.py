"""Fixtures for the Chakra tests."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from chakra_testdata import CHAKRA0
from tests.realdata import realdata


@pytest.fixture(scope="session")
def chakra0_plain() -> Path:
    """chakra.0.et as upstream ships it (plain), read in place."""
    return realdata(CHAKRA0)


@pytest.fixture(scope="session")
def chakra0_gz(tmp_path_factory, chakra0_plain) -> Path:
    """chakra.0.et gzipped into a temporary folder (lumos reads gzipped Chakra files too)."""
    p = tmp_path_factory.mktemp("chakra0") / "chakra.0.et.gz"
    p.write_bytes(gzip.compress(chakra0_plain.read_bytes(), compresslevel=9, mtime=0))
    return p
