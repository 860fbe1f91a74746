"""What a Kineto (PyTorch profiler Chrome-trace) file looks like, as typed decoders.

Decoding is two-level for speed: the event list is decoded into small typed structs whose
``args`` stay undecoded (``msgspec.Raw``), then the identifiers every stage needs (correlation,
External id, Record function id, ...) are pulled out of ``args`` by a second typed decoder that
skips every other field in C. Full ``args`` dictionaries are decoded only for the few events that
carry metadata (collectives, CUDA sync, gloo/c10d ops).
"""

from __future__ import annotations

from enum import IntEnum
from typing import Annotated, Any

import msgspec

__all__ = [
    "GPU_CATEGORIES",
    "I32",
    "I64",
    "Category",
    "EventMeta",
    "RawArgs",
    "RawEvent",
    "RawTrace",
    "category_of",
    "decode_raw",
    "meta_of",
]


_NULL = msgspec.Raw(b"null")

#: An integer that fits int64 (ids, pids, streams); a larger one fails the fast decoder and is
#: dropped, counted, by the tolerant one (:mod:`lumos.ingest.kineto_tolerant`).
I64 = Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
#: A device index (int32 in the processor table).
I32 = Annotated[int, msgspec.Meta(ge=-(2**31), le=2**31 - 1)]


class Category(IntEnum):
    """Normalized event category (Kineto's ``cat``, legacy 2021 names folded in)."""

    CPU_OP = 0
    USER_ANNOTATION = 1
    PYTHON_FUNCTION = 2
    RUNTIME = 3  # cuda_runtime / hip runtime / legacy "Runtime"
    DRIVER = 4  # cuda_driver (cuLaunchKernel from Triton, ...)
    KERNEL = 5
    MEMCPY = 6
    MEMSET = 7
    GPU_USER_ANNOTATION = 8
    CUDA_SYNC = 9
    TRACE_SPAN = 10  # the profiler's own "Trace" span
    OTHER_CPU = 11
    OTHER_GPU = 12


_CATEGORY_NAMES: dict[str, Category] = {
    "cpu_op": Category.CPU_OP,
    "operator": Category.CPU_OP,
    "user_annotation": Category.USER_ANNOTATION,
    "python_function": Category.PYTHON_FUNCTION,
    "cuda_runtime": Category.RUNTIME,
    "hip_runtime": Category.RUNTIME,
    "runtime": Category.RUNTIME,
    "cuda_driver": Category.DRIVER,
    "hip_driver": Category.DRIVER,
    "driver": Category.DRIVER,
    "kernel": Category.KERNEL,
    "gpu_memcpy": Category.MEMCPY,
    "memcpy": Category.MEMCPY,
    "gpu_memset": Category.MEMSET,
    "memset": Category.MEMSET,
    "gpu_user_annotation": Category.GPU_USER_ANNOTATION,
    "cuda_sync": Category.CUDA_SYNC,
    "trace": Category.TRACE_SPAN,
}

GPU_CATEGORIES = frozenset(
    {
        Category.KERNEL,
        Category.MEMCPY,
        Category.MEMSET,
        Category.GPU_USER_ANNOTATION,
        Category.CUDA_SYNC,
        Category.OTHER_GPU,
    }
)


def category_of(cat: str, has_stream: bool) -> Category:
    """Map a raw ``cat`` string to a :class:`Category`; unknown ones by where they ran."""
    c = _CATEGORY_NAMES.get(cat.lower())
    if c is not None:
        return c
    return Category.OTHER_GPU if has_stream else Category.OTHER_CPU


