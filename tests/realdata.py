"""The one way tests and benchmarks reach third-party traces: read in place, never copied.

Real traces written by upstream tools (HTA, param, Chakra, ASTRA-sim, Kineto, TraceLens) live in a
folder outside this repository, laid out at their upstream paths and listed with their sha256 in its
``MANIFEST.json``. The folder is found from the ``LUMOS_REALDATA`` environment variable, else at
``../shared/realdata`` beside the checkout. Where it is absent, every test that asks for a file is
skipped with one reason that names the variable; the rest of the suite runs. ``tests/REALDATA.md``
lists which phenomenon each file shows and which tests use it.

>>> realdata_root() is None or (realdata_root() / "MANIFEST.json").is_file()
True
"""

from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "LUMOS_REALDATA"
_BESIDE_CHECKOUT = Path(__file__).resolve().parents[2] / "shared" / "realdata"


def realdata_root() -> Path | None:
    """The realdata folder, or None where it is absent.

    ``LUMOS_REALDATA`` wins when set (a set but missing folder counts as absent, so a typo skips
    rather than errors in someone else's checkout); otherwise ``../shared/realdata`` next to the
    repository root.
    """
    configured = os.environ.get(ENV_VAR)
    root = Path(configured) if configured else _BESIDE_CHECKOUT
    return root if (root / "MANIFEST.json").is_file() else None


def skip_reason() -> str:
    """Why a realdata test is skipped here (one line, naming the variable)."""
    return (
        f"third-party traces not found: set {ENV_VAR} to a realdata folder "
        f"(default {_BESIDE_CHECKOUT})"
    )


def realdata(relpath: str) -> Path:
    """Path of one realdata file, given at its upstream path under the folder.

    Skips the calling test (``pytest.skip``) when the folder is absent; a path that is missing
    from a present folder is a bug in the test and fails loudly instead.

    >>> realdata("HolisticTraceAnalysis/tests/data/call_stack/backward_thread.json").name
    'backward_thread.json'
    """
    root = realdata_root()
    if root is None:
        import pytest

        pytest.skip(skip_reason())
    path = root / relpath
    if not path.exists():
        raise FileNotFoundError(f"{path}: not in the realdata folder {root} (check the path)")
    return path
