"""Shared fixtures: paths of the real traces in tests/data."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The tests/data directory (real third-party traces with provenance)."""
    return DATA
