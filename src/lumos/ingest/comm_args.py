"""Readers of the arguments Kineto records on collective events: integers that may be strings,
rank lists that may be JSON text, and the element counts and types of "Input Dims" / "Input type"
(a tensor, or a tensor list, at a position); and a call's size as its kind defines it
(:func:`collective_size_bytes`, the convention of :mod:`lumos.ingest.kineto_comms`). Each returns
-1, ``""`` or ``()`` for what the event does not say, never raises."""

from __future__ import annotations

from typing import Any

import msgspec

from lumos.ingest.comm_names import dtype_size_bytes
from lumos.ingest.kineto_schema import EventMeta

__all__ = ["as_int", "collective_size_bytes", "dims_at", "dims_bytes", "ranks_of"]

#: Kinds whose size is the tensor itself: input and output are the same message.
_SAME_IN_OUT = frozenset(
    {"all_reduce", "broadcast", "reduce", "barrier", "send", "recv", "send_recv"}
)


def collective_size_bytes(kind: str, in_bytes: int, out_bytes: int, group_size: int) -> int:
    """The size of one collective call as its kind defines it (:mod:`lumos.ingest.kineto_comms`); -1 if unknown.

    >>> collective_size_bytes("all_gather", 50_272, 402_176, 8)
    402176
    >>> collective_size_bytes("reduce_scatter", 587_202_560, 73_400_320, 8)
    587202560
    >>> collective_size_bytes("all_gather", 1024, -1, 4), collective_size_bytes("gather", 10, 40, 4)
    (4096, 40)
    """
    known = [b for b in (in_bytes, out_bytes) if b >= 0]
    if not known:
        return -1
    g = group_size if group_size > 0 else 0
    if kind in _SAME_IN_OUT or kind == "all_to_all":
        return in_bytes if in_bytes >= 0 else out_bytes
    if kind == "all_gather":
        if out_bytes >= 0:
            return out_bytes
        return in_bytes * g if g else -1
    if kind == "reduce_scatter":
        if in_bytes >= 0:
            return in_bytes
        return out_bytes * g if g else -1
    if kind in ("gather", "scatter"):
        # the root's full buffer; one side may be only the shard (see the docstring)
        full = max(known)
        if g and (len(known) == 1 or in_bytes == out_bytes):
            full = max(full, min(known) * g)
        return full
    return max(known)


def as_int(v: Any) -> int:
    if type(v) is int:  # the common cases first: called four times per collective event
        return v
    if v is None or isinstance(v, bool):
        return -1
    if isinstance(v, int):
        return v
    if isinstance(v, str) and v.strip().lstrip("-").isdigit():
        return int(v.strip())
    return -1


def ranks_of(v: Any) -> tuple[int, ...]:
    if isinstance(v, str):
        try:
            v = msgspec.json.decode(v.encode())
        except msgspec.DecodeError:
            return ()
    if isinstance(v, list):
        return tuple(x for x in v if isinstance(x, int) and not isinstance(x, bool))
    return ()


def _numel(dims: Any, pos: int = 0) -> int:
    """Elements of the ``pos``-th tensor (or tensor list) in an "Input Dims" value."""
    if not isinstance(dims, list) or len(dims) <= pos:
        return -1
    first = dims[pos]
    if isinstance(first, list) and first and all(isinstance(d, list) for d in first):
        return sum(max(_numel([t]), 0) for t in first) if first else -1
    if isinstance(first, list) and all(isinstance(d, int) for d in first):
        n = 1
        for d in first:
            n *= d
        return n
    return -1


def _type_at(types: Any, pos: int = 0) -> str:
    if isinstance(types, list) and len(types) > pos and isinstance(types[pos], str):
        return types[pos]
    return ""


def dims_at(a: EventMeta, pos: int) -> tuple[int, str]:
    """(numel, type) of the ``pos``-th argument when it is a tensor or a non-empty tensor list;
    ``(-1, "")`` for scalars and empty lists (``[]`` with type "Scalar", "TensorList" or "")."""
    t = _type_at(a.input_type, pos)
    dims = a.input_dims
    if not isinstance(dims, list) or len(dims) <= pos:
        return -1, ""
    d = dims[pos]
    tensor = dtype_size_bytes(t) > 0
    tensor_list = isinstance(d, list) and bool(d) and all(isinstance(x, list) for x in d)
    if not (tensor or tensor_list):
        return -1, ""
    n = _numel(dims, pos)
    return (n, t) if n >= 0 else (-1, "")


def dims_bytes(numel: int, type_name: str, row_dtype: str) -> int:
    e = dtype_size_bytes(type_name) if type_name else 0
    e = e or (dtype_size_bytes(row_dtype) if row_dtype else 0)
    return numel * e if numel >= 0 and e else -1
