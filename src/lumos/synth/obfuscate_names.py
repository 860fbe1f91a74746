"""What obfuscation keeps and what it renames: the rules Kineto and Chakra obfuscation share.

A renamed name is ``<class>.<hash>``: its op class (:func:`lumos.synth.classes.class_of`,
spelled so that ``class_of`` of the new name gives the same class again) and
HMAC-SHA256(key, original name) as :data:`HASH_HEX` lower-case hex digits. One key gives one
name the same hash in every file (a job's ranks stay consistent); without a key a random one
is drawn per :class:`Namer` (one invocation), so two invocations cannot be linked.

Names kept as they are, because lumos (and other tools) read meaning from them and they are
schema vocabulary, not a user's words:

==============================  ==============================================================
name                            why it is kept
==============================  ==============================================================
``ProfilerStep#N``              iterations are found by it
CUDA/HIP runtime and driver     ``cudaStreamSynchronize``, ``cudaEventRecord``... drive sync
calls (public API names)        and event dependencies and launch detection
``record_param_comms``,         collectives are found and typed by them (``c10d::allreduce_``,
``c10d::``/``nccl:``/``gloo:``  ``nccl:all_reduce``, ``gloo:broadcast``), when the part after
``rccl:`` + a collective        the prefix is a known collective (else renamed)
CUPTI copy names                ``Memcpy HtoD (Pageable -> Device)``: pageable copies block
==============================  ==============================================================

Communication kernels are renamed ``ncclDevKernel_<Kind>_<hash>`` (``AllReduce``,
``SendRecv``, ``Generic``... as the original said it, else the kind lumos found), so
:func:`lumos.ingest.comm_names.is_comm_kernel` and ``kernel_collective`` still see them.
Process-group names that are numbers are kept (ranks join on them); others, and group
descriptions other than PyTorch's ``default_pg``/``undefined``, get ``pg_<hash>`` (the same
on every rank under one key).

Shapes: ``keep``, ``drop``, or ``bucket``: every dimension rounded up to a power of two
(0 and 1 stay), which keeps the order of magnitude a cost model needs but not the exact model
width. Durations: optionally multiplied by a seeded factor in ``[1 - pct/100, 1 + pct/100]``.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import secrets
from functools import lru_cache
from typing import Any

from lumos.errors import ConfigError
from lumos.graph.model import TaskKind
from lumos.ingest.comm_names import is_comm_kernel, kernel_collective, normalize_collective
from lumos.synth.classes import class_of
from lumos.synth.leaks import MIN_LEN, is_vocabulary, tokens_of

__all__ = [
    "HASH_HEX",
    "KEY_ENV",
    "SHAPE_MODES",
    "Namer",
    "bucket_dims",
    "is_api_name",
    "is_comm_op",
    "is_step_name",
]

#: Hex digits of the keyed hash in a renamed name (48 bits: no collision among a trace's
#: names in practice, and one is an error, never a silent merge).
HASH_HEX = 12
#: Environment variable holding the key when ``--key`` is not given.
KEY_ENV = "LUMOS_OBFUSCATE_KEY"
SHAPE_MODES = ("keep", "bucket", "drop")

_STEP = re.compile(r"ProfilerStep#\d+")
_API = re.compile(r"(cuda|cu|hip|hsa)[A-Z][A-Za-z0-9_]*")
_COMM_OP = re.compile(r"(record_param_comms|(c10d::|nccl:|gloo:|rccl:|mpi:|ucc:)([A-Za-z_]+))"
                      r"(#\d+)?")  # fmt: skip
_NCCL_WORD = re.compile(r"(?:nccl|rccl)(?:Dev)?Kernel_([A-Za-z]+)", re.I)
_KIND_WORD = {
    "all_reduce": "AllReduce", "reduce": "Reduce", "all_gather": "AllGather",
    "gather": "Gather", "scatter": "Scatter", "broadcast": "Broadcast", "all_to_all": "AllToAll",
    "reduce_scatter": "ReduceScatter", "barrier": "Barrier", "send": "Send", "recv": "Recv",
    "send_recv": "SendRecv", "unknown": "Generic",
}  # fmt: skip
_NUMERIC = re.compile(r"-?\d+")
_PG_WORDS = frozenset({"default_pg", "undefined", ""})
#: Spellings for classes whose own name ``class_of`` would not read back as that class.
_SPELLING = {
    "reduction": "reduction.reduce",
    "sort": "sort.scan",
    "cpu.reduction": "cpu.reduction.reduce",
    "cpu.sort": "cpu.sort.scan",
    "cpu.alloc": "cpu.alloc::view",
    "runtime.sync": "runtime.synchronize",
    "runtime.other": "runtime.other",
    "cpu.comm": "cpu.comm.ProcessGroup",
}


def is_step_name(name: str) -> bool:
    """``ProfilerStep#N``."""
    return _STEP.fullmatch(name) is not None


