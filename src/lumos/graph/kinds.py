"""The vocabulary of an execution graph as integer enums (stored as int8 columns).

Task kinds, dependency kinds, processor kinds, runtime-wait kinds, annotation kinds and the
collective types (numbered as Chakra's ``CollectiveCommType``, plus p2p).
"""

from __future__ import annotations

from enum import IntEnum

__all__ = [
    "COMM_TASK_KINDS",
    "CPU_TASK_KINDS",
    "GPU_TASK_KINDS",
    "AnnotationKind",
    "CommType",
    "DepKind",
    "ProcessorKind",
    "TaskKind",
    "WaitKind",
]


class TaskKind(IntEnum):
    """What a task is. 0, 1 and 6 run on threads; 2-5 on streams."""

    CPU_OP = 0
    RUNTIME = 1  # CUDA/HIP runtime or driver call
    KERNEL = 2
    MEMCPY = 3
    MEMSET = 4
    COMM = 5  # communication kernel (collective or p2p) on a stream
    CPU_COMM = 6  # host-side collective span (e.g. gloo worker)


#: Task kinds that run on a GPU stream.
GPU_TASK_KINDS: tuple[TaskKind, ...] = (
    TaskKind.KERNEL,
    TaskKind.MEMCPY,
    TaskKind.MEMSET,
    TaskKind.COMM,
)
#: Task kinds that run on a CPU thread.
CPU_TASK_KINDS: tuple[TaskKind, ...] = (TaskKind.CPU_OP, TaskKind.RUNTIME, TaskKind.CPU_COMM)
#: Task kinds that are communication: a kernel that ``lumos.ingest.comm_names.is_comm_kernel``
#: names (NCCL/RCCL, DeepEP, NVSHMEM, custom all-reduces) or a host-side collective span.
COMM_TASK_KINDS: tuple[TaskKind, ...] = (TaskKind.COMM, TaskKind.CPU_COMM)


class DepKind(IntEnum):
    """Why an edge exists."""

    INTRA_THREAD = 0
    INTER_THREAD = 1
    LAUNCH = 2
    INTRA_STREAM = 3
    INTER_STREAM = 4
    SYNC = 5
    COLLECTIVE = 6
    P2P = 7


class ProcessorKind(IntEnum):
    THREAD = 0
    STREAM = 1


class WaitKind(IntEnum):
    """A runtime dependency of a blocking CPU task, resolved while simulating.

    STREAM: wait for every GPU task on ``target_processor_idx`` launched before the task starts.
    DEVICE: the same for every stream of ``device``.
    EVENT:  wait for the GPU task captured by the event record ``record_task_idx`` (the last task
            launched on the record's stream, ``target_processor_idx``, before the record started).
    """

    STREAM = 0
    DEVICE = 1
    EVENT = 2


class AnnotationKind(IntEnum):
    STEP = 0  # ProfilerStep#N on a CPU thread
    USER = 1  # user annotation / module span
    GPU_STEP = 2  # gpu_user_annotation spans on a stream


class CommType(IntEnum):
    """Collective type, numbered as Chakra's ``CollectiveCommType``, plus p2p and unknown."""

    UNKNOWN = -1
    ALL_REDUCE = 0
    REDUCE = 1
    ALL_GATHER = 2
    GATHER = 3
    SCATTER = 4
    BROADCAST = 5
    ALL_TO_ALL = 6
    REDUCE_SCATTER = 7
    REDUCE_SCATTER_BLOCK = 8
    BARRIER = 9
    SEND = 100
    RECV = 101
