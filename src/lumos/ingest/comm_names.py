"""Names of collectives and dtypes as PyTorch, NCCL, RCCL and gloo spell them, normalized.

Every spelling of a collective maps to one lower-case kind (``all_reduce``, ``all_gather``,
``reduce_scatter``, ``all_to_all``, ``broadcast``, ``reduce``, ``gather``, ``scatter``,
``barrier``, ``send``, ``recv``, ``send_recv``), or ``unknown``.

>>> normalize_collective("_allgather_base"), normalize_collective("nccl:all_reduce")
('all_gather', 'all_reduce')
>>> kernel_collective("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)")
'all_reduce'
>>> dtype_size_bytes("c10::BFloat16"), dtype_size_bytes("Float"), dtype_size_bytes("long int")
(2, 4, 8)
"""

from __future__ import annotations

import re

__all__ = [
    "COLLECTIVE_KINDS",
    "dtype_size_bytes",
    "is_comm_kernel",
    "kernel_collective",
    "normalize_collective",
]

COLLECTIVE_KINDS = (
    "all_reduce",
    "reduce",
    "all_gather",
    "gather",
    "scatter",
    "broadcast",
    "all_to_all",
    "reduce_scatter",
    "barrier",
    "send",
    "recv",
    "send_recv",
    "unknown",
)

_PREFIX_RE = re.compile(r"^(?:c10d::|nccl:|gloo:|rccl:|mpi:|ucc:)")
_KERNEL_RE = re.compile(r"(?:nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+)", re.IGNORECASE)

_ALIASES: dict[str, str] = {
    "allreduce": "all_reduce",
    "allreducecoalesced": "all_reduce",
    "allreduce_coalesced": "all_reduce",
    "reduce": "reduce",
    "allgather": "all_gather",
    "allgatherbase": "all_gather",
    "allgatherintotensor": "all_gather",
    "allgatherintotensorcoalesced": "all_gather",
    "allgathercoalesced": "all_gather",
    "gather": "gather",
    "scatter": "scatter",
    "broadcast": "broadcast",
    "alltoall": "all_to_all",
    "alltoallbase": "all_to_all",
    "alltoallv": "all_to_all",
    "reducescatter": "reduce_scatter",
    "reducescatterbase": "reduce_scatter",
    "reducescattertensor": "reduce_scatter",
    "reducescattertensorcoalesced": "reduce_scatter",
    "barrier": "barrier",
    "send": "send",
    "recv": "recv",
    "recvanysource": "recv",
    "sendrecv": "send_recv",
}

_DTYPE_BYTES: dict[str, int] = {
    "float": 4,
    "float32": 4,
    "double": 8,
    "float64": 8,
    "half": 2,
    "float16": 2,
    "bfloat16": 2,
    "int": 4,
    "int32": 4,
    "long": 8,
    "longint": 8,
    "int64": 8,
    "short": 2,
    "shortint": 2,
    "int16": 2,
    "char": 1,
    "signedchar": 1,
    "int8": 1,
    "byte": 1,
    "unsignedchar": 1,
    "uint8": 1,
    "bool": 1,
    "complexfloat": 8,
    "complexdouble": 16,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1,
}


def normalize_collective(name: str) -> str:
    """The normalized kind of a collective op or annotation name (``unknown`` if not one)."""
    base = _PREFIX_RE.sub("", name.strip()).lower().replace("_", "").replace(" ", "")
    return _ALIASES.get(base, "unknown")


def kernel_collective(kernel_name: str, collective_arg: str | None = None) -> str:
    """The kind of an NCCL/RCCL kernel from its name (``Generic`` kernels use the arg)."""
    m = _KERNEL_RE.search(kernel_name)
    if m is None:
        return "unknown"
    word = m.group(1)
    if word.lower() == "generic" or (word.lower() == "sendrecv" and collective_arg):
        return normalize_collective(collective_arg) if collective_arg else "unknown"
    return _ALIASES.get(word.lower(), "unknown")


def is_comm_kernel(kernel_name: str) -> bool:
    """True for NCCL/RCCL device kernels (communication on a GPU stream)."""
    return _KERNEL_RE.search(kernel_name) is not None


def dtype_size_bytes(dtype: str) -> int:
    """Bytes per element of a dtype as PyTorch prints it; 0 when unknown."""
    key = dtype.strip().lower()
    for prefix in ("c10::", "torch.", "at::"):
        if key.startswith(prefix):
            key = key[len(prefix) :]
    return _DTYPE_BYTES.get(key.replace(" ", ""), 0)
