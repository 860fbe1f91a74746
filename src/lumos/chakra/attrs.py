"""Chakra attributes and small messages in pure Python: ``AttributeProto``, ``IOInfo``, metadata.

An :class:`Attr` keeps the exact oneof kind it was written with (``"int64_val"``,
``"uint64_val"``, ``"string_list"``...), so a decoded attribute re-encodes to the same bytes.
:func:`attr` infers the kind from a Python value the way upstream writers do (bool -> bool_val,
int -> int64_val, float -> double_val, str -> string_val, bytes -> bytes_val, lists likewise);
pass ``kind=`` for the conventions that use other types (``comm_src``/``comm_dst``/``comm_tag``
are int32, ``tensor_size`` is uint64).

These helpers are for the few messages handled one at a time (metadata, the attributes of a
node a user asks for, builders); bulk node decoding is compiled in :mod:`lumos.chakra._wire`.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lumos.chakra.schema import ATTR_KIND_BY_NAME, ATTR_KIND_NAMES

__all__ = [
    "Attr",
    "IOInfo",
    "attr",
    "decode_attr",
    "decode_io_info",
    "encode_attr",
    "encode_io_info",
    "read_varint",
    "varint_bytes",
]

_MASK64 = (1 << 64) - 1
_FIXED = {
    "double": "<d",
    "float": "<f",
    "fixed32": "<I",
    "fixed64": "<Q",
    "sfixed32": "<i",
    "sfixed64": "<q",
}
_WIRE_OF_BASE = {
    "double": 1, "float": 5, "fixed32": 5, "fixed64": 1, "sfixed32": 5, "sfixed64": 1,
    "int32": 0, "int64": 0, "uint32": 0, "uint64": 0, "sint32": 0, "sint64": 0, "bool": 0,
    "string": 2, "bytes": 2,
}  # fmt: skip


class WireError(ValueError):
    """Malformed protobuf bytes in a small message (callers turn it into ChakraFormatError)."""


@dataclass(frozen=True, slots=True)
class Attr:
    """One ``AttributeProto``: ``name``, ``value`` and the oneof ``kind`` that carries it."""

    name: str
    value: Any
    kind: str
    doc_string: str = ""

    def __post_init__(self) -> None:
        if self.kind not in ATTR_KIND_BY_NAME and self.kind != "":
            raise ValueError(f"unknown attribute kind {self.kind!r}")


@dataclass(frozen=True, slots=True)
class IOInfo:
    """``IOInfo{values, shapes, types}``: upstream stores these as strings."""

    values: str = ""
    shapes: str = ""
    types: str = ""


def attr(name: str, value: Any, kind: str | None = None) -> Attr:
    """An :class:`Attr` whose kind is ``kind`` or inferred from ``value``'s Python type.

    >>> attr("comm_size", 1048576)
    Attr(name='comm_size', value=1048576, kind='int64_val', doc_string='')
    >>> attr("comm_src", 3, "int32_val").kind
    'int32_val'
    """
    if kind is None:
        kind = _infer_kind(value)
    return Attr(name, value, kind)


def _infer_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool_val"
    if isinstance(value, int):
        return "int64_val"
    if isinstance(value, float):
        return "double_val"
    if isinstance(value, str):
        return "string_val"
    if isinstance(value, bytes):
        return "bytes_val"
    if isinstance(value, Sequence) and value:
        return _infer_kind(value[0]).replace("_val", "_list")
    raise TypeError(f"cannot infer a Chakra attribute kind for {type(value).__name__}; pass kind=")


def varint_bytes(v: int) -> bytes:
    """Protobuf varint of ``v`` (negative numbers as their 64-bit two's complement)."""
    v &= _MASK64
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


_VARINT_BASES = frozenset(("int32", "int64", "uint32", "uint64", "bool", "sint32", "sint64"))
_LIMITS = np.uint64(1) << (np.arange(1, 10, dtype=np.uint64) * np.uint64(7))


def _packed_varints(base: str, values: Any) -> bytes:
    """The varints of a list of integers, vectorised (the same bytes as :func:`varint_bytes`
    on each: negative numbers as 64-bit two's complement, ``sint*`` zigzag-encoded)."""
    v = np.asarray(values, dtype=np.int64).reshape(-1)
    if len(v) == 0:
        return b""
    if base in ("sint32", "sint64"):
        v = (v << np.int64(1)) ^ (v >> np.int64(63))
    u = v.view(np.uint64)
    nb = np.ones(len(u), dtype=np.uint8)  # bytes per value
    for limit in _LIMITS:
        big = u >= limit
        if not big.any():
            break
        nb += big
    k = np.arange(int(nb.max()), dtype=np.uint8)
    groups = ((u[:, None] >> (k.astype(np.uint64) * np.uint64(7))[None, :])
              & np.uint64(0x7F)).astype(np.uint8)  # fmt: skip
    groups |= (k[None, :] < (nb[:, None] - np.uint8(1))).astype(np.uint8) << np.uint8(7)
    return groups[k[None, :] < nb[:, None]].tobytes()


def read_varint(b: bytes | memoryview, pos: int) -> tuple[int, int]:
    """``(value, next position)`` of the varint at ``pos``; raises :class:`WireError`."""
    result = shift = 0
    n = len(b)
    while True:
        if pos >= n:
            raise WireError("truncated varint")
        c = b[pos]
        pos += 1
        result |= (c & 0x7F) << shift
        if c < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise WireError("varint longer than 10 bytes")


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _encode_scalar(base: str, v: Any) -> bytes:
    if base in _FIXED:
        return struct.pack(_FIXED[base], v)
    if base in ("sint32", "sint64"):
        return varint_bytes(((v << 1) ^ (v >> 63)) & _MASK64)
    if base in ("string", "bytes"):
        data = v.encode("utf-8") if isinstance(v, str) else bytes(v)
        return varint_bytes(len(data)) + data
    return varint_bytes(int(v))


def _decode_scalar(base: str, b: bytes, pos: int) -> tuple[Any, int]:
    if base in _FIXED:
        width = struct.calcsize(_FIXED[base])
        if pos + width > len(b):
            raise WireError("fixed-width value past end of message")
        return struct.unpack_from(_FIXED[base], b, pos)[0], pos + width
    if base in ("string", "bytes"):
        n, pos = read_varint(b, pos)
        if pos + n > len(b):
            raise WireError("string past end of message")
        raw = bytes(b[pos : pos + n])
        if base == "string":
            try:
                return raw.decode("utf-8"), pos + n
            except UnicodeDecodeError:
                raise WireError("string attribute is not valid UTF-8") from None
        return raw, pos + n
    v, pos = read_varint(b, pos)
    if base == "bool":
        return v != 0, pos
    if base in ("sint32", "sint64"):
        return (v >> 1) ^ -(v & 1), pos
    if base == "int32":
        v &= 0xFFFFFFFF
        return (v - (1 << 32) if v >= 1 << 31 else v), pos
    if base == "uint32":
        return v & 0xFFFFFFFF, pos
    if base == "int64":
        return _signed64(v), pos
    return v, pos


def _skip(b: bytes, pos: int, wt: int) -> int:
    if wt == 0:
        return read_varint(b, pos)[1]
    if wt == 2:
        n, pos = read_varint(b, pos)
        end = pos + n
    elif wt in (1, 5):
        end = pos + (8 if wt == 1 else 4)
    else:
        raise WireError(f"unsupported wire type {wt}")
    if end > len(b):
        raise WireError("field past end of message")
    return end


def encode_attr(a: Attr) -> bytes:
    """Canonical ``AttributeProto`` bytes (the oneof value is written even when it is zero)."""
    out = bytearray()
    if a.name:
        out += b"\x0a" + _encode_scalar("string", a.name)
    if a.doc_string:
        out += b"\x12" + _encode_scalar("string", a.doc_string)
    if not a.kind:
        return bytes(out)
    fno = ATTR_KIND_BY_NAME[a.kind]
    base, _, shape = a.kind.rpartition("_")
    if shape == "val":
        out += varint_bytes(fno << 3 | _WIRE_OF_BASE[base]) + _encode_scalar(base, a.value)
        return bytes(out)
    if base in ("string", "bytes"):
        body = b"".join(b"\x0a" + _encode_scalar(base, v) for v in a.value)
    else:
        try:
            packed = _packed_varints(base, a.value) if base in _VARINT_BASES else None
        except OverflowError:  # a uint64 past int64: the scalar path masks it
            packed = None
        if packed is None:
            packed = b"".join(_encode_scalar(base, v) for v in a.value)
        body = b"\x0a" + varint_bytes(len(packed)) + packed if packed else b""
    out += varint_bytes(fno << 3 | 2) + varint_bytes(len(body)) + body
    return bytes(out)


def decode_attr(b: bytes | memoryview) -> Attr:
    """Decode one ``AttributeProto`` body; unknown fields are skipped. Raises :class:`WireError`."""
    b = bytes(b)
    name, doc, kind, value = "", "", "", None
    pos = 0
    while pos < len(b):
        tag, pos = read_varint(b, pos)
        fno, wt = tag >> 3, tag & 7
        if fno in (1, 2) and wt == 2:
            s, pos = _decode_scalar("string", b, pos)
            if fno == 1:
                name = s
            else:
                doc = s
        elif fno in ATTR_KIND_NAMES:
            kind = ATTR_KIND_NAMES[fno]
            base, _, shape = kind.rpartition("_")
            want = _WIRE_OF_BASE[base] if shape == "val" else 2
            if wt != want:
                raise WireError(f"attribute {name or '?'!r}: {kind} has wire type {wt}")
            if shape == "val":
                value, pos = _decode_scalar(base, b, pos)
            else:
                n, pos = read_varint(b, pos)
                if pos + n > len(b):
                    raise WireError(f"attribute {name or '?'!r}: list runs past its message")
                value, pos = _decode_list(base, b[pos : pos + n]), pos + n
        else:
            pos = _skip(b, pos, wt)
    return Attr(name, value, kind, doc)


def _decode_list(base: str, body: bytes) -> list[Any]:
    values: list[Any] = []
    pos = 0
    want = _WIRE_OF_BASE[base]
    while pos < len(body):
        tag, pos = read_varint(body, pos)
        fno, wt = tag >> 3, tag & 7
        if fno != 1:
            pos = _skip(body, pos, wt)
        elif wt == 2 and want != 2:
            n, pos = read_varint(body, pos)
            end = pos + n
            if end > len(body):
                raise WireError("packed list runs past its message")
            while pos < end:
                v, pos = _decode_scalar(base, body[:end], pos)
                values.append(v)
        else:
            v, pos = _decode_scalar(base, body, pos)
            values.append(v)
    return values


def encode_io_info(io: IOInfo) -> bytes:
    """``IOInfo`` body bytes (empty strings omitted, as proto3 does)."""
    out = bytearray()
    for fno, s in ((1, io.values), (2, io.shapes), (3, io.types)):
        if s:
            out += bytes([fno << 3 | 2]) + _encode_scalar("string", s)
    return bytes(out)


def decode_io_info(b: bytes | memoryview) -> IOInfo:
    """Decode an ``IOInfo`` body; raises :class:`WireError`."""
    b = bytes(b)
    fields = ["", "", ""]
    pos = 0
    while pos < len(b):
        tag, pos = read_varint(b, pos)
        fno, wt = tag >> 3, tag & 7
        if fno in (1, 2, 3) and wt == 2:
            fields[fno - 1], pos = _decode_scalar("string", b, pos)
        else:
            pos = _skip(b, pos, wt)
    return IOInfo(*fields)
