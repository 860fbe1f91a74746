"""Shared fixtures: third-party traces in place (``tests/realdata.py``) and lumos's own test data."""

from __future__ import annotations

from pathlib import Path

import pytest
from tests.realdata import realdata_root, skip_reason

#: Test data lumos collected or wrote itself (each folder says how, in its PROVENANCE.md).
#: Third-party traces are never copied here: they are read in place through tests/realdata.py.
DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def realdata_dir() -> Path:
    """The realdata folder (``LUMOS_REALDATA`` or ``../shared/realdata``); skips where absent."""
    root = realdata_root()
    if root is None:
        pytest.skip(skip_reason())
    return root


def _hypothesis_profiles() -> None:
    """CI runs a fixed set of examples (derandomized) so a green main stays green; local runs
    explore new examples every time."""
    import os

    from hypothesis import settings

    settings.register_profile("ci", derandomize=True, print_blob=True)
    settings.register_profile("dev", print_blob=True)
    settings.load_profile("ci" if os.environ.get("CI") else "dev")


_hypothesis_profiles()
