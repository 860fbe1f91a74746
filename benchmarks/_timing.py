"""Timing for the benchmarks: the best of a few runs (the machine is shared and noisy)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["best_of"]

T = TypeVar("T")


def best_of(fn: Callable[[], T], repeat: int) -> tuple[float, T]:
    """``(fastest wall seconds of repeat calls, the last call's result)``."""
    best = float("inf")
    out: T | None = None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out  # type: ignore[return-value]
