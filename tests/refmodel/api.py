"""The public entry points: run a scenario, get its Kineto document or its step times."""

from __future__ import annotations

from typing import Any

from .kineto import to_kineto
from .runtime import Execution, Scales, execute
from .scenarios import build_program

__all__ = ["CHANGES", "generate", "run_scenario", "step_durations"]

#: The changed runs the CLI writes beside each baseline: file label -> scale keywords.
CHANGES: dict[str, dict[str, float]] = {
    "base": {},
    "kernels_x0.5": {"kernel_scale": 0.5},
    "kernels_x2": {"kernel_scale": 2.0},
    "cpu_x2": {"cpu_scale": 2.0},
    "nccl_x3": {"nccl_scale": 3.0},
}


def run_scenario(
    scenario: str,
    *,
    kernel_scale: float = 1.0,
    cpu_scale: float = 1.0,
    nccl_scale: float = 1.0,
    seed: int = 0,
) -> Execution:
    """Execute ``scenario`` (built from ``seed``) under the given scales.

    ``kernel_scale`` multiplies every non-NCCL kernel's duration (backlog included; memcpy and
    memset unchanged); ``cpu_scale`` the CPU cost of CPU-only ops (ops, of either category,
    whose subtree has no runtime call and no thread hand-off: their ``pre``/``post`` costs and
    the untraced time inside them); ``nccl_scale`` the transfer part of NCCL kernels (peer
    lateness unchanged). Every random draw, launch latency and reaction time is the same for
    all runs of one seed.
    """
    for name, v in (
        ("kernel_scale", kernel_scale),
        ("cpu_scale", cpu_scale),
        ("nccl_scale", nccl_scale),
    ):
        if not v > 0:
            raise ValueError(f"{name} must be > 0, got {v}")
    return execute(build_program(scenario, seed), Scales(kernel_scale, cpu_scale, nccl_scale))


def generate(
    scenario: str,
    *,
    kernel_scale: float = 1.0,
    cpu_scale: float = 1.0,
    nccl_scale: float = 1.0,
    seed: int = 0,
) -> dict[str, Any]:
    """The Kineto JSON document of one run (see :func:`run_scenario` for the scales)."""
    ex = run_scenario(
        scenario, kernel_scale=kernel_scale, cpu_scale=cpu_scale, nccl_scale=nccl_scale, seed=seed
    )
    return to_kineto(ex)


def step_durations(
    scenario: str,
    *,
    kernel_scale: float = 1.0,
    cpu_scale: float = 1.0,
    nccl_scale: float = 1.0,
    seed: int = 0,
) -> list[int]:
    """Ground truth: the length in ns of each ``ProfilerStep#N`` span of one run, in order."""
    ex = run_scenario(
        scenario, kernel_scale=kernel_scale, cpu_scale=cpu_scale, nccl_scale=nccl_scale, seed=seed
    )
    return [end - start for _, start, end in ex.steps()]