def is_api_name(name: str) -> bool:
    """A CUDA/HIP runtime or driver API name (``cudaLaunchKernel``, ``hipMemcpyAsync``)."""
    return _API.fullmatch(name) is not None


def is_comm_op(name: str) -> bool:
    """A host-side collective op or annotation lumos types by name (kept as it is): PyTorch's
    spellings, whose words are all vocabulary (an unusual spelling is renamed instead)."""
    m = _COMM_OP.fullmatch(name)
    if m is None or not _safe(name):
        return False
    if m.group(1) == "record_param_comms":
        return True
    rest = m.group(3)
    return normalize_collective(rest) != "unknown" or rest.strip("_") in ("wait", "coalesced")


def bucket_dims(dims: Any) -> Any:
    """``dims`` (nested lists of ints) with every positive integer rounded up to a power of two.

    >>> bucket_dims([[3, 1000], [], [1, 0, 64]])
    [[4, 1024], [], [1, 0, 64]]
    """
    if isinstance(dims, list):
        return [bucket_dims(d) for d in dims]
    if isinstance(dims, int) and not isinstance(dims, bool) and dims > 1:
        return 1 << (dims - 1).bit_length()
    return dims


@lru_cache(maxsize=65536)
def _safe(text: str) -> bool:
    return all(len(t) < MIN_LEN or is_vocabulary(t) for t in tokens_of(text))


def _spell(cls: str) -> str:
    return _SPELLING.get(cls, cls)


class Namer:
    """Renames names consistently within one invocation (same name -> same new name)."""

    def __init__(self, key: str | bytes | None = None) -> None:
        if key is None:
            key = os.environ.get(KEY_ENV) or None
        if isinstance(key, str):
            if not key:
                raise ConfigError("--key is empty")
            key = key.encode("utf-8")
        self.keyed = key is not None
        self._key = key if key is not None else secrets.token_bytes(32)
        self._memo: dict[tuple[str, int], str] = {}
        self._owner: dict[str, str] = {}

    def digest(self, text: str) -> str:
        """HMAC-SHA256(key, text), :data:`HASH_HEX` hex digits."""
        mac = hmac.new(self._key, text.encode("utf-8", "surrogatepass"), hashlib.sha256)
        return mac.hexdigest()[:HASH_HEX]

    def _claim(self, new: str, old: str) -> str:
        prev = self._owner.setdefault(new, old)
        if prev != old:
            raise ConfigError(f"obfuscated names collide ({new}); use another --key")
        return new

    def task(self, name: str, kind: int) -> str:
        """The new name of a task of :class:`TaskKind` ``kind`` (kept names returned as they
        are; see the module docstring)."""
        key = (name, int(kind))
        out = self._memo.get(key)
        if out is None:
            out = self._memo[key] = self._rename(name, int(kind))
        return out

    def _rename(self, name: str, kind: int) -> str:
        if is_step_name(name):
            return name
        if kind == TaskKind.RUNTIME and is_api_name(name):
            return name
        if kind in (TaskKind.MEMCPY, TaskKind.MEMSET) and self.safe(name):
            return name
        if kind in (TaskKind.CPU_OP, TaskKind.CPU_COMM) and is_comm_op(name):
            return name
        if kind in (TaskKind.KERNEL, TaskKind.COMM) and is_comm_kernel(name):
            m = _NCCL_WORD.search(name)
            word = m.group(1) if m else _KIND_WORD[kernel_collective(name)]
            if not is_vocabulary(word):
                word = "Generic"
            return self._claim(f"ncclDevKernel_{word}_{self.digest(name)}", name)
        cls = class_of(name, kind if kind != TaskKind.COMM else TaskKind.KERNEL)
        return self._claim(f"{_spell(cls)}.{self.digest(name)}", name)

    def span(self, name: str) -> str:
        """The new name of a host-side span (user annotation, module, python function, parent
        op): classed as a CPU op of that name."""
        return self.task(name, TaskKind.CPU_OP)

    def pg(self, value: str) -> str:
        """A process-group name or description: numbers and PyTorch's own words kept."""
        if _NUMERIC.fullmatch(value) or value in _PG_WORDS:
            return value
        return self._claim(f"pg_{self.digest('pg:' + value)}", "pg:" + value)

    @staticmethod
    def safe(text: str) -> bool:
        """True when every token of ``text`` is vocabulary or shorter than a secret (it can be
        written as it is)."""
        return _safe(text)

    def text(self, text: str) -> str:
        """Free text: kept when :meth:`safe`, else ``""``."""
        return text if self.safe(text) else ""
