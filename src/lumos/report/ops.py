"""Which framework op each task belongs to, and what class of kernel each GPU task is.

A graph keeps leaf work as tasks and parent ops (``aten::mm``, modules, user annotations) as
``USER`` annotations over a run of tasks on their thread (see :mod:`lumos.graph.build_spans`).
The *op* of a task is the innermost such span that holds it; a GPU task's op is the op of the
runtime call that launched it (its ``LAUNCH`` edge), the way HTA and TraceLens attribute kernel
time to the operator that issued it.

============================  ==================================================
task                          op
============================  ==================================================
CPU op that is a leaf         itself (``aten::empty`` with no child is its own op)
runtime call, host comm span  innermost parent op on its thread, else itself
GPU task                      op of the runtime call that launched it, else none
============================  ==================================================
"""

from __future__ import annotations

import re
from collections import OrderedDict
from functools import lru_cache
from typing import Any

import numpy as np
from numpy.typing import NDArray

from lumos.graph.build_tasks import MARK, START
from lumos.graph.model import CPU_TASK_KINDS, AnnotationKind, DepKind, ExecGraph, TaskKind

__all__ = ["KERNEL_CLASSES", "kernel_class", "task_ops"]

_Ops = tuple[NDArray[np.int32], NDArray[np.int64]]


#: Recent results by the columns they were computed from (data pointer, length, stride, dtype
#: of each), which the entry keeps alive so no other array can take their memory. Graphs that
#: share these columns (ranks replicated from one, a copy with other durations or delays: a
#: table's columns are read-only views of the same memory) share the result.
_MEMO: OrderedDict[tuple[Any, ...], tuple[tuple[NDArray[Any], ...], _Ops]] = OrderedDict()
_MEMO_SIZE = 16


def _inputs(graph: ExecGraph) -> tuple[NDArray[Any], ...]:
    t, a, e = graph.tasks, graph.annotations, graph.edges
    return (t.kind, t.name_idx, t.event_idx, t.processor_idx, t.order, a.kind, a.name_idx,
            a.first_task_idx, a.last_task_idx, e.src, e.dst, e.kind)  # fmt: skip


def task_ops(graph: ExecGraph) -> _Ops:
    """Per task, ``(op, call)``: the ``names`` index of its op (see the module docstring) and
    which call of it (the annotation index of its span, or ``len(annotations) + task`` for an
    op that is a task itself); ``-1`` for none (a processor's ``<start>`` anchor, a kernel
    whose launch the trace does not show). Remembered for graphs of the same structure (their
    columns are immutable); the arrays are read-only."""
    arrays = _inputs(graph)
    key = tuple((x.ctypes.data, len(x), x.strides, x.dtype.str) for x in arrays)
    if key in _MEMO:
        _MEMO.move_to_end(key)
        return _MEMO[key][1]
    op, call = _task_ops(graph)
    op.flags.writeable = False
    call.flags.writeable = False
    _MEMO[key] = (arrays, (op, call))
    if len(_MEMO) > _MEMO_SIZE:
        _MEMO.popitem(last=False)
    return op, call


def _task_ops(graph: ExecGraph) -> tuple[NDArray[np.int32], NDArray[np.int64]]:
    t, a = graph.tasks, graph.annotations
    n = graph.num_tasks
    _, perm = graph.processor_order()
    pos = np.empty(n, dtype=np.int64)
    pos[perm] = np.arange(n)
    at_pos = np.full(n, -1, dtype=np.int64)
    spans = np.flatnonzero((a.kind == int(AnnotationKind.USER)) & (a.first_task_idx >= 0))
    lo = pos[a.first_task_idx[spans]]
    hi = pos[a.last_task_idx[spans]] + 1
    # outer spans first, so that the inner ones overwrite them (spans on a thread nest)
    for k in np.lexsort((lo, -(hi - lo))).tolist():
        at_pos[lo[k] : hi[k]] = spans[k]
    call = at_pos[pos]
    op = np.full(n, -1, dtype=np.int32)
    op[call >= 0] = a.name_idx[call[call >= 0]]
    own = np.arange(n, dtype=np.int64) + len(a)
    leaf = t.kind == int(TaskKind.CPU_OP)
    host = np.isin(t.kind, (int(TaskKind.RUNTIME), int(TaskKind.CPU_COMM))) & (op < 0)
    for m in (leaf, host):
        op[m] = t.name_idx[m]
        call[m] = own[m]
    gpu = ~np.isin(t.kind, np.array(CPU_TASK_KINDS, np.int8))
    none = gpu | np.isin(t.event_idx, (START, MARK))
    op[none] = -1
    call[none] = -1
    e = graph.edges
    launch = e.kind == int(DepKind.LAUNCH)
    op[e.dst[launch]] = op[e.src[launch]]
    call[e.dst[launch]] = call[e.src[launch]]
    return op, call


#: Kernel classes by name, first match wins (``comm``, ``memcpy`` and ``memset`` come from the
#: task kind). ``fbgemm`` (embedding tables) is not a GEMM; convolutions run implicit GEMMs.
KERNEL_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("conv", re.compile(r"conv|implicit_gemm|dgrad|wgrad|winograd", re.I)),
    ("attention", re.compile(r"flash|fmha|attention|attn|sdpa", re.I)),
    ("gemm", re.compile(r"(?<!fb)gemm|matmul|cutlass|cublas|xmma|gemv", re.I)),
    ("embedding", re.compile(r"embedding|fbgemm", re.I)),
    ("reduction", re.compile(r"reduce|softmax|norm|sum_|mean|argmax|topk", re.I)),
    ("sort", re.compile(r"sort|scan|unique", re.I)),
    ("elementwise", re.compile(r"elementwise|vectorized|unrolled|pointwise|triton_poi", re.I)),
    ("copy", re.compile(r"copy|cat|transpose|permute|index|gather|scatter", re.I)),
)

_BY_KIND = {int(TaskKind.COMM): "comm", int(TaskKind.MEMCPY): "memcpy",
            int(TaskKind.MEMSET): "memset"}  # fmt: skip


@lru_cache(maxsize=65536)
def kernel_class(name: str, kind: int = int(TaskKind.KERNEL)) -> str:
    """The class of a GPU task: ``comm``/``memcpy``/``memset`` by kind, else the first of
    :data:`KERNEL_CLASSES` whose pattern the name matches, else ``other``.

    >>> kernel_class("ampere_sgemm_128x64_nn"), kernel_class("void fbgemm_gpu::permute_x")
    ('gemm', 'embedding')
    """
    if kind in _BY_KIND:
        return _BY_KIND[kind]
    for label, pattern in KERNEL_CLASSES:
        if pattern.search(name):
            return label
    return "other"
