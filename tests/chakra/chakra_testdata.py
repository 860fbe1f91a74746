"""Paths of the Chakra test data (imported by the tests; fixtures live in conftest.py)."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data"
CHAKRA0_GZ = DATA / "chakra_pytorch_converted" / "chakra.0.et.gz"
MICRO = DATA / "astra_sim_microbenchmarks"
CUSTOM = DATA / "astra_sim_custom_collectives"
