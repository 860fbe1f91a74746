"""Names of collectives and dtypes as PyTorch, NCCL, RCCL and gloo spell them, normalized.

Every spelling of a collective maps to one lower-case kind (``all_reduce``, ``all_gather``,
``reduce_scatter``, ``all_to_all``, ``broadcast``, ``reduce``, ``gather``, ``scatter``,
``barrier``, ``send``, ``recv``, ``send_recv``), or ``unknown``.

>>> normalize_collective("_allgather_base"), normalize_collective("nccl:all_reduce")
('all_gather', 'all_reduce')
>>> kernel_collective("ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*)")
'all_reduce'
>>> kernel_collective("void deep_ep::intranode::dispatch<8, 768, 8192>(int4*, float*)")
'all_to_all'
>>> is_comm_kernel("void deep_ep::layout::get_dispatch_layout<256, 32, 8>(long const*)")
False

Communication kernels are NCCL/RCCL device kernels plus the few other libraries' kernels listed
in :data:`OTHER_COMM_KERNELS`, each pattern with the reason it moves data between GPUs. The list
is deliberately narrow: a false positive turns compute into communication in every graph and
breakdown, so a name is matched at an identifier boundary (``gemm_one_shot_all_reduce`` is a
fused GEMM, not an all-reduce) and generic words (``dispatch``, ``combine``) only inside their
library's namespace.
>>> dtype_size_bytes("c10::BFloat16"), dtype_size_bytes("Float"), dtype_size_bytes("long int")
(2, 4, 8)
"""

from __future__ import annotations

import re
from functools import lru_cache

__all__ = [
    "COLLECTIVE_KINDS",
    "OTHER_COMM_KERNELS",
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

#: Start of an identifier: not preceded by a letter, digit or underscore.
_B = r"(?<![A-Za-z0-9_])"
#: End of an identifier.
_E = r"(?![A-Za-z0-9_])"

#: Communication kernels beyond NCCL/RCCL: (pattern, collective kind, why it is communication).
#: Such kernels have no host-side collective call, so the graph takes their kind from here.
OTHER_COMM_KERNELS: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (
        re.compile(
            rf"{_B}deep_ep::(?:intranode|internode|internode_ll)::(?:dispatch|combine)"
            rf"(?:_pcie)?{_E}"
        ),
        "all_to_all",
        "DeepEP MoE dispatch/combine: each rank sends tokens to the experts' ranks over "
        "NVLink (intranode) or RDMA/NVSHMEM (internode, internode_ll low-latency)",
    ),
    (
        re.compile(
            rf"{_B}(?:cached_)?notify_(?:dispatch|combine){_E}"
            rf"|{_B}deep_ep::internode::cached_notify{_E}"
        ),
        "all_to_all",
        "DeepEP notify kernels: exchange per-rank token counts (and barrier) before a "
        "dispatch/combine, part of that all-to-all",
    ),
    (
        re.compile(rf"{_B}deep_ep::intranode::barrier{_E}"),
        "barrier",
        "DeepEP intranode barrier: ranks signal each other through NVLink buffers",
    ),
    (
        re.compile(rf"{_B}nvshmem[ix]?_[A-Za-z0-9_]*"),
        "",  # kind from the words in the name (see _nvshmem_kind)
        "NVSHMEM device kernels (nvshmem_/nvshmemi_/nvshmemx_): the library only moves data "
        "or synchronizes between PEs",
    ),
    (
        re.compile(rf"{_B}cross_device_reduce(?:_[12]stage)?{_E}"),
        "all_reduce",
        "vLLM custom all-reduce (cross_device_reduce_1stage/2stage over NVLink IPC buffers)",
    ),
    (
        re.compile(
            rf"{_B}(?:multimem_)?(?:one|two)_shot_all_reduce(?:_kernel)?{_E}"
            rf"|{_B}multimem_all_reduce(?:_kernel)?{_E}"
            rf"|{_B}(?:one|two)ShotAllReduceKernel{_E}"
        ),
        "all_reduce",
        "one-/two-shot all-reduce of PyTorch symmetric memory (one_shot_all_reduce_kernel, "
        "multimem_*) and TensorRT-LLM (oneShotAllReduceKernel): read peers' buffers over NVLink",
    ),
)

_NVSHMEM_WORDS: tuple[tuple[str, str], ...] = (
    ("alltoall", "all_to_all"),
    ("reducescatter", "reduce_scatter"),
    ("fcollect", "all_gather"),
    ("collect", "all_gather"),
    ("allgather", "all_gather"),
    ("broadcast", "broadcast"),
    ("reduce", "all_reduce"),  # OpenSHMEM team reductions leave the result on every PE
    ("barrier", "barrier"),
    ("sync", "barrier"),
)


def _nvshmem_kind(name: str) -> str:
    flat = name.lower().replace("_", "")
    for word, kind in _NVSHMEM_WORDS:
        if word in flat:
            return kind
    return "unknown"


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


@lru_cache(maxsize=4096)  # called per collective event with a handful of distinct names
def normalize_collective(name: str) -> str:
    """The normalized kind of a collective op or annotation name (``unknown`` if not one)."""
    base = _PREFIX_RE.sub("", name.strip()).lower().replace("_", "").replace(" ", "")
    return _ALIASES.get(base, "unknown")


def kernel_collective(kernel_name: str, collective_arg: str | None = None) -> str:
    """The kind of a communication kernel from its name (``unknown`` when it says none).

    NCCL/RCCL ``Generic`` kernels (and SendRecv ones serving a collective) use the arg;
    other libraries' kernels take the kind :data:`OTHER_COMM_KERNELS` gives them.
    """
    m = _KERNEL_RE.search(kernel_name)
    if m is None:
        for pattern, kind, _why in OTHER_COMM_KERNELS:
            hit = pattern.search(kernel_name)
            if hit is not None:
                return kind or _nvshmem_kind(hit.group(0))
        return "unknown"
    word = m.group(1)
    if word.lower() == "generic" or (word.lower() == "sendrecv" and collective_arg):
        return normalize_collective(collective_arg) if collective_arg else "unknown"
    return _ALIASES.get(word.lower(), "unknown")


def is_comm_kernel(kernel_name: str) -> bool:
    """True for a communication kernel on a GPU stream: NCCL/RCCL device kernels and the
    kernels of :data:`OTHER_COMM_KERNELS` (DeepEP, NVSHMEM, custom all-reduces)."""
    if _KERNEL_RE.search(kernel_name) is not None:
        return True
    return any(p.search(kernel_name) is not None for p, _kind, _why in OTHER_COMM_KERNELS)


@lru_cache(maxsize=1024)
def dtype_size_bytes(dtype: str) -> int:
    """Bytes per element of a dtype as PyTorch prints it; 0 when unknown."""
    key = dtype.strip().lower()
    for prefix in ("c10::", "torch.", "at::"):
        if key.startswith(prefix):
            key = key[len(prefix) :]
    return _DTYPE_BYTES.get(key.replace(" ", ""), 0)
