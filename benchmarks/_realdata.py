"""Third-party traces for the benchmarks: the same folder, and names, as the tests.

They are read in place from ``LUMOS_REALDATA`` or ``../shared/realdata`` beside the checkout
(``tests/realdata.py``); a benchmark that needs one and cannot find the folder exits with one line
naming the variable. Files you pass on a benchmark's command line need no folder.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # run as `python benchmarks/bench_x.py`: the repository root
    sys.path.insert(0, str(ROOT))

from tests.realdata import REPLAY_TRACES, TRACES, realdata_or_exit  # noqa: E402

__all__ = ["REPLAY_TRACES", "ROOT", "TRACES", "realdata_or_exit", "trace_or_exit"]


def trace_or_exit(name: str) -> Path:
    """A realdata trace by its phenomenon name (``tests/realdata.py``), or exit with the reason."""
    return realdata_or_exit(TRACES[name])
