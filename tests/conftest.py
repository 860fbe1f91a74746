"""Shared fixtures: paths of the real traces in tests/data."""

from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """The tests/data directory (real third-party traces with provenance)."""
    return DATA


def _hypothesis_profiles() -> None:
    """CI runs a fixed set of examples (derandomized) so a green main stays green; local runs
    explore new examples every time."""
    import os

    from hypothesis import settings

    settings.register_profile("ci", derandomize=True, print_blob=True)
    settings.register_profile("dev", print_blob=True)
    settings.load_profile("ci" if os.environ.get("CI") else "dev")


_hypothesis_profiles()
