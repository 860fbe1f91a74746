"""The workload description: what each host thread runs and what it puts on the GPU.

A :class:`Program` is pure data, built once per (scenario, seed) with every random draw already
made (see :mod:`.builder`). Running it (:mod:`.runtime`) applies the scale factors, so a
baseline and a changed run of one seed share every draw by construction.

Times are integer nanoseconds. The window of the profiler opens at true time 0.

Node kinds (a thread's ``body`` and an :class:`Op`'s ``children`` are sequences of them):

- :class:`Op`: a traced CPU span (``cpu_op`` or ``user_annotation``). It costs ``pre_ns``, then
  runs its children in order, then costs ``post_ns``; its traced span covers all of it,
  including waits inside its children.
- :class:`Cpu`: untraced CPU time (Python between ops, dispatch between children).
- :class:`Call`: a CUDA runtime call (``cuda_runtime``); see :mod:`.runtime` for each API.
- :class:`Signal` / :class:`Wait`: a host-side hand-off between threads (autograd engine
  queues, condition variables); nothing is traced for them.
- :class:`Poll`: the thread spins on host-mapped memory until a tagged GPU activity has
  ended (DeepEP-style); nothing is traced for it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "AUX_STREAM",
    "COMM_STREAM",
    "COMPUTE_STREAM",
    "Call",
    "Collective",
    "Cpu",
    "Node",
    "Op",
    "Poll",
    "Program",
    "Signal",
    "Thread",
    "Wait",
    "Work",
    "is_cpu_only",
    "iter_nodes",
    "launched_work",
    "scaled_cost",
    "step_ops",
    "work_duration",
]

COMPUTE_STREAM = 7
COMM_STREAM = 24  # NCCL
AUX_STREAM = 28  # side stream: DeepEP-style dispatch, copies

# CUDA runtime API names and their CUPTI callback ids, as real traces write them
LAUNCH = "cudaLaunchKernel"
MEMCPY_ASYNC = "cudaMemcpyAsync"
MEMSET_ASYNC = "cudaMemsetAsync"
MEMCPY = "cudaMemcpy"
EVENT_RECORD = "cudaEventRecord"
STREAM_WAIT_EVENT = "cudaStreamWaitEvent"
STREAM_SYNC = "cudaStreamSynchronize"
DEVICE_SYNC = "cudaDeviceSynchronize"
CBID = {
    LAUNCH: 211,
    MEMCPY_ASYNC: 41,
    MEMSET_ASYNC: 51,
    MEMCPY: 31,
    EVENT_RECORD: 135,
    STREAM_WAIT_EVENT: 147,
    STREAM_SYNC: 131,
    DEVICE_SYNC: 165,
}
ENQUEUING = frozenset({LAUNCH, MEMCPY_ASYNC, MEMSET_ASYNC, MEMCPY})


@dataclass(frozen=True, slots=True, eq=False)
class Collective:
    """NCCL metadata and timing of one collective kernel.

    The kernel's duration is ``lateness_ns + transfer_ns`` (x ``nccl_scale`` on the transfer):
    ``lateness_ns`` is how long after this rank's kernel starts the last peer arrives (a
    per-instance draw, the same in every run of a seed, possibly 0); ``transfer_ns`` is
    ``alpha + 2 (n-1)/n * bytes / bw`` of a ring all-reduce, fixed when the program is built.
    """

    name: str  # "allreduce"
    nelems: int
    dtype: str  # Kineto's dtype name, e.g. "Float"
    elem_bytes: int
    group_size: int
    seq: int  # per process group, from 0
    lateness_ns: int
    transfer_ns: int


@dataclass(frozen=True, slots=True, eq=False)
class Work:
    """One GPU activity: ``cat`` is ``kernel``, ``gpu_memcpy`` or ``gpu_memset``.

    ``dur_ns`` is the baseline duration (unused for NCCL kernels, see :class:`Collective`).
    ``tag`` names the activity for :class:`Poll`.
    """

    name: str
    cat: str
    dur_ns: int
    grid: tuple[int, int, int] = (1, 1, 1)
    block: tuple[int, int, int] = (128, 1, 1)
    nbytes: int = 0
    coll: Collective | None = None
    tag: str = ""


@dataclass(frozen=True, slots=True, eq=False)
class Call:
    """One CUDA runtime call. ``cost_ns`` is its intrinsic duration (a blocking call may last
    longer, see :mod:`.runtime`); ``latency_ns`` is launch latency (enqueuing calls);
    ``reaction_ns`` is how long a blocking call takes to return once its wait is over."""

    api: str
    cost_ns: int
    stream: int = -1
    work: Work | None = None
    event: str = ""
    latency_ns: int = 0
    reaction_ns: int = 0


@dataclass(frozen=True, slots=True, eq=False)
class Op:
    """A traced CPU span. ``args`` are extra Kineto args (Input Dims, collective metadata);
    ``seq``/``fwd_thread`` are the autograd "Sequence number" and "Fwd thread id" (-1 = none).
    """

    name: str
    children: tuple[Node, ...] = ()
    pre_ns: int = 0
    post_ns: int = 0
    cat: str = "cpu_op"
    args: dict[str, Any] = field(default_factory=dict)
    seq: int = -1
    fwd_thread: int = -1


@dataclass(frozen=True, slots=True, eq=False)
class Cpu:
    """Untraced CPU time on the thread."""

    ns: int


@dataclass(frozen=True, slots=True, eq=False)
class Signal:
    """Set the named flag (each name is signalled once per program)."""

    name: str


@dataclass(frozen=True, slots=True, eq=False)
class Wait:
    """Block until the named flag is set: resume at ``max(now, set_time + reaction_ns)``."""

    name: str
    reaction_ns: int


@dataclass(frozen=True, slots=True, eq=False)
class Poll:
    """Spin until the GPU activity tagged ``tag`` has ended: resume at
    ``max(now, end + reaction_ns)`` (the reaction covers the poll interval and wake-up)."""

    tag: str
    reaction_ns: int


Node = Op | Cpu | Call | Signal | Wait | Poll


@dataclass(frozen=True, slots=True, eq=False)
class Thread:
    """A host thread: ``label`` goes in its Kineto thread name; its first node starts at
    ``start_ns``."""

    label: str
    tid: int
    body: tuple[Node, ...]
    start_ns: int = 0


@dataclass(frozen=True, slots=True, eq=False)
class Program:
    """One rank's process during the profiling window.

    ``backlog`` is GPU work launched before the window, in launch order: it is ready at time 0
    (so the first item runs from 0) and its launches are not traced. ``gpu_clock_lag_ns``: GPU
    timestamps are written as true time minus this, and minus ``gpu_clock_drift_ppm`` parts per
    million of the true time (a drifting GPU clock). ``threads[0]`` is the main thread, whose
    ``ProfilerStep#N`` spans are the steps.
    """

    name: str
    threads: tuple[Thread, ...]
    backlog: tuple[tuple[int, Work], ...] = ()
    gpu_clock_lag_ns: int = 0
    pid: int = 0
    gpu_clock_drift_ppm: float = 0.0


def iter_nodes(nodes: tuple[Node, ...] | list[Node]) -> Iterator[Node]:
    """Every node of ``nodes`` and their descendants, depth first, in program order."""
    for n in nodes:
        yield n
        if isinstance(n, Op):
            yield from iter_nodes(n.children)


def is_cpu_only(op: Op) -> bool:
    """True when ``op``'s subtree holds no runtime call and no hand-off (Signal, Wait, Poll):
    the ops whose CPU cost ``cpu_scale`` multiplies."""
    return all(isinstance(n, Op | Cpu) for n in iter_nodes(op.children))


def scaled_cost(ns: int, scale: float) -> int:
    """``ns`` x ``scale`` rounded to the nearest ns (the one rounding rule for every scale)."""
    return max(0, round(ns * scale))


def work_duration(work: Work, kernel_scale: float = 1.0, nccl_scale: float = 1.0) -> int:
    """Duration of ``work`` in a run: NCCL kernels ``lateness + transfer x nccl_scale``; other
    kernels ``dur x kernel_scale``; memcpy and memset unchanged."""
    if work.coll is not None:
        return work.coll.lateness_ns + scaled_cost(work.coll.transfer_ns, nccl_scale)
    if work.cat == "kernel":
        return scaled_cost(work.dur_ns, kernel_scale)
    return work.dur_ns


def launched_work(nodes: tuple[Node, ...] | list[Node]) -> list[Work]:
    """The GPU activities enqueued by calls in ``nodes`` (and descendants), in program order."""
    return [n.work for n in iter_nodes(nodes) if isinstance(n, Call) and n.work is not None]


def step_ops(program: Program) -> list[Op]:
    """The ``ProfilerStep#N`` spans of the main thread, in order."""
    return [
        n
        for n in program.threads[0].body
        if isinstance(n, Op) and n.name.startswith("ProfilerStep#")
    ]
