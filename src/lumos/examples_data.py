"""Paths of the data files bundled with lumos (so commands have a default that works offline)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

__all__ = ["example_trace_path"]


def example_trace_path() -> Path:
    """A real 2-rank NCCL A100 Kineto trace (rank 0) shipped inside the package."""
    return Path(str(files("lumos").joinpath("data/examples/nccl_allreduce_a100_rank0.json.gz")))
