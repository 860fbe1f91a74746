"""Real Chakra files for the tests, read in place from the realdata folder (tests/realdata.py).

Names are realdata paths (strings), resolved inside the tests with :func:`realdata`, so the tests
are collected, and skipped with a reason, where the folder is absent. The gzipped ``chakra.0.et``
is made in a temporary folder by the ``chakra0_gz`` fixture (conftest.py).
"""

from __future__ import annotations

from tests.realdata import TRACES, astra_custom, astra_micro, astra_micro_files, realdata

__all__ = ["CHAKRA0", "astra_custom", "astra_micro", "astra_micro_files", "realdata"]

#: upstream's PyTorch-converted Chakra ET (plain, as upstream ships it)
CHAKRA0 = TRACES["chakra_pytorch_converted"]