class RawArgs(msgspec.Struct, gc=False, frozen=True):
    """The fields of an event's ``args`` that lumos reads; -1 / "" / null when absent.

    Identifiers are typed (decoded in C, every other key skipped); metadata whose type varies
    between PyTorch versions stays raw and is decoded, tolerantly, only for the few events that
    need it (collectives, gloo ops).
    """

    correlation: I64 = -1
    external_id: I64 = msgspec.field(name="External id", default=-1)
    external_id_legacy: I64 = msgspec.field(name="external id", default=-1)
    rf_id: I64 = msgspec.field(name="Record function id", default=-1)
    ev_idx: I64 = msgspec.field(name="Ev Idx", default=-1)
    seq_id: I64 = msgspec.field(name="Sequence number", default=-1)
    fwd_thread_id: I64 = msgspec.field(name="Fwd thread id", default=-1)
    device: I32 = -1
    stream: I64 | str = -1  # HIP runtime calls write it as a hex string ("0x0")
    num_bytes: I64 = msgspec.field(name="bytes", default=-1)
    # [memory] instant events (profile_memory=True); -1 when absent, as the compiled scan reads
    device_type: I64 = msgspec.field(name="Device Type", default=-1)
    device_id: I64 = msgspec.field(name="Device Id", default=-1)
    addr: I64 = msgspec.field(name="Addr", default=-1)
    mem_bytes: I64 = msgspec.field(name="Bytes", default=-1)
    total_allocated: I64 = msgspec.field(name="Total Allocated", default=-1)
    total_reserved: I64 = msgspec.field(name="Total Reserved", default=-1)
    # CUDA sync events (enable_cuda_sync_events)
    sync_kind: str = msgspec.field(name="cuda_sync_kind", default="")
    wait_on_stream: I64 = -1
    wait_on_event_record_corr_id: I64 = msgspec.field(
        name="wait_on_cuda_event_record_corr_id", default=-1
    )
    wait_on_event_id: I64 = msgspec.field(name="wait_on_cuda_event_id", default=-1)
    # collective metadata (record_param_comms, NCCL kernels) and input shapes (gloo, c10d)
    coll_name: msgspec.Raw = msgspec.field(name="Collective name", default=_NULL)
    in_nelems: msgspec.Raw = msgspec.field(name="In msg nelems", default=_NULL)
    out_nelems: msgspec.Raw = msgspec.field(name="Out msg nelems", default=_NULL)
    in_split: msgspec.Raw = msgspec.field(name="In split size", default=_NULL)
    out_split: msgspec.Raw = msgspec.field(name="Out split size", default=_NULL)
    dtype: msgspec.Raw = msgspec.field(name="dtype", default=_NULL)
    group_size: msgspec.Raw = msgspec.field(name="Group size", default=_NULL)
    pg_name: msgspec.Raw = msgspec.field(name="Process Group Name", default=_NULL)
    pg_desc: msgspec.Raw = msgspec.field(name="Process Group Description", default=_NULL)
    pg_ranks: msgspec.Raw = msgspec.field(name="Process Group Ranks", default=_NULL)
    coll_seq: msgspec.Raw = msgspec.field(name="Seq", default=_NULL)
    p2p_seq: msgspec.Raw = msgspec.field(name="p2p_seq", default=_NULL)
    input_dims: msgspec.Raw = msgspec.field(name="Input Dims", default=_NULL)
    input_type: msgspec.Raw = msgspec.field(name="Input type", default=_NULL)
    concrete_inputs: msgspec.Raw = msgspec.field(name="Concrete Inputs", default=_NULL)
    thread_name: msgspec.Raw = msgspec.field(name="name", default=_NULL)


_EMPTY_ARGS = RawArgs()


class RawEvent(msgspec.Struct, gc=False):
    """One entry of ``traceEvents``; only the fields lumos reads."""

    ph: str = ""
    cat: str = ""
    name: str = ""
    pid: I64 | str = 0
    tid: I64 | str = 0
    ts: float = 0.0
    dur: float = 0.0
    id: I64 | str | None = None
    bp: str = ""
    args: RawArgs = _EMPTY_ARGS


class RawTrace(msgspec.Struct, gc=False):
    """The top-level object of a Kineto trace file."""

    traceEvents: list[RawEvent]
    schemaVersion: Any = None
    deviceProperties: Any = None
    distributedInfo: Any = None
    baseTimeNanoseconds: Any = None
    traceName: Any = None


def decode_raw(v: msgspec.Raw) -> Any:
    """The JSON value held by ``v``; None when absent or not valid (raw values are not checked
    while the event is decoded, so bad bytes surface only here)."""
    b = bytes(v)
    if b == b"null":
        return None
    try:
        return msgspec.json.decode(b)
    except (msgspec.DecodeError, UnicodeDecodeError, RecursionError):
        return None


class EventMeta(msgspec.Struct, gc=False, frozen=True):
    """The metadata of one event's ``args``, decoded (kept only for the few events that
    carry collective, shape or CUDA-sync facts). Field names match :class:`RawArgs`."""

    coll_name: Any = None
    in_nelems: Any = None
    out_nelems: Any = None
    dtype: Any = None
    group_size: Any = None
    pg_name: Any = None
    pg_desc: Any = None
    pg_ranks: Any = None
    coll_seq: Any = None
    input_dims: Any = None
    input_type: Any = None
    concrete_inputs: Any = None
    sync_kind: str = ""
    stream: int = -1
    wait_on_stream: int = -1
    wait_on_event_record_corr_id: int = -1
    wait_on_event_id: int = -1


def meta_of(a: RawArgs, stream: int) -> EventMeta:
    """Decode the metadata fields of ``a`` into plain Python values."""
    return EventMeta(
        coll_name=decode_raw(a.coll_name),
        in_nelems=decode_raw(a.in_nelems),
        out_nelems=decode_raw(a.out_nelems),
        dtype=decode_raw(a.dtype),
        group_size=decode_raw(a.group_size),
        pg_name=decode_raw(a.pg_name),
        pg_desc=decode_raw(a.pg_desc),
        pg_ranks=decode_raw(a.pg_ranks),
        coll_seq=decode_raw(a.coll_seq),
        input_dims=decode_raw(a.input_dims),
        input_type=decode_raw(a.input_type),
        concrete_inputs=decode_raw(a.concrete_inputs),
        sync_kind=a.sync_kind,
        stream=stream,
        wait_on_stream=a.wait_on_stream,
        wait_on_event_record_corr_id=a.wait_on_event_record_corr_id,
        wait_on_event_id=a.wait_on_event_id,
    )
