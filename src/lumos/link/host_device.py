"""Within one Kineto trace: which runtime call launched each GPU activity, which CPU op encloses it.

=====================  ======================================================================
column (per event)     meaning
=====================  ======================================================================
``launch_event_idx``   for a GPU activity (kernel, memcpy, memset): the runtime/driver call
                       with the same correlation id (cudaLaunchKernel, cudaLaunchKernelExC,
                       cuLaunchKernel, cudaGraphLaunch, cudaMemcpyAsync, hip*...); -1 if none
``enclosing_op_idx``   for a CPU event: the innermost ``cpu_op``/``user_annotation`` on the same
                       thread whose span contains its start (for an op: its parent op); for a
                       GPU activity: the one enclosing its launch call; -1 if none
=====================  ======================================================================

A correlation id may be shared by several GPU activities (``cudaGraphLaunch``); each points at
the one launch call. GPU activities whose correlation matches no CPU call are counted, not
dropped (``diagnostics.count("gpu_without_launch")``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lumos.diagnostics import Diagnostics
from lumos.ingest.kineto import KinetoTrace
from lumos.ingest.kineto_schema import Category

__all__ = ["LAUNCH_APIS", "HostDevice", "attach_host_device"]

LAUNCH_APIS: frozenset[str] = frozenset(
    {
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaLaunchCooperativeKernel",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cudaGraphLaunch",
        "cudaMemcpyAsync",
        "cudaMemcpy",
        "cudaMemcpy2DAsync",
        "cudaMemsetAsync",
        "cudaMemset",
        "hipLaunchKernel",
        "hipExtLaunchKernel",
        "hipModuleLaunchKernel",
        "hipExtModuleLaunchKernel",
        "hipGraphLaunch",
        "hipMemcpyAsync",
        "hipMemcpyWithStream",
        "hipMemcpy",
        "hipMemsetAsync",
        "hipMemset",
    }
)

OP_CATEGORIES = (Category.CPU_OP, Category.USER_ANNOTATION)
GPU_ACTIVITY = (Category.KERNEL, Category.MEMCPY, Category.MEMSET)
LAUNCHERS = (Category.RUNTIME, Category.DRIVER)


@dataclass(frozen=True, slots=True, eq=False)
class HostDevice:
    """Per-event host/device relations of one Kineto trace (see the module docstring)."""

    launch_event_idx: np.ndarray  # int64
    enclosing_op_idx: np.ndarray  # int64
    num_gpu_activities: int
    num_gpu_with_launch: int
    num_gpu_with_op: int
    diagnostics: Diagnostics


def attach_host_device(trace: KinetoTrace) -> HostDevice:
    """Compute launch and enclosing-op relations for every event of ``trace``."""
    ev = trace.events
    n = len(ev)
    diagnostics = Diagnostics()
    gpu = trace.mask(*GPU_ACTIVITY)
    launcher = trace.mask(*LAUNCHERS) & (ev.correlation_id >= 0)
    launch = np.full(n, -1, dtype=np.int64)
    lidx = np.flatnonzero(launcher)
    if lidx.size:
        corr = ev.correlation_id[lidx]
        order = np.argsort(corr, kind="stable")
        corr_sorted, lidx_sorted = corr[order], lidx[order]
        gidx = np.flatnonzero(gpu & (ev.correlation_id >= 0))
        pos = np.searchsorted(corr_sorted, ev.correlation_id[gidx]).clip(0, lidx.size - 1)
        hit = corr_sorted[pos] == ev.correlation_id[gidx]
        launch[gidx[hit]] = lidx_sorted[pos[hit]]
    no_launch = gpu & (launch < 0)
    if no_launch.any():
        first = int(np.flatnonzero(no_launch)[0])
        diagnostics.warn(
            "gpu_without_launch",
            f"{trace.name_of(first)[:80]} correlation={int(ev.correlation_id[first])}",
            int(no_launch.sum()),
        )

    enclosing = _enclosing_ops(trace)
    has_launch = launch >= 0
    enclosing = np.where(gpu & has_launch, enclosing[launch.clip(0)], enclosing)
    enclosing[gpu & ~has_launch] = -1
    return HostDevice(
        launch_event_idx=launch,
        enclosing_op_idx=enclosing,
        num_gpu_activities=int(gpu.sum()),
        num_gpu_with_launch=int((gpu & has_launch).sum()),
        num_gpu_with_op=int((gpu & (enclosing >= 0)).sum()),
        diagnostics=diagnostics,
    )


def _enclosing_ops(trace: KinetoTrace) -> np.ndarray:
    """Innermost enclosing op of every CPU event, by a stack sweep per thread.

    Events are grouped by processor and sorted by (start, longest first), so a parent always
    precedes the events it contains.
    """
    ev = trace.events
    out = np.full(len(ev), -1, dtype=np.int64)
    is_op = trace.mask(*OP_CATEGORIES)
    ts = ev.ts_ns.tolist()
    end = ev.end_ns.tolist()
    for p, (lo, hi) in enumerate(trace.processor_slices()):
        if trace.processors.is_stream(p) or lo == hi:
            continue
        stack: list[int] = []
        ops_here = is_op[lo:hi].tolist()
        for k, i in enumerate(range(lo, hi)):
            t = ts[i]
            while stack and end[stack[-1]] <= t:
                stack.pop()
            if stack:
                out[i] = stack[-1]
            if ops_here[k]:
                stack.append(i)
    return out
