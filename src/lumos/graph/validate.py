"""Deep invariant checks of an :class:`~lumos.graph.model.ExecGraph`.

:func:`validate_graph` raises one :class:`~lumos.errors.GraphError` naming the first broken
invariant and an example row:

* every index column points inside its table (``-1`` only where "none" is allowed);
* CPU task kinds sit on threads, GPU task kinds on streams;
* ``order`` is 0..k-1 on every processor, in row order (rows of a processor are listed in
  execution order);
* durations are non-negative, edge delays no lower than ``-dur_ns(src)``; no self-edges;
* edges plus processor order form no cycle (a cycle can never be simulated);
* waits block CPU tasks and target streams; annotations cover tasks of their own processor,
  first not after last.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from numpy.typing import NDArray

from lumos.errors import GraphError
from lumos.graph.algorithms import topological_order
from lumos.graph.model import (
    CPU_TASK_KINDS,
    GPU_TASK_KINDS,
    ExecGraph,
    ProcessorKind,
    WaitKind,
)

__all__ = ["validate_graph"]


def _first_bad(mask: NDArray[np.bool_]) -> int | None:
    bad = np.flatnonzero(mask)
    return int(bad[0]) if len(bad) else None


def _check_range(what: str, col: NDArray[Any], n: int, allow_none: bool = False) -> None:
    lo = -1 if allow_none else 0
    i = _first_bad((col < lo) | (col >= n))
    if i is not None:
        raise GraphError(f"{what}[{i}] = {int(col[i])} is dangling (valid: {lo}..{n - 1})")


def validate_graph(g: ExecGraph) -> None:
    """Raise :class:`GraphError` if ``g`` breaks an invariant (see the module docstring)."""
    t, p, e, w, a, c = g.tasks, g.processors, g.edges, g.waits, g.annotations, g.comms
    n, n_proc = len(t), len(p)
    where = f"rank {g.rank}"

    _check_range("tasks.name_idx", t.name_idx, len(g.names))
    _check_range("tasks.processor_idx", t.processor_idx, n_proc)
    _check_range("tasks.comm_idx", t.comm_idx, len(c), allow_none=True)
    i = _first_bad(t.dur_ns < 0)
    if i is not None:
        raise GraphError(f"{where}: {g.describe_task(i)} has negative duration {t.dur_ns[i]}")

    cpu = np.isin(t.kind, np.array(CPU_TASK_KINDS, dtype=np.int8))
    gpu = np.isin(t.kind, np.array(GPU_TASK_KINDS, dtype=np.int8))
    i = _first_bad(~(cpu | gpu))
    if i is not None:
        raise GraphError(f"{where}: task {i} has unknown kind {int(t.kind[i])}")
    on_stream = p.kind[t.processor_idx] == ProcessorKind.STREAM
    i = _first_bad(cpu & on_stream)
    if i is not None:
        raise GraphError(f"{where}: {g.describe_task(i)} is a CPU task on a stream")
    i = _first_bad(gpu & ~on_stream)
    if i is not None:
        raise GraphError(f"{where}: {g.describe_task(i)} is a GPU task on a thread")

    # order: 0..k-1 on each processor, increasing with the row index
    indptr, perm = g.processor_order()
    if n:
        expected = np.arange(n, dtype=np.int64) - np.repeat(indptr[:-1], np.diff(indptr))
        i = _first_bad(t.order[perm] != expected)
        if i is not None:
            raise GraphError(
                f"{where}: processor order broken at {g.describe_task(int(perm[i]))}: "
                f"orders on a processor must be 0..k-1 without gaps or repeats"
            )
        same = np.diff(t.processor_idx[perm]) == 0
        i = _first_bad(same & (np.diff(perm) < 0))
        if i is not None:
            raise GraphError(
                f"{where}: {g.describe_task(int(perm[i + 1]))} is listed before a task that "
                f"precedes it on its processor"
            )

    _check_range("edges.src", e.src, n)
    _check_range("edges.dst", e.dst, n)
    i = _first_bad(e.src == e.dst)
    if i is not None:
        raise GraphError(f"{where}: edge {i} is a self-loop on {g.describe_task(int(e.src[i]))}")
    # a negative delay lets dst start before src ends (a kernel starting while its launch call
    # is still returning), but never before src starts
    i = _first_bad(e.delay_ns < -g.tasks.dur_ns[e.src])
    if i is not None:
        raise GraphError(
            f"{where}: edge {i} has delay {int(e.delay_ns[i])} ns, more negative than the "
            f"duration of its source {g.describe_task(int(e.src[i]))}"
        )

    _check_range("waits.task_idx", w.task_idx, n)
    _check_range("waits.target_processor_idx", w.target_processor_idx, n_proc, allow_none=True)
    _check_range("waits.record_task_idx", w.record_task_idx, n, allow_none=True)
    if len(w):
        i = _first_bad(~cpu[w.task_idx])
        if i is not None:
            raise GraphError(
                f"{where}: wait {i} blocks a GPU task, {g.describe_task(int(w.task_idx[i]))}"
            )
        needs_stream = (w.kind == WaitKind.STREAM) | (w.kind == WaitKind.EVENT)
        tp = w.target_processor_idx
        bad = needs_stream & ((tp < 0) | (p.kind[np.maximum(tp, 0)] != ProcessorKind.STREAM))
        i = _first_bad(bad)
        if i is not None:
            raise GraphError(f"{where}: wait {i} must target a stream, got processor {int(tp[i])}")
        i = _first_bad((w.kind == WaitKind.EVENT) & (w.record_task_idx < 0))
        if i is not None:
            raise GraphError(f"{where}: event wait {i} has no record task")
        i = _first_bad((w.kind == WaitKind.DEVICE) & (w.device < 0))
        if i is not None:
            raise GraphError(f"{where}: device wait {i} has no device")
        i = _first_bad((w.kind < 0) | (w.kind > WaitKind.EVENT))
        if i is not None:
            raise GraphError(f"{where}: wait {i} has unknown kind {int(w.kind[i])}")

    _check_range("annotations.processor_idx", a.processor_idx, n_proc)
    _check_range("annotations.first_task_idx", a.first_task_idx, n, allow_none=True)
    _check_range("annotations.last_task_idx", a.last_task_idx, n, allow_none=True)
    if len(a):
        f, la = a.first_task_idx, a.last_task_idx
        i = _first_bad((f < 0) != (la < 0))
        if i is not None:
            raise GraphError(f"{where}: annotation {i} has only one of first/last task")
        has = f >= 0
        # spans covering no task have nothing to check (and index nothing: a graph may have none)
        if has.any():
            fs, ls = np.maximum(f, 0), np.maximum(la, 0)
            # the span starts on its own processor; it may end with work on another one (a step
            # annotated on a thread that does none of the step's work)
            same = t.processor_idx[ls] == a.processor_idx
            bad = has & (
                (t.processor_idx[fs] != a.processor_idx) | (same & (t.order[fs] > t.order[ls]))
            )
            i = _first_bad(bad)
            if i is not None:
                raise GraphError(
                    f"{where}: annotation {i} ({g.names[int(a.name_idx[i])]!r}) must start on "
                    f"its own processor, and first <= last there"
                )

    _check_range("comms.pg_idx", c.pg_idx, len(g.process_groups), allow_none=True)

    order = topological_order(g)
    if len(order) < n:
        done = np.zeros(n, dtype=bool)
        done[order] = True
        stuck = np.flatnonzero(~done)[:3]
        names = "; ".join(g.describe_task(int(s)) for s in stuck)
        raise GraphError(
            f"{where}: dependency cycle among {n - len(order)} tasks (edges plus processor "
            f"order), e.g. {names}"
        )
