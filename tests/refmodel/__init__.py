"""An independent reference model of a PyTorch training process on one GPU rank.

A small deterministic discrete-event model (host threads, CUDA runtime calls, streams, events,
blocking syncs, an autograd backward thread, NCCL all-reduce with peer lateness, a polling
thread, GPU work queued before the window, a GPU clock offset) that writes realistic Kineto
JSON traces for a baseline and for changed runs (kernels, CPU-only ops or NCCL transfers
scaled) that share every random draw: the ground truth for lumos's causal replay.

It does not import lumos. Layout: :mod:`.program` (the workload as data), :mod:`.builder`
(op templates and random draws), :mod:`.runtime` (the execution semantics), :mod:`.kineto`
(the JSON writer), :mod:`.scenarios` (presets), :mod:`.api` (entry points); ``python -m
tests.refmodel OUTDIR`` writes every scenario's traces and ``truth.json``.
"""

from .api import CHANGES, generate, run_scenario, step_durations
from .kineto import to_kineto, write_trace
from .runtime import Execution, Scales, execute
from .scenarios import SCENARIOS, build_program

__all__ = [
    "CHANGES",
    "SCENARIOS",
    "Execution",
    "Scales",
    "build_program",
    "execute",
    "generate",
    "run_scenario",
    "step_durations",
    "to_kineto",
    "write_trace",
]
