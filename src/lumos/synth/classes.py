"""Op classes: the name-free vocabulary synthetic and obfuscated workloads are written in.

A class says what a task *is* without saying what it was called: ``gemm``, ``attention``,
``comm.all_reduce``, ``runtime.launch``, ``cpu.elementwise``... Fitting a synthetic model,
obfuscating a trace and judging fidelity all count and time tasks by class, so the three agree
on one vocabulary (:data:`CLASSES`, fixed and ordered; a class's index there is stable across
versions, new classes are only appended).

=================  ===========================================================================
task kind          class
=================  ===========================================================================
KERNEL             ``norm`` (batch/layer/RMS norm), else :func:`lumos.report.ops.kernel_class`
                   of its name (``gemm``, ``attention``, ``conv``, ``embedding``, ``reduction``,
                   ``sort``, ``elementwise``, ``copy``, ``other``); layout transforms are ``copy``
COMM, CPU_COMM     ``comm.<type>`` / ``cpu_comm.<type>`` from its collective record
                   (``comm.all_reduce``, ``comm.send``, ``comm.unknown``...)
MEMCPY, MEMSET     ``memcpy`` / ``memset``
RUNTIME            ``runtime.launch``, ``runtime.sync`` (stream/device/event synchronize),
                   ``runtime.event`` (record, wait, query), ``runtime.memcpy``, ``runtime.alloc``,
                   ``runtime.other``
CPU_OP             ``cpu.`` + the kernel class of its name (``cpu.gemm`` for ``aten::addmm``),
                   ``cpu.comm`` (an op that issues a collective: ``c10d::allreduce_``...),
                   ``cpu.optimizer``, ``cpu.autograd``, ``cpu.alloc`` (empty, view, reshape...)
                   or ``cpu.other``
anchors            ``marker`` (a processor's ``<start>`` and step markers)
=================  ===========================================================================
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray

from lumos.estimate.layers import COMM_PATTERN
from lumos.graph.build_tasks import MARK, START
from lumos.graph.model import CommType, ExecGraph, TaskKind
from lumos.report.ops import KERNEL_CLASSES, kernel_class

__all__ = ["CLASSES", "class_of", "task_classes"]

#: Kernel classes lumos.report.ops does not split out, checked before it.
_REFINE: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("norm", re.compile(r"norm|bn_fw|bn_bw|rms_?norm", re.I)),
    ("copy", re.compile(r"nchwToNhwc|nhwcToNchw|layout", re.I)),
)
_KERNEL = ("norm", *(label for label, _ in KERNEL_CLASSES), "other")
_COMM = tuple(c.name.lower() for c in CommType)

#: Every class, in a fixed order (indices are stable: new classes are appended).
CLASSES: tuple[str, ...] = (
    "marker",
    *_KERNEL,
    "memcpy",
    "memset",
    *(f"comm.{c}" for c in _COMM),
    *(f"cpu_comm.{c}" for c in _COMM),
    "runtime.launch",
    "runtime.sync",
    "runtime.event",
    "runtime.memcpy",
    "runtime.alloc",
    "runtime.other",
    *(f"cpu.{k}" for k in _KERNEL if k != "other"),
    "cpu.optimizer",
    "cpu.autograd",
    "cpu.alloc",
    "cpu.other",
    "cpu.comm",
)
_INDEX = {c: i for i, c in enumerate(CLASSES)}

_RUNTIME: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("runtime.launch", re.compile(r"launch", re.I)),
    ("runtime.sync", re.compile(r"synchronize", re.I)),
    ("runtime.event", re.compile(r"event|streamwait|query", re.I)),
    ("runtime.memcpy", re.compile(r"memcpy|memset", re.I)),
    ("runtime.alloc", re.compile(r"malloc|free|alloc|host_?register", re.I)),
)
_CPU: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("cpu.comm", COMM_PATTERN),
    ("cpu.gemm", re.compile(r"::(mm|addmm|bmm|baddbmm|matmul|linear|addbmm|einsum)\b", re.I)),
    ("cpu.optimizer", re.compile(r"optim|adam|sgd|_foreach|zero_grad", re.I)),
    ("cpu.autograd", re.compile(r"autograd|backward|grad_fn|accumulategrad", re.I)),
    ("cpu.alloc", re.compile(r"(^|::)(empty|empty_strided|view|reshape|as_strided|resize_|"
                             r"t|expand|unsqueeze|squeeze|detach|alias|_unsafe_view|"
                             r"lift_fresh|select|slice)\b", re.I)),
)  # fmt: skip


@lru_cache(maxsize=65536)
def class_of(name: str, kind: int, comm_kind: int = int(CommType.UNKNOWN)) -> str:
    """The class of one task from its name, :class:`TaskKind` and (for communication) its
    :class:`CommType`. Pure function of its arguments.

    >>> class_of("ampere_sgemm_128x64_nn", TaskKind.KERNEL)
    'gemm'
    >>> class_of("aten::addmm", TaskKind.CPU_OP), class_of("cudaLaunchKernel", TaskKind.RUNTIME)
    ('cpu.gemm', 'runtime.launch')
    >>> class_of("ncclKernel_AllReduce", TaskKind.COMM, CommType.ALL_REDUCE)
    'comm.all_reduce'

    A name that is a class followed by ``#`` and anything (``cpu.alloc#12``, how synthetic and
    obfuscated workloads name their tasks) is that class.
    """
    kind = int(kind)
    named = name.rsplit("#", 1)[0]
    if named != name and named in _INDEX:  # already a class: a synthetic or obfuscated name
        return named
    if kind in (TaskKind.COMM, TaskKind.CPU_COMM):
        prefix = "comm" if kind == TaskKind.COMM else "cpu_comm"
        return f"{prefix}.{CommType(int(comm_kind)).name.lower()}"
    if kind == TaskKind.KERNEL:
        return _kernel(name)
    if kind in (TaskKind.MEMCPY, TaskKind.MEMSET):
        return kernel_class(name, kind)
    table = _RUNTIME if kind == TaskKind.RUNTIME else _CPU
    for label, pattern in table:
        if pattern.search(name):
            return label
    if kind == TaskKind.RUNTIME:
        return "runtime.other"
    k = _kernel(name)
    return "cpu.other" if k == "other" else f"cpu.{k}"


def _kernel(name: str) -> str:
    for label, pattern in _REFINE:
        if pattern.search(name):
            return label
    return kernel_class(name)


def task_classes(graph: ExecGraph) -> NDArray[np.int16]:
    """Per task, its class as an index into :data:`CLASSES` (anchors and step markers are
    ``marker``). One :func:`class_of` call per distinct (name, kind, collective type)."""
    t = graph.tasks
    comm_kind = np.full(len(t), int(CommType.UNKNOWN), dtype=np.int64)
    has = t.comm_idx >= 0
    comm_kind[has] = graph.comms.kind[t.comm_idx[has]]
    key = (t.name_idx.astype(np.int64) * 16 + t.kind.astype(np.int64)) * 256 + (comm_kind + 1)
    uniq, inv = np.unique(key, return_inverse=True)
    labels = np.empty(len(uniq), dtype=np.int16)
    for i, k in enumerate(uniq.tolist()):
        name_idx, rest = divmod(int(k), 16 * 256)
        kind, ck = divmod(rest, 256)
        labels[i] = _INDEX[class_of(graph.names[name_idx], kind, ck - 1)]
    out = labels[inv.reshape(-1)] if len(t) else np.empty(0, dtype=np.int16)
    out[np.isin(t.event_idx, (START, MARK))] = _INDEX["marker"]
    return out
